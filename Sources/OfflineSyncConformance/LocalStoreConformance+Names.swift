import OfflineSync
import OfflineSyncStoreKit

extension LocalStoreConformance {
    static let nameCases: [ConformanceCase] =
        NameFixtures.tableNames.map { sample in
            ConformanceCase("table \(sample.label)") { ctx in try await NameChecks.table(ctx, sample) }
        }
        + NameFixtures.fieldNames.map { sample in
            ConformanceCase("declared field \(sample.label)") { ctx in try await NameChecks.declaredField(ctx, sample) }
        }
        + NameFixtures.fieldNames.map { sample in
            ConformanceCase("undeclared field \(sample.label)") { ctx in try await NameChecks.undeclaredField(ctx, sample) }
        }
        + [
            ConformanceCase("tables differing only in case") { ctx in
                let store = try await ctx.open()
                let control = try await NameChecks.makeControl(store)
                try await must(await store.defineTable(TableSchema("Items", fields: [FieldDefinition("v", .int)])), "defining Items")
                let upper = Record(id: "same", fields: ["v": 1])
                try await must(await store.write { tx in try tx.upsert(upper, in: "Items") }, "writing to Items")
                let accepted: Void? = try await acceptedOrInvalidName("defining items after Items") {
                    try await store.defineTable(TableSchema("items", fields: [FieldDefinition("w", .string)]))
                }
                if accepted != nil {
                    let lower = Record(id: "same", fields: ["w": "lower"])
                    try await must(await store.write { tx in try tx.upsert(lower, in: "items") }, "writing to items")
                    let (a, b, names) = try await must(await store.read { tx in
                        (try tx.records(in: "Items", matching: .all), try tx.records(in: "items", matching: .all), try tx.tables().map(\.name))
                    }, "reading both")
                    try expectRecords(a, [upper], "Items holds only its own record")
                    try expectRecords(b, [lower], "items holds only its own record")
                    try expectEqual(names, ["Items", "items", "t"], "tables() lists both")
                    try await expectThrows(.typeMismatch, "items has its own schema (w is a string)") {
                        try await store.write { tx in try tx.upsert(Record(id: "x", fields: ["w": 1]), in: "items") }
                    }
                } else {
                    let (a, names) = try await must(await store.read { tx in
                        (try tx.records(in: "Items", matching: .all), try tx.tables().map(\.name))
                    }, "reading Items")
                    try expectRecords(a, [upper], "Items after items was refused")
                    try expectEqual(names, ["Items", "t"], "tables() after items was refused")
                }
                try await NameChecks.expectControl(store, control)
            },
            ConformanceCase("declared fields differing only in case") { ctx in
                let store = try await ctx.open()
                try await expectThrows(.invalidName, "a schema declaring Name and name") {
                    try await store.defineTable(TableSchema("x", fields: [FieldDefinition("Name", .string), FieldDefinition("name", .int)]))
                }
                let tables = try await must(await store.read { tx in try tx.tables() }, "listing tables")
                try expectEqual(tables.map(\.name), [], "the refused schema defined nothing")
            },
            ConformanceCase("fields differing only in case") { ctx in
                // Undeclared Key/key in one record, and undeclared name next to declared Name.
                let store = try await ctx.open()
                let schema = TableSchema("mixed", fields: [FieldDefinition("Name", .string, indexed: true)])
                try await must(await store.defineTable(schema), "defining mixed")
                let records = [
                    Record(id: "r1", fields: ["Key": "upper", "key": "lower", "KEY": 3]),
                    Record(id: "r2", fields: ["Name": "declared", "name": 7, "NAME": "shout"]),
                ]
                for record in records {
                    let accepted: Void? = try await acceptedOrInvalidName("writing \(record.id)") {
                        try await store.write { tx in try tx.upsert(record, in: "mixed") }
                    }
                    guard accepted != nil else { continue }
                    let (back, byKey, byName) = try await must(await store.read { tx in
                        (try tx.record(in: "mixed", id: record.id),
                         try tx.records(in: "mixed", matching: Query(Field("key") == "lower")).map(\.id),
                         try tx.records(in: "mixed", matching: Query(Field("name") == 7)).map(\.id))
                    }, "reading \(record.id)")
                    try expectRecord(back, record, "a record with fields differing only in case")
                    if record.id == "r1" { try expectEqual(byKey, ["r1"], "query on key == \"lower\"") }
                    if record.id == "r2" { try expectEqual(byName, ["r2"], "query on undeclared name == 7 next to declared Name") }
                }
            },
            ConformanceCase("hostile table with hostile fields") { ctx in
                var store = try await ctx.open()
                let control = try await NameChecks.makeControl(store)
                let table = "\"; DROP TABLE t; --"
                let fields = ["x'y", "a\"b", "[brackets]", "back`tick", "'); DROP TABLE t; --"]
                let schema = TableSchema(table, fields: fields.map { FieldDefinition($0, .string, indexed: true) }, indexes: [IndexDefinition(Array(fields.prefix(3)))])
                guard try await acceptedOrInvalidName("defining the hostile table", { try await store.defineTable(schema) }) != nil else {
                    try await NameChecks.expectControl(store, control)
                    return
                }
                let records = (0..<5).map { i in
                    Record(id: "r\(i)", fields: Dictionary(uniqueKeysWithValues: fields.enumerated().map { ($0.element, Value.string("v\(($0.offset + i) % 5)")) }))
                }
                try await must(await store.write { tx in for r in records { try tx.upsert(r, in: table) } }, "writing")
                for field in fields {
                    let q = Query(Field(field) >= "v2", order: [SortKey(field, ascending: false)])
                    let got = try await must(await store.read { tx in try tx.records(in: table, matching: q) }, "querying \(Render.string(field))")
                    try expectRecords(got, QueryEvaluator.apply(q, to: records), "`\(Render.query(q))`")
                }
                if ctx.capabilities.persistent { store = try await ctx.reopen(store) }
                let back = try await must(await store.read { tx in try tx.records(in: table, matching: .all) }, "reading back")
                try expectRecords(back, records, "records of the hostile table")
                try await NameChecks.expectControl(store, control)
            },
            ConformanceCase("hostile values in queries") { ctx in
                let store = try await ctx.open()
                let control = try await NameChecks.makeControl(store)
                try await must(await store.defineTable(TableSchema("v", fields: [FieldDefinition("s", .string)])), "defining v")
                let values = ["'; DROP TABLE t; --", "' OR '1'='1", "\" OR \"\"=\"", "%", "_", "\\", "a'b", "?", ":x", "$1", "*"]
                let records = values.enumerated().map { Record(id: "r\($0.offset)", fields: ["s": .string($0.element), "u": .string($0.element)]) }
                try await must(await store.write { tx in for r in records { try tx.upsert(r, in: "v") } }, "writing")
                for value in values {
                    for predicate in [Field("s") == .string(value), Field("u") == .string(value), Field("s").contains(value), Field("u").hasPrefix(value),
                                      Field("s").hasSuffix(value), Field("u").hasSuffix(value),
                                      Field(SystemField.id) == .string(value), Field("s").isIn([.string(value)])] {
                        let q = Query(predicate)
                        let got = try await must(await store.read { tx in try tx.records(in: "v", matching: q) }, "querying `\(Render.query(q))`")
                        try expectRecords(got, QueryEvaluator.apply(q, to: records), "`\(Render.query(q))`")
                    }
                }
                try await NameChecks.expectControl(store, control)
            },
        ]
}

