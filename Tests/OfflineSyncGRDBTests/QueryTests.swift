import Foundation
import GRDB
import OfflineSync
import OfflineSyncGRDB
import OfflineSyncTestSupport
import Testing

@Suite("GRDB adapter: queries on the app's tables")
struct QueryTests {
    static let readings = TableSchema("reading", fields: [FieldDefinition("sensor", .string), FieldDefinition("value", .double),
                                                          FieldDefinition("n", .int)])
    static let total = 100_000

    /// The `i`th reading: ids in order, `value` scattered over [0, 1).
    static func reading(_ i: Int) -> OfflineSync.Record {
        let digits = String(i)
        let id = "r" + String(repeating: "0", count: 6 - digits.count) + digits
        let sensor: Value = .string("s\(i % 7)")
        let value: Value = .double(Double((i &* 7919) % 100_003) / 100_003)
        let fields: [String: Value] = ["sensor": sensor, "value": value, "n": .int(Int64(i))]
        return OfflineSync.Record(id: id, fields: fields)
    }

    // The old GRDBReadTransaction decoded every row of the table into one array for every
    // query: mostRecordsHeld would be 100,000 for each of these, and rowsRead 100,000 for the
    // page, which made the attachment sweep (a page of 500 per query) quadratic.
    @Test("over 100,000 rows: a count holds no record, a top 10 at most 20, a page by id reads one page; each answer is the evaluator's",
          .timeLimit(.minutes(4)))  // a hang, not the whole suite's load
    func memoryIsBoundedByTheAnswer() async throws {
        try await withTemporaryDirectory { directory in
            let database = try DatabaseQueue(path: directory.appendingPathComponent("app.sqlite").path)
            let store = try await GRDBStore(database)
            try await store.defineTable(Self.readings)
            // Written as the engine writes a pull: nothing is captured.
            for start in stride(from: 0, to: Self.total, by: 10_000) {
                let batch = (start..<(start + 10_000)).map(Self.reading)
                try await store.write { txn -> Void in try txn.upsert(batch, in: "reading") }
            }
            let all = (0..<Self.total).map(Self.reading)
            let statistics = store.queryStatistics

            // A predicate on a double (left to the evaluator): every row is read, none kept.
            statistics.reset()
            let high = try await store.read { try $0.count(in: "reading", matching: Field("value") > .double(0.5)) }
            #expect(high == QueryEvaluator.count(Field("value") > .double(0.5), in: all))
            #expect(statistics.mostRecordsHeld == 0)
            #expect(statistics.rowsRead == Self.total)

            // An order SQL cannot give, with a limit: the best rows so far, never the table.
            statistics.reset()
            let top = Query(order: [SortKey("value", ascending: false)], limit: 10)
            let best = try await store.read { try $0.records(in: "reading", matching: top) }
            #expect(best == QueryEvaluator.apply(top, to: all))
            #expect(statistics.mostRecordsHeld <= 20)

            // The attachment sweep's page: ids after one, in id order, 500 of them.
            statistics.reset()
            let page = Query(Field(SystemField.id) > .string("r050000"), order: [SortKey(SystemField.id)], limit: 500)
            let rows = try await store.read { try $0.records(in: "reading", matching: page) }
            #expect(rows == QueryEvaluator.apply(page, to: all))
            #expect(rows.first?.id == "r050001" && rows.count == 500)
            #expect(statistics.rowsRead == 500)

            // SQL judges all of it, an offset included: only the rows before the limit are read.
            statistics.reset()
            let filtered = Query(Field("sensor") == .string("s3") && Field("n") >= .int(1000),
                                 order: [SortKey("n", ascending: false)], limit: 20, offset: 5)
            let some = try await store.read { try $0.records(in: "reading", matching: filtered) }
            #expect(some == QueryEvaluator.apply(filtered, to: all))
            #expect(statistics.rowsRead == 25)

            // SQL orders, the evaluator filters: reading stops at the limit.
            let mixed = Query(Field("value") < .double(0.01), order: [SortKey(SystemField.id)], limit: 5)
            let first = try await store.read { try $0.records(in: "reading", matching: mixed) }
            #expect(first == QueryEvaluator.apply(mixed, to: all))
            let ofOneSensor = try await store.read { try $0.count(in: "reading", matching: Field("sensor") == .string("s1")) }
            #expect(ofOneSensor == QueryEvaluator.count(Field("sensor") == .string("s1"), in: all))
            try await store.close()
        }
    }

