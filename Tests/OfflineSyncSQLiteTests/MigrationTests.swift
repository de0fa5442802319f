import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

@Suite("SQLiteStore schema migration")
struct MigrationTests {
    static let people: [Record] = [
        Record(id: "ann", fields: ["age": 2, "name": "Ann"]),
        Record(id: "bob", fields: ["age": 5, "name": "Bob", "tags": ["x"]]),
        Record(id: "cat", fields: ["age": 9], version: "v1"),
        Record(id: "dan", fields: ["name": "Dan"]),
        Record(id: "e\u{301}ve", fields: ["age": 4, "e\u{301}": "decomposed"]),
    ]

    @Test("a queue kept under the earlier __operations indexes is re-indexed when a context opens it; it reads, collapses and pushes as before")
    func operationsIndexesMigrate() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("queue.sqlite").path
            let service = try await OfflineSyncService(store: InMemoryStore(), schemas: [])
            let notes = TableSchema("notes", fields: [FieldDefinition("title", .string)])
            // The layout of earlier releases: `sequence` indexed alone, the item index without the id.
            var earlier = SystemTables.operationsSchema
            earlier.fields = earlier.fields.map { $0.name == "sequence" ? FieldDefinition("sequence", .int, indexed: true) : $0 }
            earlier.indexes = [IndexDefinition(["table", "itemId", "sequence"])]
            let indexes = { () throws -> [String] in
                let raw = try RawDatabase(path: path)
                defer { raw.close() }
                return try raw.strings("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = '__operations' AND name LIKE '\\_\\_osync%' ESCAPE '\\' ORDER BY name")
            }