/// The checks of the names group.
enum NameChecks {
    typealias Control = [Record]

    /// A control table `t` (the target of the SQL injection names) with a few rows.
    static func makeControl(_ store: any LocalStore, file: String = #fileID, line: Int = #line) async throws -> Control {
        let rows = (1...3).map { Record(id: "c\($0)", fields: ["v": .int(Int64($0)), "note": "control"]) }
        try await must(await store.defineTable(TableSchema("t", fields: [FieldDefinition("v", .int)])), "defining the control table t", file: file, line: line)
        try await must(await store.write { tx in for r in rows { try tx.upsert(r, in: "t") } }, "writing the control rows", file: file, line: line)
        return rows
    }

    /// Fails unless the control table still exists with its rows and schema.
    static func expectControl(_ store: any LocalStore, _ rows: Control, file: String = #fileID, line: Int = #line) async throws {
        let (schema, all) = try await must(await store.read { tx in
            (try tx.schema(of: "t"), try tx.records(in: "t", matching: .all))
        }, "reading the control table t", file: file, line: line)
        try expectEqual(schema, TableSchema("t", fields: [FieldDefinition("v", .int)]), "the control table's schema", file: file, line: line)
        try expectRecords(all, rows, "the control table's rows", file: file, line: line)
    }

    static func table(_ ctx: CaseContext, _ sample: NameSample) async throws {
        var store = try await ctx.open()
        let control = try await makeControl(store)
        let name = sample.name
        let schema = TableSchema(name, fields: [FieldDefinition("v", .int, indexed: true), FieldDefinition("s", .string)],
                                 indexes: [IndexDefinition(["s", "v"])])
        let accepted = try await acceptedOrInvalidName("defining the table") { try await store.defineTable(schema) } != nil
        if sample.mustRefuse { try expect(!accepted, "the store accepted an invalid table name; it must throw invalidName") }
        if accepted {
            let records = [Record(id: "r1", fields: ["v": 1, "s": "a"]), Record(id: "r2", fields: ["v": 2, "s": "b", "u": "x"]),
                           Record(id: "r3", fields: ["v": 3])]
            try await must(await store.write { tx in for r in records { try tx.upsert(r, in: name) } }, "writing to the table")
            for pass in ctx.capabilities.persistent ? ["", " after reopening"] : [""] {
                if !pass.isEmpty { store = try await ctx.reopen(store) }
                let (definedSchema, names, query, count, r2) = try await must(await store.read { tx in
                    (try tx.schema(of: name), try tx.tables().map(\.name),
                     try tx.records(in: name, matching: Query(Field("v") >= 2, order: [SortKey("v", ascending: false)])),
                     try tx.count(in: name, matching: Field("s").isNull), try tx.record(in: name, id: "r2"))
                }, "reading the table\(pass)")
                try expectEqual(definedSchema, schema, "schema(of:)\(pass)")
                try expectEqual(names.sorted(by: Value.utf8Less), [name, "t"].sorted(by: Value.utf8Less), "tables()\(pass)")
                try expectRecords(query, [records[2], records[1]], "v >= 2 ORDER BY v DESC\(pass)")
                try expectEqual(count, 1, "count of s IS NULL\(pass)")
                try expectRecord(r2, records[1], "record(in:id:)\(pass)")
            }
            let deleted = try await must(await store.write { tx in try tx.delete(id: "r1", in: name) }, "deleting from the table")
            try expectEqual(deleted, true, "delete from the table")
        } else {
            let names = try await must(await store.read { tx in try tx.tables().map(\.name) }, "listing tables")
            try expectEqual(names, ["t"], "tables() after the name was refused")
            try await expectThrows(anyOf: [.tableNotDefined, .invalidName], "writing to the refused table") {
                try await store.write { tx in try tx.upsert(Record(id: "x"), in: name) }
            }
        }
        try await expectControl(store, control)
    }

