import OfflineSync
import OfflineSyncStoreKit

extension LocalStoreConformance {
    static let schemaEvolutionCases: [ConformanceCase] = [
        ConformanceCase("declareExistingField") { ctx in
            // Rows kept age and name as undeclared fields; declaring age picks their values up.
            let store = try await ctx.open()
            let records = try await SchemaEvolution.seed(store)
            let declared = TableSchema("people", fields: [FieldDefinition("age", .int, indexed: true)])
            try await must(await store.defineTable(declared), "declaring age: int, indexed")
            try await SchemaEvolution.expectTable(store, declared, records, "after declaring age")
            try await expectThrows(.typeMismatch, "a string age once age is declared int") {
                try await store.write { tx in try tx.upsert(Record(id: "new", fields: ["age": "old"]), in: "people") }
            }
        },
        ConformanceCase("incompatibleRedefinitionChangesNothing") { ctx in
            let store = try await ctx.open()
            let records = try await SchemaEvolution.seed(store)
            let original = TableSchema("people")
            try await expectThrows(.schemaMismatch, "declaring name: int while rows hold strings") {
                try await store.defineTable(TableSchema("people", fields: [FieldDefinition("name", .int)]))
            }
            try await expectThrows(.schemaMismatch, "declaring age: int and name: int together") {
                try await store.defineTable(TableSchema("people", fields: [FieldDefinition("age", .int), FieldDefinition("name", .int, indexed: true)]))
            }
            try await expectThrows(.schemaMismatch, "declaring age: double while rows hold ints") {
                try await store.defineTable(TableSchema("people", fields: [FieldDefinition("age", .double)]))
            }
            try await SchemaEvolution.expectTable(store, original, records, "after refused redefinitions")
            // The old schema is still in force: a string age is still accepted.
            try await must(await store.write { tx in try tx.upsert(Record(id: "z", fields: ["age": "n/a"]), in: "people") }, "writing under the old schema")
        },
        ConformanceCase("undeclareFieldKeepsValues") { ctx in
            let store = try await ctx.open()
            let records = try await SchemaEvolution.seed(store)
            let declared = TableSchema("people", fields: [FieldDefinition("age", .int, indexed: true), FieldDefinition("name", .string)])
            try await must(await store.defineTable(declared), "declaring age and name")
            try await SchemaEvolution.expectTable(store, declared, records, "after declaring both")
            let dropped = TableSchema("people", fields: [FieldDefinition("name", .string)])
            try await must(await store.defineTable(dropped), "dropping age from the declared fields")
            try await SchemaEvolution.expectTable(store, dropped, records, "after undeclaring age")
            let none = TableSchema("people")
            try await must(await store.defineTable(none), "dropping every declared field")
            try await SchemaEvolution.expectTable(store, none, records, "after undeclaring everything")
            let mixed = Record(id: "mixed", fields: ["age": "now a string", "name": 5])
            try await must(await store.write { tx in try tx.upsert(mixed, in: "people") }, "writing other kinds once undeclared")
            try await SchemaEvolution.expectTable(store, none, records + [mixed], "after writing other kinds")
        },
        ConformanceCase("changeFieldType") { ctx in
            let store = try await ctx.open()
            let records = try await SchemaEvolution.seed(store)
            let asInt = TableSchema("people", fields: [FieldDefinition("age", .int)])
            try await must(await store.defineTable(asInt), "declaring age: int")
            let asAny = TableSchema("people", fields: [FieldDefinition("age", .any), FieldDefinition("name", .any)])
            try await must(await store.defineTable(asAny), "widening age to any")
            try await SchemaEvolution.expectTable(store, asAny, records, "after widening to any")
            try await must(await store.defineTable(asInt), "narrowing age back to int (every age is an int)")
            try await SchemaEvolution.expectTable(store, asInt, records, "after narrowing back to int")
            try await expectThrows(.schemaMismatch, "narrowing age to string") {
                try await store.defineTable(TableSchema("people", fields: [FieldDefinition("age", .string)]))
            }
            try await SchemaEvolution.expectTable(store, asInt, records, "after a refused narrowing")
        },
        ConformanceCase("oneBadRowFailsMigration") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(TableSchema("many")), "defining many")
            var records = (0..<200).map { Record(id: "r\($0)", fields: ["n": .int(Int64($0)), "s": "x"]) }
            records[137] = Record(id: "r137", fields: ["n": "one hundred thirty-seven", "s": "x"])
            try await must(await store.write { [records] tx in for r in records { try tx.upsert(r, in: "many") } }, "writing")
            let intSchema = TableSchema("many", fields: [FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string)])
            try await expectThrows(.schemaMismatch, "declaring n: int while one row of 200 holds a string") {
                try await store.defineTable(intSchema)
            }
            try await SchemaEvolution.expectTable(store, TableSchema("many"), records, "after the refused migration", table: "many")
            _ = try await must(await store.write { tx in try tx.delete(id: "r137", in: "many") }, "deleting the odd row")
            records.remove(at: 137)
            try await must(await store.defineTable(intSchema), "declaring n: int once every row fits")
            try await SchemaEvolution.expectTable(store, intSchema, records, "after the migration", table: "many")
            let big = try await must(await store.read { tx in try tx.count(in: "many", matching: Field("n") >= 150) }, "querying n")
            try expectEqual(big, 50, "rows with n >= 150")
        },
        ConformanceCase("addFieldsAndIndexes") { ctx in
            let store = try await ctx.open()
            let records = try await SchemaEvolution.seed(store)
            let steps = [
                TableSchema("people", fields: [FieldDefinition("age", .int)]),
                TableSchema("people", fields: [FieldDefinition("age", .int, indexed: true), FieldDefinition("nickname", .string)]),
                TableSchema("people", fields: [FieldDefinition("age", .int, indexed: true), FieldDefinition("nickname", .string, indexed: true),
                                               FieldDefinition("name", .string)], indexes: [IndexDefinition(["name", "age"])]),
                TableSchema("people", fields: [FieldDefinition("name", .string)], indexes: [IndexDefinition(["name", "updatedAt"])]),
            ]
            for (index, schema) in steps.enumerated() {
                try await must(await store.defineTable(schema), "redefinition \(index)")
                try await SchemaEvolution.expectTable(store, schema, records, "after redefinition \(index)")
            }
        },
        ConformanceCase("evolutionPersists", requires: .persistent) { ctx in
            var store = try await ctx.open()
            let records = try await SchemaEvolution.seed(store)
            let declared = TableSchema("people", fields: [FieldDefinition("age", .int, indexed: true)], indexes: [IndexDefinition(["age", "updatedAt"])])
            try await must(await store.defineTable(declared), "declaring age")
            store = try await ctx.reopen(store)
            try await SchemaEvolution.expectTable(store, declared, records, "after reopening")
            try await must(await store.defineTable(TableSchema("people")), "undeclaring age")
            store = try await ctx.reopen(store)
            try await SchemaEvolution.expectTable(store, TableSchema("people"), records, "after undeclaring and reopening")
        },
    ]
}