            let writer = try await SyncContext(store: try await SQLiteStore(path: path), remote: service.remote(for: "user"))
            try await writer.defineTable(notes)
            for id in ["b", "a", "c"] { try await writer.table("notes").insert(Record(id: id, fields: ["title": .string(id)])) }
            try await writer.close()
            try await withStore(at: path) { try await $0.defineTable(earlier) }
            #expect(try indexes() == [
                #"CREATE INDEX "__osync_idx_1_0" ON "__operations" ("f_sequence")"#,
                #"CREATE INDEX "__osync_idx_1_1" ON "__operations" ("f_state")"#,
                #"CREATE INDEX "__osync_idx_1_2" ON "__operations" ("f_table", "f_itemId", "f_sequence")"#,
            ])

            let context = try await SyncContext(store: try await SQLiteStore(path: path), remote: service.remote(for: "user"))
            #expect(try indexes() == [
                #"CREATE INDEX "__osync_idx_1_0" ON "__operations" ("f_state")"#,
                #"CREATE INDEX "__osync_idx_1_1" ON "__operations" ("f_sequence", "id")"#,
                #"CREATE INDEX "__osync_idx_1_2" ON "__operations" ("f_table", "f_itemId", "f_sequence", "id")"#,
            ])
            // The newest operation on "a" is found through the new index: the update collapses into its insert.
            try await context.table("notes").update(Record(id: "a", fields: ["title": "A"]))
            let queued = try await context.queuedOperations()
            #expect(queued.map(\.itemId) == ["b", "a", "c"])
            #expect(queued.map(\.kind) == [.insert, .insert, .insert])
            #expect(queued[1].item?["title"] == "A")
            _ = try await context.push()
            #expect(try await context.queuedOperations().isEmpty)
            try await context.close()

            let reader = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: "user"))
            try await reader.defineTable(notes)
            _ = try await reader.pull("notes")
            let pulled = try await reader.table("notes").query(Query(order: [SortKey("id")]))
            #expect(pulled.map(\.id) == ["a", "b", "c"])
            #expect(pulled.map { $0["title"] } == ["A", "b", "c"])
            try await reader.close()
            // The re-indexed file passes the schema check at open.
            let left = try await withStore(at: path) { store in
                try await store.read { try $0.count(in: SystemTables.operations, matching: .all) }
            }
            #expect(left == 0)
        }
    }

    @Test("declaring a field moves its values into a column; undeclaring moves them back; nothing is lost")
    func declareAndUndeclare() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("m.sqlite").path
            let olderThanThree = Query(Field("age") > 3, order: [SortKey("age", ascending: false)])
            let expected = QueryEvaluator.apply(olderThanThree, to: Self.people)
            #expect(expected.map(\.id) == ["cat", "bob", "e\u{301}ve"])
            try await withStore(at: path) { store in
                try await store.defineTable(TableSchema("people"))
                try await store.write { transaction in
                    for record in Self.people { try transaction.upsert(record, in: "people") }
                }
                try await store.defineTable(TableSchema("people", fields: [FieldDefinition("age", .int, indexed: true)]))
                let (found, all, schema) = try await store.read { transaction in
                    (try transaction.records(in: "people", matching: olderThanThree),
                     try transaction.records(in: "people", matching: .all), try transaction.schema(of: "people"))
                }
                #expect(found == expected)
                #expect(all == QueryEvaluator.apply(.all, to: Self.people))
                #expect(schema.fields == [FieldDefinition("age", .int, indexed: true)])
            }
            let raw = try RawDatabase(path: path)
            #expect(try raw.strings("SELECT name FROM pragma_table_info('people') WHERE name = 'f_age'") == ["f_age"])
            #expect(try raw.strings("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'people' AND name LIKE '\\_\\_osync%' ESCAPE '\\'") == ["1"])
            raw.close()
            try await withStore(at: path) { store in
                try await store.defineTable(TableSchema("people", fields: [FieldDefinition("name", .string)]))
                let (found, all) = try await store.read { transaction in
                    (try transaction.records(in: "people", matching: olderThanThree),
                     try transaction.records(in: "people", matching: .all))
                }
                #expect(found == expected)
                #expect(all == QueryEvaluator.apply(.all, to: Self.people))
                try await store.defineTable(TableSchema("people"))
                let again = try await store.read { try $0.records(in: "people", matching: .all) }
                #expect(again == QueryEvaluator.apply(.all, to: Self.people))
            }
            let after = try RawDatabase(path: path)
            #expect(try after.strings("SELECT count(*) FROM pragma_table_info('people') WHERE name LIKE 'f\\_%' ESCAPE '\\'") == ["0"])
            #expect(try after.strings("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'people' AND name LIKE '\\_\\_osync%' ESCAPE '\\'") == ["0"])
            after.close()
        }
    }

    @Test("a value that does not fit the newly declared type fails with schemaMismatch and changes nothing")
    func mismatchChangesNothing() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(at: directory.appendingPathComponent("m.sqlite").path) { store in
                try await store.defineTable(TableSchema("people", fields: [FieldDefinition("name", .string)]))
                var records = Self.people
                records.append(Record(id: "old", fields: ["age": "SECRET-ninety"]))
                let all = records
                try await store.write { transaction in
                    for record in all { try transaction.upsert(record, in: "people") }
                }
                let changed = TableSchema("people", fields: [FieldDefinition("age", .int)])
                let error = await syncError { try await store.defineTable(changed) }
                #expect(error?.code == .schemaMismatch)
                #expect(error?.description.contains("SECRET") == false)
                let typeChange = TableSchema("people", fields: [FieldDefinition("name", .int)])
                #expect(await syncErrorCode { try await store.defineTable(typeChange) } == .schemaMismatch)
                let (schema, stored) = try await store.read { transaction in
                    (try transaction.schema(of: "people"), try transaction.records(in: "people", matching: .all))
                }
                #expect(schema.fields == [FieldDefinition("name", .string)])
                #expect(stored == QueryEvaluator.apply(.all, to: all))
            }
        }
    }

    @Test("type widening to any, index and policy changes, and a table with no rows")
    func otherChanges() async throws {
        let store = try await SQLiteStore.inMemory()
        try await store.defineTable(TableSchema("t", fields: [FieldDefinition("n", .int), FieldDefinition("s", .string)]))
        let records = [Record(id: "1", fields: ["n": 1, "s": "a"]), Record(id: "2", fields: ["n": .int(.min)])]
        try await store.write { transaction in
            for record in records { try transaction.upsert(record, in: "t") }
        }
        let variants = [
            TableSchema("t", fields: [FieldDefinition("n", .any), FieldDefinition("s", .string)]),
            TableSchema("t", fields: [FieldDefinition("n", .int), FieldDefinition("s", .string, indexed: true)],
                        indexes: [IndexDefinition(["s", "n", "updatedAt"])]),
            TableSchema("t", fields: [FieldDefinition("n", .int), FieldDefinition("s", .string)], undeclaredFields: .reject),
            TableSchema("t", fields: [FieldDefinition("s", .string), FieldDefinition("n", .int)]),
            TableSchema("t", fields: [FieldDefinition("n", .int), FieldDefinition("s", .string)]),
        ]
        for schema in variants {
            try await store.defineTable(schema)
            let (stored, current, selected) = try await store.read { transaction in
                (try transaction.records(in: "t", matching: .all), try transaction.schema(of: "t"),
                 try transaction.records(in: "t", matching: Query(Field("s").isNull)))
            }
            #expect(stored == records)
            #expect(current == schema)
            #expect(selected.map(\.id) == ["2"])
        }
        try await store.defineTable(TableSchema("empty"))
        try await store.defineTable(TableSchema("empty", fields: [FieldDefinition("x", .double)]))
        let empty = try await store.read { try $0.count(in: "empty", matching: .all) }
        #expect(empty == 0)
        try await store.close()
    }
}