    static func declaredField(_ ctx: CaseContext, _ sample: NameSample) async throws {
        var store = try await ctx.open()
        let control = try await makeControl(store)
        let f = sample.name
        let schema = TableSchema("fields", fields: [FieldDefinition(f, .string, indexed: true), FieldDefinition("n", .int)],
                                 indexes: [IndexDefinition([f, "n"])])
        let accepted = try await acceptedOrInvalidName("declaring the field") { try await store.defineTable(schema) } != nil
        if sample.mustRefuse { try expect(!accepted, "the store accepted an invalid field name; it must throw invalidName") }
        if accepted {
            let records = [Record(id: "r1", fields: [f: "b", "n": 1]), Record(id: "r2", fields: [f: "a", "n": 2]),
                           Record(id: "r3", fields: ["n": 3])]
            try await must(await store.write { tx in for r in records { try tx.upsert(r, in: "fields") } }, "writing")
            try await expectThrows(.typeMismatch, "an int in the field declared string") {
                try await store.write { tx in try tx.upsert(Record(id: "bad", fields: [f: 1]), in: "fields") }
            }
            for pass in ctx.capabilities.persistent ? ["", " after reopening"] : [""] {
                if !pass.isEmpty { store = try await ctx.reopen(store) }
                try await checkFieldQueries(store, table: "fields", field: f, records: records, pass: pass)
                let defined = try await must(await store.read { tx in try tx.schema(of: "fields") }, "reading the schema\(pass)")
                try expectEqual(defined, schema, "schema(of:)\(pass)")
            }
        } else {
            let names = try await must(await store.read { tx in try tx.tables().map(\.name) }, "listing tables")
            try expectEqual(names, ["t"], "tables() after the schema was refused")
        }
        try await expectControl(store, control)
    }