enum SchemaEvolution {
    /// Defines `people` with no declared fields and writes rows with `age` (int) and `name`
    /// (string), some missing either.
    static func seed(_ store: any LocalStore, file: String = #fileID, line: Int = #line) async throws -> [Record] {
        let records = [
            Record(id: "p1", fields: ["age": 1, "name": "Ann"]), Record(id: "p2", fields: ["age": 5, "name": "Bo"]),
            Record(id: "p3", fields: ["age": 30, "name": "Cy", "note": [1, 2]], version: "v", updatedAt: Timestamp(millisecondsSince1970: 3)),
            Record(id: "p4", fields: ["name": "Di"]), Record(id: "p5", fields: ["age": -7]), Record(id: "p6", fields: ["age": 4, "name": "é"]),
        ]
        try await must(await store.defineTable(TableSchema("people")), "defining people with no declared fields", file: file, line: line)
        try await must(await store.write { tx in for r in records { try tx.upsert(r, in: "people") } }, "writing people", file: file, line: line)
        return records
    }

    /// Fails unless the table has exactly this schema and these records, and `age > 3`
    /// and `name` queries answer as ``QueryEvaluator`` does.
    static func expectTable(_ store: any LocalStore, _ schema: TableSchema, _ records: [Record], _ when: String, table: String = "people",
                            file: String = #fileID, line: Int = #line) async throws {
        let queries = [Query(Field("age") > 3, order: [SortKey("age", ascending: false)]), Query(Field("name") >= "Bo", order: [SortKey("name")]),
                       Query(Field("age").isNull), Query(Field("n") >= 150, order: [SortKey("n")], limit: 10)]
        let usable = queries.filter { (try? $0.validate(against: schema)) != nil }
        let (current, all, results) = try await must(await store.read { tx in
            (try tx.schema(of: table), try tx.records(in: table, matching: .all), try usable.map { try tx.records(in: table, matching: $0) })
        }, "reading \(table) \(when)", file: file, line: line)
        try expectEqual(current, schema, "the schema \(when)", file: file, line: line)
        try expectRecords(all, records.sorted { Value.utf8Less($0.id, $1.id) }, "records \(when)", file: file, line: line)
        for (query, result) in zip(usable, results) {
            try expectRecords(result, QueryEvaluator.apply(query, to: records), "`\(Render.query(query))` \(when)", file: file, line: line)
        }
    }
}
