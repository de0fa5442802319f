import OfflineSync
import OfflineSyncStoreKit

extension LocalStoreConformance {
    static let systemTableCases: [ConformanceCase] = [
        ConformanceCase("reservedPrefixTables") { ctx in
            // The core stores its own tables through LocalStore under the `__` prefix.
            var store = try await ctx.open()
            let appTables = [TableSchema("items", fields: [FieldDefinition("title", .string)]), TableSchema("Zed")]
            let schemas = SystemTables.all + appTables + [TableSchema("__custom", fields: [FieldDefinition("n", .int, indexed: true)])]
            for schema in schemas { try await must(await store.defineTable(schema), "defining \(schema.name)") }
            var written: [String: [Record]] = [:]
            for schema in schemas {
                let records = (0..<12).map { SystemTableFixtures.record(for: schema, index: $0) }
                written[schema.name] = records
                try await must(await store.write { tx in for r in records { try tx.upsert(r, in: schema.name) } }, "writing to \(schema.name)")
            }
            for pass in ctx.capabilities.persistent ? ["", " after reopening"] : [""] {
                if !pass.isEmpty { store = try await ctx.reopen(store) }
                let tables = try await must(await store.read { tx in try tx.tables() }, "listing tables\(pass)")
                try expectEqual(tables, schemas.sorted { Value.utf8Less($0.name, $1.name) }, "tables()\(pass), system tables included, by UTF-8 name")
                for schema in schemas {
                    let records = written[schema.name]!
                    let all = try await must(await store.read { tx in try tx.records(in: schema.name, matching: .all) }, "reading \(schema.name)\(pass)")
                    try expectRecords(all, records.sorted { Value.utf8Less($0.id, $1.id) }, "records of \(schema.name)\(pass)")
                    for field in schema.fields where field.type.isScalar {
                        let q = Query(.not(.isNull(field.name)), order: [SortKey(field.name, ascending: false)], limit: 5, offset: 1)
                        let got = try await must(await store.read { tx in try tx.records(in: schema.name, matching: q) }, "querying \(schema.name)\(pass)")
                        try expectRecords(got, QueryEvaluator.apply(q, to: records), "\(schema.name) `\(Render.query(q))`\(pass)")
                    }
                }
            }
            // The queue's typical access: pending operations in sequence order, then an update and a delete.
            let ops = SystemTables.operations
            let pending = Query(Field("state") == "pending", order: [SortKey("sequence")])
            let before = try await must(await store.read { tx in try tx.records(in: ops, matching: pending) }, "reading pending operations")
            try expectRecords(before, QueryEvaluator.apply(pending, to: written[ops]!), "pending operations by sequence")
            guard let first = before.first else { throw failure("the fixture has no pending operation") }
            var attempted = first
            attempted["state"] = "attempted"
            attempted["attempts"] = .int((first["attempts"].intValue ?? 0) + 1)
            let updated = attempted
            try await must(await store.write { tx in
                try tx.upsert(updated, in: ops)
                _ = try tx.delete(id: before.last!.id, in: ops)
            }, "updating and deleting operations")
            let after = try await must(await store.read { tx in
                (try tx.records(in: ops, matching: pending).map(\.id), try tx.record(in: ops, id: first.id))
            }, "reading operations again")
            try expectEqual(after.0, before.dropFirst().dropLast().map(\.id), "pending operations after the update and delete")
            try expectRecord(after.1, attempted, "the updated operation")
        },
        ConformanceCase("compositeIndexes") { ctx in
            let store = try await ctx.open()
            let schema = TableSchema("ops", fields: [
                FieldDefinition("table", .string), FieldDefinition("itemId", .string), FieldDefinition("state", .string, indexed: true),
                FieldDefinition("sequence", .int, indexed: true), FieldDefinition("kind", .string), FieldDefinition("createdAt", .date),
                FieldDefinition("attempts", .int),
            ], indexes: [IndexDefinition(["table", "itemId"]), IndexDefinition(["state", "sequence"]), IndexDefinition(["updatedAt"]),
                         IndexDefinition(["kind", "createdAt", "attempts"]), IndexDefinition(["id", "version"]), IndexDefinition(["deleted", "table"])])
            try await must(await store.defineTable(schema), "defining a table with composite indexes")
            var rng = SplitMix64(seed: 7)
            let records = (0..<500).map { i -> Record in
                var fields: [String: Value] = ["table": .string(rng.pick(["items", "notes", "Items", "日本"])), "itemId": .string("item\(rng.below(40))"),
                                               "state": .string(rng.pick(["pending", "attempted", "failed"])), "sequence": .int(Int64(i)),
                                               "kind": .string(rng.pick(["insert", "update", "delete"])),
                                               "createdAt": .date(Timestamp(millisecondsSince1970: Int64(rng.below(20))))]
                if rng.chance(70) { fields["attempts"] = .int(Int64(rng.below(4))) }
                return Record(id: "op\(i)", fields: fields, version: rng.chance(50) ? "v\(rng.below(3))" : nil,
                              updatedAt: rng.chance(60) ? Timestamp(millisecondsSince1970: Int64(rng.below(10))) : nil, deleted: rng.chance(10))
            }
            try await must(await store.write { tx in for r in records { try tx.upsert(r, in: "ops") } }, "writing 500 operations")
            let queries = [
                Query(Field("table") == "items" && Field("itemId") == "item3"), Query(Field("state") == "pending", order: [SortKey("sequence")]),
                Query(Field("state") == "failed" && Field("sequence") > 250, order: [SortKey("sequence", ascending: false)], limit: 10),
                Query(Field(SystemField.updatedAt) > .date(Timestamp(millisecondsSince1970: 4)), order: [SortKey("updatedAt")]),
                Query(Field("kind") == "update" && Field("createdAt") >= .date(Timestamp(millisecondsSince1970: 10)), order: [SortKey("kind"), SortKey("createdAt"), SortKey("attempts")]),
                Query(Field(SystemField.deleted) == true, order: [SortKey("table")]), Query(Field("table").isIn(["Items", "日本"]), order: [SortKey("itemId", ascending: false)], limit: 20, offset: 5),
                Query(Field(SystemField.id).hasPrefix("op4"), order: [SortKey("version"), SortKey("id", ascending: false)]),
                Query(Field("attempts").isNull || Field("attempts") < 1, order: [SortKey("attempts", ascending: false), SortKey("sequence")]),
            ]
            try await Differential.check(store, table: "ops", records: records, queries: queries, label: "indexed query")
            let schemaBack = try await must(await store.read { tx in try tx.schema(of: "ops") }, "reading the schema")
            try expectEqual(schemaBack, schema, "the schema with its indexes")
        },
        ConformanceCase("largeBatch") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(TableSchema("big", fields: [FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string)])), "defining big")
            let records = (0..<10_000).map { Record(id: "r\($0)", fields: ["n": .int(Int64($0 % 1000)), "s": .string("value \($0)"), "u": .int(Int64($0))]) }
            try await must(await store.write { tx in for r in records { try tx.upsert(r, in: "big") } }, "10,000 upserts in one transaction")
            let (count, filtered, page) = try await must(await store.read { tx in
                (try tx.count(in: "big", matching: .all), try tx.count(in: "big", matching: Field("n") < 10),
                 try tx.records(in: "big", matching: Query(Field("n") >= 990, order: [SortKey("n", ascending: false), SortKey("u")], limit: 25, offset: 50)))
            }, "counting")
            try expectEqual(count, 10_000, "count after 10,000 upserts")
            try expectEqual(filtered, 100, "count of n < 10")
            try expectRecords(page, QueryEvaluator.apply(Query(Field("n") >= 990, order: [SortKey("n", ascending: false), SortKey("u")], limit: 25, offset: 50), to: records), "a page of the large table")
            let deleted = try await must(await store.write { tx in
                try records.filter { $0["u"].intValue! % 2 == 0 }.reduce(0) { $0 + (try tx.delete(id: $1.id, in: "big") ? 1 : 0) }
            }, "5,000 deletes in one transaction")
            try expectEqual(deleted, 5000, "deletes that found their record")
            let remaining = try await must(await store.read { tx in try tx.count(in: "big", matching: .all) }, "counting again")
            try expectEqual(remaining, 5000, "count after deleting half")
        },
    ]
}