    /// The app's table, as an app may declare it: collations, affinities and storage forms
    /// SQL must not take at their word.
    static let items = TableSchema("item", fields: [
        FieldDefinition("name", .string), FieldDefinition("code", .string), FieldDefinition("n", .int),
        FieldDefinition("x", .double), FieldDefinition("raw", .bytes), FieldDefinition("flag", .bool),
    ])

    @Test("SQL answers exactly as the evaluator: a NOCASE id and column, a numeric-affinity text column, whole REALs in an integer field")
    func translationMatchesTheEvaluator() async throws {
        try await withTemporaryDirectory { directory in
            let database = try DatabaseQueue(path: directory.appendingPathComponent("app.sqlite").path)
            try await database.write { db in
                try db.execute(sql: """
                    CREATE TABLE item (id TEXT PRIMARY KEY COLLATE NOCASE, name TEXT COLLATE NOCASE, code NUMERIC, n REAL,
                                       x DOUBLE, raw BLOB, flag BOOLEAN)
                    """)
                try db.execute(sql: """
                    INSERT INTO item VALUES
                      ('a', 'apple', '!', 3, 0.5, x'00', 0),
                      ('B', 'Apple', 'abc', 2, -0.0, x'01ff', 1),
                      ('c', 'APPLE', 'Z', 10, 1e300, x'', 2),
                      ('D', 'banana', NULL, -4, NULL, NULL, NULL),
                      ('e', '', 'b!', NULL, 2.5, x'ff', 1),
                      ('F', NULL, 'abc', 7, 0.25, x'0001', 0),
                      ('g', 'Ápple', ' x', 1, 3.0, x'00', 1)
                    """)
            }
            let store = try await GRDBStore(database)
            let context = try await SyncContext(store: store, remote: try await LoopbackServer.unusedRemote())
            try await context.defineTable(Self.items)
            // Every record as a read by id gives it: what the queries must agree with.
            let ids = ["a", "B", "c", "D", "e", "F", "g"]
            let all = try await store.read { txn in try ids.compactMap { try txn.record(in: "item", id: $0) } }
            #expect(all.count == ids.count)
            #expect(all.first?["n"] == .int(3), "a whole REAL reads as an integer")

            let queries: [Query] = [
                Query(Field("name") == .string("apple")),
                Query(Field("name") > .string("B"), order: [SortKey("name")]),
                Query(Field("name").hasPrefix("a")),
                Query(Field("name").contains("pp"), order: [SortKey("name", ascending: false)]),
                Query(Field("name").hasSuffix("LE")),
                Query(Field("name").isIn([.string("Apple"), .string("x"), .null])),
                Query(!(Field("name") == .string("apple"))),
                Query(Field("name").isNull),
                Query(Field("code") < .string("12")),
                Query(Field("code") == .string("abc"), order: [SortKey("code")]),
                Query(Field("n") == .int(3)),
                Query(Field("n") < .double(2.5)),
                Query(Field("n").isIn([.double(3.0), .int(10), .double(7.5)])),
                Query(Field("n") >= .int(2), order: [SortKey("n", ascending: false)], limit: 2, offset: 1),
                Query(Field("raw") == .bytes([0x00])),
                Query(Field("raw") < .bytes([0x01]), order: [SortKey("raw")]),
                Query(Field("flag") == .bool(true)),
                Query(Field("x") > .double(0.3), order: [SortKey("x")]),
                Query(Field(SystemField.id) > .string("b"), order: [SortKey(SystemField.id)], limit: 3),
                Query(Field(SystemField.id) == .string("b")),
                Query(order: [SortKey("name"), SortKey("n", ascending: false)], limit: 4),
                Query(Field(SystemField.deleted) == .bool(false) && Field(SystemField.version).isNull, order: [SortKey(SystemField.updatedAt)]),
            ]
            for query in queries {
                let answer = try await store.read { try $0.records(in: "item", matching: query) }
                #expect(answer.map(\.id) == QueryEvaluator.apply(query, to: all).map(\.id), "\(query)")
                let counted = try await store.read { try $0.count(in: "item", matching: query.predicate) }
                #expect(counted == QueryEvaluator.count(query.predicate, in: all), "\(query)")
            }
            try await context.close()
        }
    }
}
