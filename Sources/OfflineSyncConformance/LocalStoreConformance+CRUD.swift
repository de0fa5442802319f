import OfflineSync

extension LocalStoreConformance {
    static let crudCases: [ConformanceCase] = [
        ConformanceCase("defineAndListTables") { ctx in
            let store = try await ctx.open()
            let initial = try await must(await store.read { tx in try tx.tables() }, "listing tables of a fresh store")
            try expectEqual(initial.map(\.name), [], "tables of a fresh store")
            let schemas = CRUDFixtures.schemas
            for schema in schemas {
                try await must(await store.defineTable(schema), "defining \(schema.name)")
            }
            let expected = schemas.sorted { Value.utf8Less($0.name, $1.name) }
            let (listed, each) = try await must(await store.read { tx in
                (try tx.tables(), try schemas.map { try tx.schema(of: $0.name) })
            }, "listing tables")
            try expectEqual(listed.map(\.name), expected.map(\.name), "tables() names, ordered by UTF-8 bytes")
            try expectEqual(listed, expected, "tables() returns the schemas exactly as defined")
            try expectEqual(each, schemas, "schema(of:) returns each schema exactly as defined")
            // Defining the same schema again changes nothing.
            try await must(await store.defineTable(schemas[0]), "redefining an identical schema")
            let again = try await must(await store.read { tx in try tx.tables() }, "listing tables again")
            try expectEqual(again, expected, "tables() after an identical redefinition")
        },
        ConformanceCase("upsertAndGet") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let alice = Record(id: "alice", fields: ["name": "Alice", "age": 30, "note": "undeclared"])
            let bob = Record(id: "bob", fields: ["name": "Bob"], version: "1", updatedAt: Timestamp(millisecondsSince1970: 5))
            try await must(await store.write { tx in
                try tx.upsert(alice, in: "people")
                try tx.upsert(bob, in: "people")
            }, "upserting two records")
            let (a, b, all, count) = try await must(await store.read { tx in
                (try tx.record(in: "people", id: "alice"), try tx.record(in: "people", id: "bob"),
                 try tx.records(in: "people", matching: .all), try tx.count(in: "people", matching: .all))
            }, "reading them")
            try expectRecord(a, alice, "alice")
            try expectRecord(b, bob, "bob")
            try expectRecords(all, [alice, bob], "all records ordered by id")
            try expectEqual(count, 2, "count")
        },
        ConformanceCase("upsertReplaces") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let first = Record(id: "p", fields: ["name": "Old", "age": 1, "extra": "gone later", "other": [1, 2]], version: "v1",
                               updatedAt: Timestamp(millisecondsSince1970: 10), deleted: true)
            let second = Record(id: "p", fields: ["name": "New", "other": "now a string"])
            try await must(await store.write { tx in try tx.upsert(first, in: "people") }, "first upsert")
            try await must(await store.write { tx in try tx.upsert(second, in: "people") }, "second upsert")
            let (back, count, byOldName) = try await must(await store.read { tx in
                (try tx.record(in: "people", id: "p"), try tx.count(in: "people", matching: .all),
                 try tx.count(in: "people", matching: Field("name") == "Old"))
            }, "reading")
            try expectRecord(back, second, "upsert replaces the whole record (fields and system properties)")
            try expectEqual(count, 1, "one record after replacing")
            try expectEqual(byOldName, 0, "the old value no longer matches")
            // Several upserts of one id in one transaction: the last wins.
            try await must(await store.write { tx in
                for i in 0..<5 { try tx.upsert(Record(id: "q", fields: ["age": .int(Int64(i))]), in: "people") }
            }, "five upserts of one id")
            let q = try await must(await store.read { tx in try tx.record(in: "people", id: "q") }, "reading q")
            try expectRecord(q, Record(id: "q", fields: ["age": 4]), "the last upsert in a transaction wins")
        },
        ConformanceCase("insertWritesOnlyNewIds") { ctx in
            // `insert(_:in:)`. An adapter that keeps the default answers `notChecked` and
            // writes nothing. One that checks writes exactly when no record has the id —
            // committed, or written earlier in the same transaction; by exact bytes; short or
            // long — validates as `upsert` does, and leaves a taken id's record as it was.
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let committed = Record(id: "taken", fields: ["name": "Committed", "age": 1], version: "v1",
                                   updatedAt: Timestamp(millisecondsSince1970: 7))
            try await must(await store.write { tx in try tx.upsert(committed, in: "people") }, "writing a record")
            let probe = Record(id: "probe", fields: ["name": "Probe"])
            let (outcome, read) = try await must(await store.write { tx in
                (try tx.insert(probe, in: "people"), try tx.record(in: "people", id: probe.id))
            }, "inserting a new id")
            if outcome == .notChecked {
                try expect(read == nil, "an insert answered notChecked wrote its record")
                let count = try await must(await store.read { tx in try tx.count(in: "people", matching: .all) }, "counting")
                try expectEqual(count, 1, "an insert answered notChecked writes nothing")
                return
            }
            try expectEqual(outcome, .inserted, "inserting a new id")
            try expectRecord(read, probe, "the inserted record, read in its own transaction")
            let long = String(repeating: "日", count: 341) + "x" // 1,024 UTF-8 bytes
            let ids = ["taken", "caf\u{E9}", "cafe\u{301}", long, "probe", "bad"]
            let inserted = [
                Record(id: "caf\u{E9}", fields: ["name": "precomposed"]), Record(id: "cafe\u{301}", fields: ["name": "decomposed"]),
                Record(id: long, fields: ["name": "long"], version: "v2", deleted: true),
                Record(id: "probe", fields: ["name": "Back", "note": "undeclared"]),
            ]
            let (outcomes, refused, reads) = try await must(await store.write { tx in
                var outcomes: [LocalInsertOutcome] = []
                func insert(_ record: Record) throws { outcomes.append(try tx.insert(record, in: "people")) }
                try insert(Record(id: "taken", fields: ["name": "Replaced"]))
                try insert(inserted[0])
                try insert(inserted[1])
                try insert(Record(id: "caf\u{E9}", fields: ["name": "again"]))
                try insert(inserted[2])
                try insert(Record(id: long, fields: ["name": "long again"]))
                try tx.delete(id: "probe", in: "people")
                try insert(inserted[3])
                var refused: SyncError.Code?
                do { _ = try tx.insert(Record(id: "bad", fields: ["age": "not a number"]), in: "people") } catch {
                    refused = (error as? SyncError)?.code
                }
                return (outcomes, refused, try ids.map { try tx.record(in: "people", id: $0) })
            }, "inserting ids taken and free")
            try expectEqual(outcomes, [.idExists, .inserted, .inserted, .idExists, .inserted, .idExists, .inserted],
                            "insert(_:in:) answers: a committed id, two spellings of é, the first again, a long id twice, an id deleted earlier in the transaction")
            try expectEqual(refused, .typeMismatch, "inserting a record whose declared field has the wrong type")
            let expected: [Record?] = [committed] + inserted.map { $0 } + [nil]
            for (id, (got, want)) in zip(ids, zip(reads, expected)) {
                if let want { try expectRecord(got, want, "record '\(id)' in the inserting transaction") }
                else { try expect(got == nil, "a refused insert wrote record '\(id)'") }
            }
            let all = try await must(await store.read { tx in try tx.records(in: "people", matching: .all) }, "reading after the commit")
            try expectRecords(all, ([committed] + inserted).sorted { Value.utf8Less($0.id, $1.id) }, "the committed records")
        },
        ConformanceCase("upsertMany") { ctx in
            // `upsert(_ records:in:)`, whatever statements the adapter writes them with: a batch
            // of an odd size (no power of two, past any one statement's rows), ids repeated in
            // the batch (the later wins), rows it replaces, system properties and undeclared
            // fields, a table wide enough that one statement holds few rows, and a batch with
            // an invalid record that, thrown out of the transaction, leaves nothing.
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let wide = TableSchema("wide", fields: (0..<40).map { FieldDefinition("f\($0)", $0 % 2 == 0 ? .string : .int) })
            try await must(await store.defineTable(wide), "defining a table of 40 fields")
            func person(_ i: Int, _ round: Int) -> Record {
                var record = Record(id: "p\(i)", fields: ["name": .string("n\(i)-\(round)"), "age": .int(Int64(i * 10 + round))])
                if i % 3 == 0 { record["note"] = .string("undeclared \(i)") }
                if i % 5 == 0 { record.version = "v\(round)"; record.updatedAt = Timestamp(millisecondsSince1970: Int64(i)) }
                if i % 7 == 0 { record.deleted = true }
                return record
            }
            let before = (150..<160).map { person($0, 0) }
            try await must(await store.write { tx in for record in before { try tx.upsert(record, in: "people") } }, "writing ten records one by one")
            // 0..<160 (replacing the ten above), each of 0..<40 followed at once by its second
            // round (a repeat inside one statement), and 0..<3 a third time at the end (a repeat
            // across statements): 203 records.
            let batch = (0..<160).flatMap { $0 < 40 ? [person($0, 1), person($0, 2)] : [person($0, 1)] } + (0..<3).map { person($0, 3) }
            let rows = (0..<40).map { i in
                Record(id: "w\(i)", fields: Dictionary(uniqueKeysWithValues: wide.fields.enumerated().map { position, field in
                    (field.name, field.type == .string ? Value.string("\(i)/\(position)") : Value.int(Int64(i * 100 + position)))
                }))
            }
            try await must(await store.write { tx in
                try tx.upsert([], in: "people")
                try tx.upsert(batch, in: "people")
                try tx.upsert(rows, in: "wide")
            }, "upserting 203 people and 40 wide rows in one call each")
            let expected = (0..<160).map { person($0, $0 < 3 ? 3 : $0 < 40 ? 2 : 1) }
            let (people, count, wideBack) = try await must(await store.read { tx in
                (try tx.records(in: "people", matching: .all), try tx.count(in: "people", matching: .all),
                 try tx.records(in: "wide", matching: .all))
            }, "reading them back")
            try expectEqual(count, 160, "one record per id after a batch that repeats ids")
            try expectRecords(people, expected.sorted { Value.utf8Less($0.id, $1.id) }, "the batch's records, the later of a repeated id winning")
            try expectRecords(wideBack, rows.sorted { Value.utf8Less($0.id, $1.id) }, "40 rows of 40 fields")
            var invalid = batch.prefix(70).map { record -> Record in
                var changed = record
                changed["name"] = "changed"
                return changed
            }
            invalid[65]["age"] = "not an int"
            let refused = invalid
            try await expectThrows(.typeMismatch, "a batch with a string in the declared int field of its 66th record") {
                try await store.write { tx in try tx.upsert(refused, in: "people") }
            }
            let changed = try await must(await store.read { tx in try tx.count(in: "people", matching: Field("name") == "changed") },
                                         "counting after the refused batch")
            try expectEqual(changed, 0, "a batch thrown out of its transaction writes nothing")
        },
        ConformanceCase("upsertValidatedRows") { ctx in
            // `upsert(_ rows: ValidatedRows, in:)`: rows checked against the table's own
            // schema (which an adapter may write by position), against a schema of another
            // layout (the same fields in another order: it must not trust the positions), and
            // with ids repeated and values left out, read back as the same records written
            // with `upsert(_ records:in:)` would be.
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            func person(_ i: Int, _ round: Int) -> Record {
                var record = Record(id: "v\(i)", fields: ["name": .string("n\(i)-\(round)")])
                if i % 2 == 0 { record["age"] = .int(Int64(i * 10 + round)) }
                if i % 3 == 0 { record["note"] = .string("undeclared \(i)") }
                if i % 4 == 0 { record["list"] = [.int(Int64(i)), "x"] }
                if i % 5 == 0 { record.version = "v\(round)"; record.updatedAt = Timestamp(millisecondsSince1970: Int64(i)) }
                if i % 7 == 0 { record.deleted = true }
                return record
            }
            let records = (0..<90).map { person($0, 1) } + (0..<5).map { person($0, 2) }
            var same = ValidatedRows(schema: CRUDFixtures.people)
            for record in records { try same.append(record) }
            let reordered = TableSchema("people", fields: CRUDFixtures.people.fields.reversed())
            var other = ValidatedRows(schema: reordered)
            for i in 100..<140 { try other.append(person(i, 1)) }
            let checked = same, elsewhere = other
            try await must(await store.write { tx in
                try tx.upsert(ValidatedRows(schema: CRUDFixtures.people), in: "people")
                try tx.upsert(checked, in: "people")
                try tx.upsert(elsewhere, in: "people")
            }, "upserting 95 rows checked against the table's schema and 40 against a reordered one")
            let expected = ((0..<90).map { person($0, $0 < 5 ? 2 : 1) } + (100..<140).map { person($0, 1) })
                .sorted { Value.utf8Less($0.id, $1.id) }
            let (back, byAge) = try await must(await store.read { tx in
                (try tx.records(in: "people", matching: .all), try tx.count(in: "people", matching: Field("age") >= 1000))
            }, "reading them back")
            try expectRecords(back, expected, "validated rows read back as the records they were made from")
            try expectEqual(byAge, 20, "a declared field of rows checked against a reordered schema is in its own column")
            var refused = ValidatedRows(schema: CRUDFixtures.people)
            try await expectThrows(.typeMismatch, "a row with a string in the declared int field") {
                try refused.append(Record(id: "bad", fields: ["age": "not an int"]))
            }
            try await expectThrows(.typeMismatch, "a positioned value of the wrong type") {
                try refused.append(id: "bad", fields: [:], positioned: [(1, .string("x"))], version: nil, updatedAt: nil, deleted: false)
            }
            try expectEqual(refused.count, 0, "a refused row is not added")
        },
        ConformanceCase("deleteMany") { ctx in
            // `delete(ids:in:)`, whatever statements the adapter deletes with: 137 ids (past any
            // one statement's), with repeats inside a statement and across statements, missing
            // ids, "" and a canonically equivalent spelling of an existing id (another id). The
            // answer counts the distinct ids that existed; nothing else goes; deletes thrown
            // out of their transaction leave every row.
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let existing = (0..<150).map { "d\($0)" } + ["\u{E9}"]
            try await must(await store.write { tx in
                for id in existing { try tx.upsert(Record(id: id, fields: ["name": .string(id)]), in: "people") }
            }, "writing 151 records")
            let listed = (0..<120).map { "d\($0)" } + ["d0", "d1", "zzz", "", "e\u{301}", "d150", "d5"] + (140..<150).map { "d\($0)" }
            try expectEqual(listed.count, 137, "the fixture's id count")
            let (none, existed) = try await must(await store.write { tx in
                (try tx.delete(ids: [], in: "people"), try tx.delete(ids: listed, in: "people"))
            }, "deleting 137 listed ids in one call")
            try expectEqual(none, 0, "deleting no ids")
            try expectEqual(existed, 130, "the distinct listed ids that existed")
            let left = try await must(await store.read { tx in try tx.records(in: "people", matching: .all).map(\.id) },
                                      "reading what is left")
            try expectEqual(left, (120..<140).map { "d\($0)" } + ["\u{E9}"], "the unlisted records, the precomposed id among them")
            do {
                try await store.write { tx in
                    _ = try tx.delete(ids: ["d120", "d121", "\u{E9}"], in: "people")
                    throw IntentionalRollback(marker: 3)
                }
                throw failure("write returned normally although its body threw")
            } catch is IntentionalRollback {}
            let count = try await must(await store.read { tx in try tx.count(in: "people", matching: .all) }, "counting after the rollback")
            try expectEqual(count, 21, "deletes thrown out of their transaction leave every row")
        },
        ConformanceCase("delete") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            try await must(await store.write { tx in
                for id in ["a", "b", "c"] { try tx.upsert(Record(id: id, fields: ["name": .string(id)]), in: "people") }
            }, "writing three records")
            let (first, second, missing) = try await must(await store.write { tx in
                (try tx.delete(id: "b", in: "people"), try tx.delete(id: "b", in: "people"), try tx.delete(id: "zzz", in: "people"))
            }, "deleting")
            try expectEqual(first, true, "delete of an existing record returns true")
            try expectEqual(second, false, "a second delete of the same id returns false")
            try expectEqual(missing, false, "delete of a missing id returns false")
            let (b, ids, count, again) = try await must(await store.write { tx in
                (try tx.record(in: "people", id: "b"), try tx.records(in: "people", matching: .all).map(\.id),
                 try tx.count(in: "people", matching: .all), try tx.delete(id: "b", in: "people"))
            }, "reading after the delete")
            try expect(b == nil, "a deleted record is gone")
            try expectEqual(ids, ["a", "c"], "remaining ids")
            try expectEqual(count, 2, "count after delete")
            try expectEqual(again, false, "delete in a later transaction of a deleted id returns false")
            // Deleted, then inserted again.
            try await must(await store.write { tx in try tx.upsert(Record(id: "b", fields: ["age": 9]), in: "people") }, "re-inserting b")
            let b2 = try await must(await store.read { tx in try tx.record(in: "people", id: "b") }, "reading b")
            try expectRecord(b2, Record(id: "b", fields: ["age": 9]), "a deleted id can be inserted again")
        },
        ConformanceCase("missingRecordIsNil") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            try await must(await store.write { tx in try tx.upsert(Record(id: "present"), in: "people") }, "writing")
            let (missing, caseVariant, prefix, first) = try await must(await store.read { tx in
                (try tx.record(in: "people", id: "absent"), try tx.record(in: "people", id: "PRESENT"),
                 try tx.record(in: "people", id: "pres"), try tx.first(in: "people", matching: Query(Field("name") == "nobody")))
            }, "reading missing ids")
            try expect(missing == nil, "record(in:id:) of a missing id is nil")
            try expect(caseVariant == nil, "ids are case-sensitive: 'PRESENT' is not 'present'")
            try expect(prefix == nil, "a prefix of an id does not find the record")
            try expect(first == nil, "first(matching:) with no match is nil")
        },
        ConformanceCase("tableNotDefined") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let t = "undefined"
            try await expectThrows(.tableNotDefined, "schema(of:)") { try await store.read { tx in try tx.schema(of: t) } }
            try await expectThrows(.tableNotDefined, "record(in:id:)") { try await store.read { tx in try tx.record(in: t, id: "x") } }
            try await expectThrows(.tableNotDefined, "records(in:matching:)") { try await store.read { tx in try tx.records(in: t, matching: .all) } }
            try await expectThrows(.tableNotDefined, "count(in:matching:)") { try await store.read { tx in try tx.count(in: t, matching: .all) } }
            try await expectThrows(.tableNotDefined, "upsert") { try await store.write { tx in try tx.upsert(Record(id: "x"), in: t) } }
            try await expectThrows(.tableNotDefined, "delete") { try await store.write { tx in try tx.delete(id: "x", in: t) } }
            try await expectThrows(.tableNotDefined, "a table differing only in case") {
                try await store.read { tx in try tx.record(in: "PEOPLE", id: "x") }
            }
            try await expectThrows(.tableNotDefined, "record(in:id:) in a write transaction") {
                try await store.write { tx in try tx.record(in: t, id: "x") }
            }
            let tables = try await must(await store.read { tx in try tx.tables().map(\.name) }, "listing tables")
            try expectEqual(tables, ["people"], "using an undefined table must not define it")
        },
        ConformanceCase("typeMismatch") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(ValueFixtures.declaredSchema("typed")), "defining typed")
            let original = Record(id: "existing", fields: ["int": 1, "string": "s"])
            try await must(await store.write { tx in try tx.upsert(original, in: "typed") }, "writing a valid record")
            let wrong: [(String, Value)] = [
                ("int", "3"), ("int", 3.0), ("double", 3), ("string", 3), ("string", .bytes([65])), ("bytes", "AQ=="),
                ("bool", 1), ("date", 1_700_000_000_000), ("date", "2024-01-01T00:00:00Z"), ("array", [:]), ("object", [1]),
                ("bool", "true"),
            ]
            for (field, value) in wrong {
                for id in ["new", "existing"] {
                    try await expectThrows(.typeMismatch, "a \(value.kind.rawValue) in the declared \(field) field (record '\(id)')") {
                        try await store.write { tx in try tx.upsert(Record(id: id, fields: [field: value, "any": 2]), in: "typed") }
                    }
                }
            }
            let (existing, new, count) = try await must(await store.read { tx in
                (try tx.record(in: "typed", id: "existing"), try tx.record(in: "typed", id: "new"), try tx.count(in: "typed", matching: .all))
            }, "reading after the refused writes")
            try expectRecord(existing, original, "a refused replace leaves the stored record unchanged")
            try expect(new == nil, "a refused insert writes nothing")
            try expectEqual(count, 1, "count after refused writes")
        },
        ConformanceCase("rejectUndeclaredFields") { ctx in
            let store = try await ctx.open()
            let schema = TableSchema("strict", fields: [FieldDefinition("name", .string)], undeclaredFields: .reject)
            try await must(await store.defineTable(schema), "defining a strict table")
            let ok = Record(id: "ok", fields: ["name": "n"])
            try await must(await store.write { tx in try tx.upsert(ok, in: "strict"); try tx.upsert(Record(id: "empty"), in: "strict") }, "writing declared-only records")
            try await expectThrows(.typeMismatch, "an undeclared field in a rejecting table") {
                try await store.write { tx in try tx.upsert(Record(id: "bad", fields: ["name": "n", "extra": 1]), in: "strict") }
            }
            try await expectThrows(.typeMismatch, "a field differing from the declared one only in case") {
                try await store.write { tx in try tx.upsert(Record(id: "ok", fields: ["Name": "n"]), in: "strict") }
            }
            let (bad, stillOk, count) = try await must(await store.read { tx in
                (try tx.record(in: "strict", id: "bad"), try tx.record(in: "strict", id: "ok"), try tx.count(in: "strict", matching: .all))
            }, "reading")
            try expect(bad == nil, "the refused record is absent")
            try expectRecord(stillOk, ok, "the existing record is unchanged")
            try expectEqual(count, 2, "count")
        },
        ConformanceCase("invalidRecords") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let invalid: [(String, Record)] = [
                ("an empty id", Record(id: "")),
                ("an id of 1,025 UTF-8 bytes", Record(id: String(repeating: "é", count: 512) + "x")),
                ("an id containing NUL", Record(id: "a\u{0}b")),
                ("a field named id", Record(id: "x", fields: ["id": 1])),
                ("a field named ID", Record(id: "x", fields: ["ID": 1])),
                ("a field named version", Record(id: "x", fields: ["version": "1"])),
                ("a field named UpdatedAt", Record(id: "x", fields: ["UpdatedAt": 1])),
                ("a field named deleted", Record(id: "x", fields: ["deleted": true])),
                ("an empty field name", Record(id: "x", fields: ["": 1])),
                ("a field name with a control character", Record(id: "x", fields: ["a\nb": 1])),
                ("a field name of 129 bytes", Record(id: "x", fields: [String(repeating: "f", count: 129): 1])),
            ]
            for (what, record) in invalid {
                try await expectThrows(.invalidName, "upserting a record with \(what)") {
                    try await store.write { tx in try tx.upsert(record, in: "people") }
                }
            }
            let count = try await must(await store.read { tx in try tx.count(in: "people", matching: .all) }, "counting")
            try expectEqual(count, 0, "refused records write nothing")
            // The longest valid id: 1,024 UTF-8 bytes of multi-byte characters.
            let longest = Record(id: String(repeating: "日", count: 341) + "x", fields: ["age": 1])
            try await must(await store.write { tx in try tx.upsert(longest, in: "people") }, "upserting a 1,024-byte id")
            let back = try await must(await store.read { tx in try tx.record(in: "people", id: longest.id) }, "reading it")
            try expectRecord(back, longest, "a record with a 1,024-byte id")
        },
        ConformanceCase("idsAreExact") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let ids = ["abc", "ABC", "Abc", "abc ", " abc", "a bc", "abc\u{0}".replacingNUL(), "1", "01", "1.0", "%", "_", "'", "\""]
            try await must(await store.write { tx in
                for (i, id) in ids.enumerated() { try tx.upsert(Record(id: id, fields: ["age": .int(Int64(i))]), in: "people") }
            }, "writing ids that differ in case and spacing")
            let back = try await must(await store.read { tx in try ids.map { try tx.record(in: "people", id: $0)?["age"].intValue } }, "reading")
            try expectEqual(back, ids.indices.map { Int64($0) }, "each id finds its own record")
            // The same ids, two canonically equivalent spellings of "é" (one stored), and ids
            // stored nowhere, in one read(_:) batch: exact bytes, as single reads.
            try await must(await store.write { tx in try tx.upsert(Record(id: "caf\u{E9}", fields: ["age": 99]), in: "people") },
                           "writing an id with a precomposed é")
            let batchIds = ids + ["cafe\u{301}", "caf\u{E9}", "abcd", "ab", ""] + ids.reversed()
            let batched = try await must(await store.read { tx in
                try tx.read(batchIds.map { LocalRead.record(table: "people", id: $0) }).map { $0.map { $0["age"].intValue } }
            }, "reading them in one read(_:) batch")
            try expectEqual(batched, ids.indices.map { [Int64($0)] } + [[], [99], [], [], []] + ids.indices.reversed().map { [Int64($0)] },
                            "read(_:) answers each id with its own record, by exact bytes")
            try await must(await store.write { tx in try tx.delete(id: "caf\u{E9}", in: "people") }, "deleting it again")
            let count = try await must(await store.read { tx in try tx.count(in: "people", matching: .all) }, "counting")
            try expectEqual(count, ids.count, "count")
            let like = try await must(await store.read { tx in
                try tx.records(in: "people", matching: Query(.compare(SystemField.id, .equal, "_"))).map(\.id)
            }, "querying id == \"_\"")
            try expectEqual(like, ["_"], "id equality is not a LIKE pattern")
        },
        ConformanceCase("sameIdInTwoTables") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            try await must(await store.defineTable(TableSchema("pets")), "defining pets")
            try await must(await store.write { tx in
                try tx.upsert(Record(id: "x", fields: ["name": "person"]), in: "people")
                try tx.upsert(Record(id: "x", fields: ["name": "pet"]), in: "pets")
            }, "writing the same id in two tables")
            _ = try await must(await store.write { tx in try tx.delete(id: "x", in: "people") }, "deleting from one table")
            let (person, pet) = try await must(await store.read { tx in
                (try tx.record(in: "people", id: "x"), try tx.record(in: "pets", id: "x"))
            }, "reading both")
            try expect(person == nil, "deleted from people")
            try expectRecord(pet, Record(id: "x", fields: ["name": "pet"]), "the same id in another table is untouched")
        },
        ConformanceCase("invalidSchemaChangesNothing") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            let bad: [(String, SyncError.Code, TableSchema)] = [
                ("a declared field named id", .invalidName, TableSchema("t1", fields: [FieldDefinition("id", .string)])),
                ("a declared field named Version", .invalidName, TableSchema("t2", fields: [FieldDefinition("Version", .string)])),
                ("two fields differing only in case", .invalidName, TableSchema("t3", fields: [FieldDefinition("a", .int), FieldDefinition("A", .int)])),
                ("an empty field name", .invalidName, TableSchema("t4", fields: [FieldDefinition("", .int)])),
                ("an index naming an undeclared field", .schemaMismatch, TableSchema("t5", fields: [FieldDefinition("a", .int)], indexes: [IndexDefinition(["b"])])),
                ("an index with no fields", .schemaMismatch, TableSchema("t6", indexes: [IndexDefinition([])])),
                ("an empty table name", .invalidName, TableSchema("")),
                ("people redeclaring name twice", .invalidName, TableSchema("people", fields: [FieldDefinition("name", .string), FieldDefinition("NAME", .string)])),
            ]
            for (what, code, schema) in bad {
                try await expectThrows(code, "defining a schema with \(what)") { try await store.defineTable(schema) }
            }
            let tables = try await must(await store.read { tx in try tx.tables() }, "listing tables")
            try expectEqual(tables, [CRUDFixtures.people], "failed definitions define nothing and change nothing")
        },
    ]
}

enum CRUDFixtures {
    static let people = TableSchema("people", fields: [FieldDefinition("name", .string, indexed: true), FieldDefinition("age", .int)])

    static let schemas: [TableSchema] = [
        TableSchema("beta", fields: [FieldDefinition("title", .string, indexed: true), FieldDefinition("rank", .int),
                                     FieldDefinition("tags", .array), FieldDefinition("meta", .any)],
                    indexes: [IndexDefinition(["rank", "title"])], undeclaredFields: .reject),
        people,
        TableSchema("Alpha"),
        TableSchema("gamma", fields: [FieldDefinition("when", .date), FieldDefinition("blob", .bytes)],
                    indexes: [IndexDefinition(["updatedAt"]), IndexDefinition(["when", "blob"])]),
        TableSchema("delta"),
    ]
}
