import Foundation
import OfflineSync
@testable import OfflineSyncPostgreSQL
import OfflineSyncStoreKit
import Testing

/// The SQL layout: typed columns, indexes, the JSON mirror, SQL queries on indexes and
/// migrations that copy rows into a new layout.
@Suite("PostgreSQL layout: typed columns, indexes, JSON mirror, migrations",
       .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct LayoutTests {
    static let table = TableSchema("things", fields: [
        FieldDefinition("flag", .bool), FieldDefinition("n", .int, indexed: true), FieldDefinition("x", .double),
        FieldDefinition("name", .string), FieldDefinition("blob", .bytes), FieldDefinition("at", .date),
        FieldDefinition("list", .array), FieldDefinition("doc", .object, indexed: true), FieldDefinition("anything", .any),
    ], indexes: [IndexDefinition(["name", "n"])])

    /// A store in a schema of its own, a raw connection to inspect it, and cleanup.
    static func withStore(_ body: (PostgreSQLStore, PGConnection, String) async throws -> Void) async throws {
        guard let url = TestServer.require() else { return }
        let schema = TestServer.schema(for: UUID().uuidString)
        let store = try await PostgreSQLStore(connectionString: url, options: .init(schema: schema))
        let raw = try PGConnection.connect(url, password: nil)
        defer {
            _ = try? raw.execute("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
            raw.close()
        }
        do {
            try await body(store, raw, schema)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    static func tableNumber(_ raw: PGConnection, _ schema: String, _ table: String) throws -> Int64 {
        let result = try raw.execute("SELECT \"num\" FROM \"\(schema)\".\"__osync_catalog\" WHERE \"name\" = $1",
                                     [.bytes(Array(table.utf8))])
        return try #require(result.int64(0, 0))
    }

    static func text(_ result: PGResult, _ row: Int, _ column: Int) -> String? {
        result.bytes(row, column).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func declaredFieldsAreTypedColumnsWithIndexes() async throws {
        try await Self.withStore { store, raw, schema in
            try await store.defineTable(Self.table)
            let number = try Self.tableNumber(raw, schema, "things")
            let columns = try raw.execute("""
                SELECT column_name::text, data_type::text FROM information_schema.columns
                WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position
                """, [.text(schema), .text(PGTable.tableName(number))])
            var types: [String: String] = [:]
            for row in 0..<columns.count { types[Self.text(columns, row, 0)!] = Self.text(columns, row, 1) }
            #expect(types == [
                "id": "bytea", "version": "bytea", "updatedAt": "bigint", "deleted": "boolean", "extra": "bytea",
                "c0": "boolean", "c1": "bigint", "c2": "double precision", "c3": "bytea", "c4": "bytea", "c5": "bigint",
                "c6": "bytea", "j6": "jsonb", "c7": "bytea", "j7": "jsonb", "c8": "bytea", "j8": "jsonb",
            ])
            let indexes = try raw.execute("SELECT indexdef::text FROM pg_indexes WHERE schemaname = $1 AND tablename = $2",
                                          [.text(schema), .text(PGTable.tableName(number))])
            let definitions = (0..<indexes.count).compactMap { Self.text(indexes, $0, 0) }
            #expect(definitions.contains { $0.contains("(c1 NULLS FIRST, id)") })
            #expect(definitions.contains { $0.contains("USING gin (j7 jsonb_path_ops)") })
            #expect(definitions.contains { $0.contains("(c3 NULLS FIRST, c1 NULLS FIRST, id)") })
        }
    }

    @Test func nestedValuesHaveAJSONMirrorAndRoundTripExactly() async throws {
        try await Self.withStore { store, raw, schema in
            try await store.defineTable(Self.table)
            let doc: Value = .object(["k": .string("a\u{0}b \"q\""), "n": .int(Int64.min), "z": .double(-0.0),
                                      "raw": .bytes([0, 255]), "when": .date(Timestamp(millisecondsSince1970: 1_700_000_000_123))])
            let record = Record(id: "r1", fields: ["doc": doc, "list": .array([.int(1), .double(1.0), .null]),
                                                   "anything": .string("plain"), "x": .double(-0.0)])
            try await store.write { try $0.upsert(record, in: "things") }
            let read = try await store.read { try $0.record(in: "things", id: "r1") }
            #expect(read == record)
            if case .double(let x)? = read?["x"] { #expect(x.sign == .minus) }
            let number = try Self.tableNumber(raw, schema, "things")
            let mirror = try raw.execute("""
                SELECT ("j7"->>'k')::text, ("j7"->>'n')::text, ("j7"->>'raw')::text, ("j7"->>'when')::text, ("j6"->>1)::text,
                       jsonb_typeof("j8")::text
                FROM "\(schema)"."\(PGTable.tableName(number))" WHERE "id" = $1
                """, [.bytes(Array("r1".utf8))])
            #expect(Self.text(mirror, 0, 0) == "a\u{FFFD}b \"q\"")
            #expect(Self.text(mirror, 0, 1) == String(Int64.min))
            #expect(Self.text(mirror, 0, 2) == Data([0, 255]).base64EncodedString())
            #expect(Self.text(mirror, 0, 3) == "1700000000123")
            #expect(Self.text(mirror, 0, 4) == "1.0")
            #expect(Self.text(mirror, 0, 5) == "string")
            // The GIN index answers containment queries over the mirror.
            let found = try raw.execute("SELECT count(*) FROM \"\(schema)\".\"\(PGTable.tableName(number))\" WHERE \"j7\" @> '{\"n\": -9223372036854775808}'")
            #expect(found.int64(0, 0) == 1)
        }
    }

    @Test func translatedQueriesAreServedByTheIndexInOrder() async throws {
        try await Self.withStore { store, raw, schema in
            try await store.defineTable(Self.table)
            try await store.write { txn in
                for i in 0..<500 {
                    try txn.upsert(Record(id: "r\(i)", fields: ["name": .string("n\(i % 5)"), "n": .int(Int64(i))]), in: "things")
                }
            }
            let query = Query(Field("name") == "n3" && Field("n") > .int(100), order: [SortKey("n")], limit: 10)
            let number = try Self.tableNumber(raw, schema, "things")
            var translator = SQLPredicateTranslator<PGDialect>(table: PGTable(number: number, schema: Self.table, quotedSchema: "\"\(schema)\""), textFunctions: true)
            let (filter, rest) = translator.split(query.predicate)
            #expect(rest.isEmpty)
            let orderBy = try #require(translator.orderBy(query.order))
            let limit = translator.bind(.int64(10))
            // With sequential scans and sorts priced out, a plan with neither exists only if
            // the composite index (name, n, id) delivers the rows filtered and in order.
            try raw.execute("BEGIN")
            try raw.execute("SET LOCAL enable_seqscan = off")
            try raw.execute("SET LOCAL enable_sort = off")
            try raw.execute("SET LOCAL enable_incremental_sort = off")
            let plan = try raw.execute("EXPLAIN SELECT \"id\" FROM \"\(schema)\".\"\(PGTable.tableName(number))\" WHERE \(try #require(filter)) \(orderBy) LIMIT \(limit)",
                                       translator.parameters)
            try raw.execute("COMMIT")
            let lines = (0..<plan.count).compactMap { Self.text(plan, $0, 0) }.joined(separator: "\n")
            #expect(lines.contains("Index"), "\(lines)")
            #expect(!lines.contains("Sort"), "\(lines)")
            #expect(!lines.contains("Seq Scan"), "\(lines)")
            let rows = try await store.read { try $0.records(in: "things", matching: query) }
            #expect(rows.map { $0["n"].intValue } == [103, 108, 113, 118, 123, 128, 133, 138, 143, 148])
        }
    }

    @Test func aMigrationCopiesRowsIntoTheNewLayoutOrChangesNothing() async throws {
        try await Self.withStore { store, raw, schema in
            let v1 = TableSchema("notes", fields: [FieldDefinition("title", .string)])
            try await store.defineTable(v1)
            try await store.write { txn in
                for i in 0..<2_500 {
                    try txn.upsert(Record(id: "n\(i)", fields: ["title": .string("t\(i)"), "rank": .int(Int64(i))]), in: "notes")
                }
            }
            let before = try await store.read { try $0.records(in: "notes", matching: .all) }
            let oldNumber = try Self.tableNumber(raw, schema, "notes")

            // Declaring `rank` a string does not fit the stored integers: refused, nothing changed.
            await #expect(throws: SyncError.self) {
                try await store.defineTable(TableSchema("notes", fields: [FieldDefinition("title", .string), FieldDefinition("rank", .string)]))
            }
            #expect(try Self.tableNumber(raw, schema, "notes") == oldNumber)
            #expect(try await store.read { try $0.records(in: "notes", matching: .all) } == before)

            // Declaring it an indexed int moves every value into its own column.
            let v2 = TableSchema("notes", fields: [FieldDefinition("title", .string), FieldDefinition("rank", .int, indexed: true)])
            try await store.defineTable(v2)
            let newNumber = try Self.tableNumber(raw, schema, "notes")
            #expect(newNumber != oldNumber)
            let old = try raw.execute("SELECT to_regclass($1)::text", [.text("\"\(schema)\".\"\(PGTable.tableName(oldNumber))\"")])
            #expect(old.isNull(0, 0))
            let typed = try raw.execute("SELECT count(*) FROM \"\(schema)\".\"\(PGTable.tableName(newNumber))\" WHERE \"c1\" IS NOT NULL AND \"extra\" IS NULL")
            #expect(typed.int64(0, 0) == 2_500)
            #expect(try await store.read { try $0.records(in: "notes", matching: .all) } == before)
            let top = try await store.read { try $0.records(in: "notes", matching: Query(Field("rank") >= .int(2_498), order: [SortKey("rank")])) }
            #expect(top.map(\.id) == ["n2498", "n2499"])
        }
    }

    @Test func bufferedWritesAreReadBackAndWrittenInBulk() async throws {
        try await Self.withStore { store, _, _ in
            try await store.defineTable(Self.table)
            try await store.write { try $0.upsert(Record(id: "old", fields: ["n": .int(-1)]), in: "things") }
            let inside = try await store.write { txn -> [Int] in
                for i in 0..<2_500 { try txn.upsert(Record(id: "r\(i)", fields: ["n": .int(Int64(i))]), in: "things") }
                try txn.upsert(Record(id: "r2499", fields: ["n": .int(9_999)]), in: "things")
                let buffered = try txn.record(in: "things", id: "r2499")?["n"].intValue
                let deletedBuffered = try txn.delete(id: "r2498", in: "things")
                let deletedStored = try txn.delete(id: "old", in: "things")
                let deletedMissing = try txn.delete(id: "never", in: "things")
                try txn.upsert(Record(id: "old", fields: ["n": .int(-2)]), in: "things")
                let count = try txn.count(in: "things", matching: .all)
                let top = try txn.records(in: "things", matching: Query(order: [SortKey("n", ascending: false)], limit: 1))
                return [Int(buffered ?? 0), deletedBuffered ? 1 : 0, deletedStored ? 1 : 0, deletedMissing ? 1 : 0, count,
                        Int(top.first?["n"].intValue ?? 0)]
            }
            #expect(inside == [9_999, 1, 1, 0, 2_500, 9_999])
            let after = try await store.read { txn in
                (try txn.count(in: "things", matching: .all), try txn.record(in: "things", id: "old")?["n"].intValue,
                 try txn.record(in: "things", id: "r2498"))
            }
            #expect(after.0 == 2_500)
            #expect(after.1 == -2)
            #expect(after.2 == nil)
        }
    }

    @Test func aBufferedWriteTheServerRefusesAtCommitRollsBackTheWholeTransaction() async throws {
        try await Self.withStore { store, raw, schema in
            try await store.defineTable(Self.table)
            try await store.write { try $0.upsert(Record(id: "keep", fields: ["n": .int(1)]), in: "things") }
            let number = try Self.tableNumber(raw, schema, "things")
            // A constraint the adapter does not know about makes the server refuse one row.
            try raw.execute("ALTER TABLE \"\(schema)\".\"\(PGTable.tableName(number))\" ADD CONSTRAINT small CHECK (\"c1\" < 100)")
            do {
                try await store.write { txn in
                    try txn.upsert(Record(id: "fine", fields: ["n": .int(5)]), in: "things")
                    _ = try txn.delete(id: "keep", in: "things")
                    try txn.upsert(Record(id: "refused", fields: ["n": .int(500)]), in: "things")
                }
                Issue.record("a write violating the constraint committed")
            } catch let error as SyncError {
                #expect(error.code == .storageFailure)
                #expect(error.message.contains("small"))
            }
            let ids = try await store.read { try $0.records(in: "things", matching: .all).map(\.id) }
            #expect(ids == ["keep"])

            // Refused when a query sends the buffer ahead of itself: the query throws, the
            // transaction rolls back, and the connection (pool size 4) keeps working.
            for _ in 0..<8 {
                await #expect(throws: SyncError.self) {
                    try await store.write { txn in
                        try txn.upsert(Record(id: "refused", fields: ["n": .int(500)]), in: "things")
                        _ = try txn.count(in: "things", matching: .all)
                    }
                }
            }
            try await store.write { try $0.upsert(Record(id: "later", fields: ["n": .int(7)]), in: "things") }
            let final = try await store.read { try $0.records(in: "things", matching: .all).map(\.id) }
            #expect(final == ["keep", "later"])
        }
    }

    @Test func queriesOnUndeclaredFieldsStreamPagesAndEqualTheEvaluator() async throws {
        try await Self.withStore { store, _, _ in
            try await store.defineTable(Self.table)
            var all: [Record] = []
            for i in 0..<3_500 {
                var fields: [String: Value] = ["n": .int(Int64((i * 7919) % 3_500))]
                if i % 3 != 0 { fields["tag"] = .string(i % 2 == 0 ? "even" : "odd") }
                all.append(Record(id: "r\(i)", fields: fields))
            }
            let records = all
            try await store.write { txn in for record in records { try txn.upsert(record, in: "things") } }
            let queries = [
                Query(Field("tag") == "odd", order: [SortKey("n")], limit: 5, offset: 3),
                Query(Field("tag") == "odd" && Field("n") < .int(2_000), order: [SortKey("n", ascending: false)], limit: 1_500),
                Query(.not(Field("tag") == "even"), order: [SortKey("tag")], limit: 10, offset: 1_000),
                Query(.isNull("tag"), limit: 0),
                Query(.or([Field("tag") == "even", Field("n") == .int(4)])),
            ]
            for query in queries {
                let expected = QueryEvaluator.apply(query, to: all)
                let got = try await store.read { try $0.records(in: "things", matching: query) }
                #expect(got == expected, "\(query)")
                let count = try await store.read { try $0.count(in: "things", matching: query.predicate) }
                #expect(count == QueryEvaluator.count(query.predicate, in: all), "\(query)")
            }
            // Inside a write transaction the stream sees the transaction's buffered writes.
            let seen = try await store.write { txn -> Int in
                try txn.upsert(Record(id: "new", fields: ["tag": "odd", "n": -1]), in: "things")
                return try txn.records(in: "things", matching: Query(Field("tag") == "odd", order: [SortKey("n")], limit: 1)).first?["n"].intValue.map(Int.init) ?? 0
            }
            #expect(seen == -1)
        }
    }

    @Test func aCatalogOfAnotherLayoutOrOriginIsRefusedAndLeftAlone() async throws {
        guard let url = TestServer.require() else { return }
        let raw = try PGConnection.connect(url, password: nil)
        let schema = TestServer.schema(for: "marker-" + UUID().uuidString)
        defer {
            _ = try? raw.execute("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
            raw.close()
        }
        // A store writes the marker; reopening it is fine.
        let store = try await PostgreSQLStore(connectionString: url, options: .init(poolSize: 1, schema: schema))
        try await store.defineTable(Self.table)
        try await store.close()
        let again = try await PostgreSQLStore(connectionString: url, options: .init(poolSize: 1, schema: schema))
        #expect(try await again.read { try $0.tables().map(\.name) } == ["things"])
        try await again.close()

        for (comment, code) in [("OfflineSync PostgreSQL layout 99", SyncError.Code.unsupported), ("a table of somebody else", .foreignDatabase)] {
            try raw.execute("COMMENT ON TABLE \"\(schema)\".\"__osync_catalog\" IS '\(comment)'")
            do {
                _ = try await PostgreSQLStore(connectionString: url, options: .init(poolSize: 1, schema: schema))
                Issue.record("a catalog commented '\(comment)' was opened")
            } catch let error as SyncError {
                #expect(error.code == code)
            }
            let kept = try raw.execute("SELECT obj_description(to_regclass($1), 'pg_class'), (SELECT count(*) FROM \"\(schema)\".\"__osync_catalog\")",
                                       [.text("\"\(schema)\".\"__osync_catalog\"")])
            #expect(Self.text(kept, 0, 0) == comment)
            #expect(kept.int64(0, 1) == 1)
        }
    }
}