    static func undeclaredField(_ ctx: CaseContext, _ sample: NameSample) async throws {
        var store = try await ctx.open()
        let control = try await makeControl(store)
        let f = sample.name
        try await must(await store.defineTable(TableSchema("loose", fields: [FieldDefinition("n", .int)])), "defining loose")
        let records = [Record(id: "r1", fields: [f: "b", "n": 1]), Record(id: "r2", fields: [f: "a", "n": 2]),
                       Record(id: "r3", fields: ["n": 3])]
        let accepted = try await acceptedOrInvalidName("writing a record with the field") {
            try await store.write { tx in try tx.upsert(records[0], in: "loose") }
        } != nil
        if sample.mustRefuse { try expect(!accepted, "the store accepted an invalid field name; it must throw invalidName") }
        if accepted {
            try await must(await store.write { tx in for r in records.dropFirst() { try tx.upsert(r, in: "loose") } }, "writing")
            for pass in ctx.capabilities.persistent ? ["", " after reopening"] : [""] {
                if !pass.isEmpty { store = try await ctx.reopen(store) }
                try await checkFieldQueries(store, table: "loose", field: f, records: records, pass: pass)
            }
        } else {
            let count = try await must(await store.read { tx in try tx.count(in: "loose", matching: .all) }, "counting")
            try expectEqual(count, 0, "the refused record wrote nothing")
        }
        try await expectControl(store, control)
    }

    /// Reads back by id and all, and queries with a predicate on the field and ordering by it.
    static func checkFieldQueries(_ store: any LocalStore, table: String, field f: String, records: [Record], pass: String,
                                  file: String = #fileID, line: Int = #line) async throws {
        let queries = [
            Query(Field(f) == "a"), Query(.all, order: [SortKey(f, ascending: false)]), Query(.all, order: [SortKey(f)]),
            Query(Field(f).isNull), Query(Field(f).hasPrefix("b")), Query(Field(f).isIn(["a", "b"]), order: [SortKey(f)], limit: 1),
        ]
        let (all, results, byId) = try await must(await store.read { tx in
            (try tx.records(in: table, matching: .all), try queries.map { try tx.records(in: table, matching: $0) },
             try tx.record(in: table, id: "r1"))
        }, "reading and querying\(pass)", file: file, line: line)
        try expectRecords(all, records, "all records\(pass)", file: file, line: line)
        try expectRecord(byId, records[0], "record(in:id:)\(pass)", file: file, line: line)
        for (query, result) in zip(queries, results) {
            try expectRecords(result, QueryEvaluator.apply(query, to: records), "`\(Render.query(query))`\(pass)", file: file, line: line)
        }
    }
}