enum SystemTableFixtures {
    /// A record filling every declared field of `schema` with a value of its type (one field
    /// left null every few records), plus system properties and, where allowed, an undeclared field.
    static func record(for schema: TableSchema, index i: Int) -> Record {
        var fields: [String: Value] = schema.undeclaredFields == .store ? ["extra": .string("undeclared \(i)")] : [:]
        for (position, field) in schema.fields.enumerated() where (i + position) % 5 != 0 {
            fields[field.name] = value(field, i)
        }
        return Record(id: "\(schema.name)-\(i)", fields: fields, version: i % 3 == 0 ? nil : "v\(i)",
                      updatedAt: i % 4 == 0 ? nil : Timestamp(millisecondsSince1970: 1_700_000_000_000 + Int64(i)), deleted: i % 6 == 5)
    }

    static func value(_ field: FieldDefinition, _ i: Int) -> Value {
        switch field.name {
        case "state": return .string(["pending", "attempted", "failed"][i % 3])
        case "kind": return .string(["insert", "update", "delete"][i % 3])
        case "sequence": return .int(Int64(100 - i))
        default: break
        }
        switch field.type {
        case .bool: return .bool(i % 2 == 0)
        case .int: return .int(Int64(i * 37 % 11 - 5))
        case .double: return .double(Double(i) / 4 - 1)
        case .string: return .string("\(field.name) \(i % 4) é")
        case .bytes: return .bytes([UInt8(i), 0, 255])
        case .date: return .date(Timestamp(millisecondsSince1970: Int64(i % 5) * 1000 - 2000))
        case .array: return .array([.int(Int64(i)), .string("x")])
        case .object: return .object(["id": .string("item\(i)"), "n": .int(Int64(i)), "nested": .object(["ok": true])])
        case .any: return i % 2 == 0 ? .int(Int64(i)) : .string("any \(i)")
        }
    }
}
