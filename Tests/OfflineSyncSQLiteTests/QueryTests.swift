import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Differential tests: every query's result must equal ``QueryEvaluator`` on the same records.
@Suite("SQLiteStore queries match QueryEvaluator")
struct QueryTests {
    static let schema = TableSchema("items", fields: [
        FieldDefinition("n", .int, indexed: true),
        FieldDefinition("x", .double),
        FieldDefinition("s", .string, indexed: true),
        FieldDefinition("b", .bool),
        FieldDefinition("d", .date),
        FieldDefinition("blob", .bytes),
        FieldDefinition("tags", .array),
        FieldDefinition("meta", .any),
    ], indexes: [IndexDefinition(["s", "n"]), IndexDefinition(["updatedAt"])])

    static let ints: [Value] = [nil, 0, 1, -1, 2, 3, 5, 7, 42, -42, .int(.max), .int(.min), .int(.max - 1),
                                .int(9_007_199_254_740_993), .int(9_007_199_254_740_992), .int(-9_007_199_254_740_993)]
    static let doubles: [Value] = [nil, 0.0, -0.0, 1.0, 2.5, -2.5, 3.0, .double(.infinity), .double(-.infinity),
                                   .double(.greatestFiniteMagnitude), .double(.leastNonzeroMagnitude),
                                   9_007_199_254_740_992.0, 9_007_199_254_740_994.0, 9.3e18, -9.3e18, 1e300]
    static let strings: [Value] = [nil, "", "a", "abc", "ABC", "Abc", "ab", "b", "bc", "é", "e\u{301}", "éclair",
                                   "e\u{301}clair", "ß", "Ä", "z", "🙂", "a\u{0}b", "日本", "日本語", "%", "_x"]
    static let bools: [Value] = [nil, true, false]
    static let dates: [Value] = [nil, .date(Timestamp(millisecondsSince1970: 0)),
                                 .date(Timestamp(millisecondsSince1970: -1000)),
                                 .date(Timestamp(millisecondsSince1970: 1_700_000_000_000)),
                                 .date(Timestamp(millisecondsSince1970: 1_700_000_000_001))]
    static let blobs: [Value] = [nil, .bytes([]), .bytes([0]), .bytes([1, 2]), .bytes([255]), .bytes([0, 0]), .bytes([1])]
    static let mixed: [Value] = [nil, 1, 3, 2.5, -0.0, 3.0, "a", "abc", "é", "e\u{301}x", true, false, .bytes([1]),
                                 .date(Timestamp(millisecondsSince1970: 5)), [1], ["k": 1], .int(.max), 9.3e18]

    static func records() -> [Record] {
        var rng = SplitMix64(seed: 0x5EED)
        let versions: [String?] = [nil, "v1", "v2", "V1", "é", ""]
        let stamps: [Timestamp?] = [nil, Timestamp(millisecondsSince1970: 10), Timestamp(millisecondsSince1970: 20),
                                    Timestamp(millisecondsSince1970: -5)]
        var ids = (0..<300).map { "r\($0)" }
        ids += ["é", "e\u{301}", "Z", "a", "A", "r1\u{1}x", "🙂"]
        return ids.map { id in
            var fields: [String: Value] = [:]
            fields["n"] = rng.pick(ints)
            fields["x"] = rng.pick(doubles)
            fields["s"] = rng.pick(strings)
            fields["b"] = rng.pick(bools)
            fields["d"] = rng.pick(dates)
            fields["blob"] = rng.pick(blobs)
            if rng.chance(30) { fields["tags"] = .array([rng.pick(strings)]) }
            if rng.chance(30) { fields["meta"] = rng.pick(mixed) }
            fields["u"] = rng.pick(mixed)
            fields["w"] = rng.pick(strings)
            if rng.chance(20) { fields["é"] = rng.pick(ints) }
            return Record(id: id, fields: fields, version: rng.pick(versions), updatedAt: rng.pick(stamps),
                          deleted: rng.chance(25))
        }
    }

    static let predicates: [QueryPredicate] = {
        let n = Field("n"), x = Field("x"), s = Field("s"), b = Field("b"), d = Field("d"), blob = Field("blob")
        let u = Field("u"), w = Field("w")
        var list: [QueryPredicate] = [
            .all, .and([]), .or([]), .not(.and([])), .not(.or([])),
            // int column, int and double literals
            n == 5, n != 5, n < 0, n <= 3, n > 7, n >= .int(.max), n == .int(.min), n > .int(9_007_199_254_740_992),
            n < 2.5, n <= 2.5, n > 2.5, n >= 2.5, n == 3.0, n != 3.0, n == 2.5, n != 2.5, n > -0.0,
            n < 9.3e18, n > -9.3e18, n < .double(.infinity), n > .double(-.infinity), n >= 9_223_372_036_854_775_808.0,
            n <= -9_223_372_036_854_775_808.0, n < -9_223_372_036_854_775_808.0, n == 9_007_199_254_740_992.0,
            // double column, double and int literals
            x == 0.0, x == -0.0, x == 0, x < 0, x > 2, x >= 3, x == 3, x <= .int(9_007_199_254_740_993),
            x > .int(9_007_199_254_740_993), x == .int(9_007_199_254_740_993), x != .int(9_007_199_254_740_993),
            x < .int(.max), x >= .int(.max), x > .int(.min), x == .double(.infinity), x < .double(.greatestFiniteMagnitude),
            x > .double(.leastNonzeroMagnitude) && x < 1,
            // strings by bytes
            s == "é", s == "e\u{301}", s < "e", s > "e", s >= "é", s < "ab", s == "", s != "", s > "a\u{0}",
            s.hasPrefix("é"), s.hasPrefix("e\u{301}"), s.hasPrefix(""), s.hasPrefix("a"), s.hasPrefix("A"),
            s.hasPrefix("日"), s.hasPrefix("日本語"), s.hasPrefix("a\u{0}"), s.hasPrefix("%"),
            s.hasSuffix("c"), s.hasSuffix(""), s.hasSuffix("clair"), s.hasSuffix("\u{301}clair"), s.hasSuffix("BC"),
            s.hasSuffix("語"), s.hasSuffix("日本語"), s.hasSuffix("x日本語"), s.hasSuffix("\u{0}b"), s.hasSuffix("x"),
            .not(s.hasSuffix("")), .not(s.hasSuffix("c")), w.hasSuffix("é"), u.hasSuffix("c"),
            Field("id").hasSuffix("0"), Field("version").hasSuffix("1"), .not(Field("version").hasSuffix("")),
            s.contains("b"), s.contains("B"), s.contains(""), s.contains("\u{301}"), s.contains("本"),
            s.contains("%"), s.contains("_"), s.contains("\u{0}"), .not(s.contains("b")), .not(s.contains("")),
            .not(s.hasPrefix("a")), .not(s.hasPrefix("")), .not(s.hasPrefix("é")), .not(w.hasPrefix("a")),
            .not(Field("version").hasPrefix("v")), .not(Field("version").contains("")),
            s.isIn(["abc", "ABC"]), s.isIn([]), s.isIn([nil]), s.isIn(["a", nil]), .not(s.isIn(["a", nil])),
            .not(s.isIn([])), s.isNull, .not(s.isNull),
            // bool, date, bytes, non-scalar
            b == true, b == false, b != true, b < true, .not(b == true), b.isIn([true, nil]),
            d > .date(Timestamp(millisecondsSince1970: 0)), d <= .date(Timestamp(millisecondsSince1970: 1_700_000_000_000)),
            d.isNull, blob == .bytes([]), blob < .bytes([1]), blob >= .bytes([0]), blob.isIn([.bytes([]), .bytes([255])]),
            Field("tags").isNull, .not(Field("meta").isNull), Field("meta") == nil, Field("meta").isIn([nil]),
            // null literals
            n == nil, n != nil, .not(n == nil), n.isIn([nil]), n.isIn([1, nil]), .not(n.isIn([1, nil])),
            n.isIn([1, 2.5, 3.0, .int(.max)]), x.isIn([0, 2.5, .int(9_007_199_254_740_993)]), x.isIn([.int(9_007_199_254_740_993)]),
            // system properties
            Field("id") == "é", Field("id").hasPrefix("r1"), Field("id").contains("\u{1}"), Field("id") > "r5",
            Field("id").isIn(["a", "A", "e\u{301}"]), Field("version") == "v1", Field("version").isNull,
            Field("version") < "v2", Field("version").hasPrefix("v"), Field("updatedAt") > .date(Timestamp(millisecondsSince1970: 0)),
            Field("updatedAt").isNull, Field("deleted") == true, Field("deleted").isNull, Field("deleted") != false,
            // undeclared fields (evaluated by QueryEvaluator after SQL pre-filtering)
            u == 3, u == 3.0, u > 2.5, u < "b", u.hasPrefix("a"), u.contains("b"), u.isNull, u.isIn([1, "a", nil]),
            u == .bytes([1]), w.hasPrefix("é"), w.contains(""), Field("é") > 2, Field("é").isNull, Field("missing").isNull,
            Field("missing") == 1,
            // combinations, three-valued logic, mixes of SQL and evaluator parts
            .not(n > 3), n > 3 || s == "a", .not(n > 3 || s == "a"), n > 3 && s.hasPrefix("a"),
            .not(n > 3 && b == true), .and([n > 0, u == 3]), .or([n > 0, u == 3]), .not(.or([u == 1, n < 0])),
            .and([.or([b == true, x > 1]), .not(s.isNull), u.isNull]), .and([.and([n >= 0, n <= 7]), .not(d.isNull)]),
            .or([.and([n == nil, s == "a"]), .not(x == 0)]), .not(.and([n == nil, .not(b == false)])),
            .and([w.contains("a"), .or([n < 3, u > 1]), .not(Field("deleted") == true)]),
        ]
        list.append(.and(list.prefix(6).map { $0 }))
        return list
    }()

    static let orders: [[SortKey]] = [
        [], [SortKey("n")], [SortKey("s", ascending: false), SortKey("n")], [SortKey("x")],
        [SortKey("u")], [SortKey("version", ascending: false), SortKey("updatedAt")],
        [SortKey("b"), SortKey("d", ascending: false), SortKey("blob")], [SortKey("id", ascending: false)],
        [SortKey("w", ascending: false), SortKey("x", ascending: false)], [SortKey("deleted"), SortKey("é")],
    ]

    static let pages: [(limit: Int?, offset: Int)] = [(nil, 0), (10, 0), (7, 5), (0, 0), (nil, 290), (5, 1000), (1, 3), (.max, 3), (.max, .max)]

    @Test("query results and counts equal QueryEvaluator on generated records")
    func differential() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(at: directory.appendingPathComponent("q.sqlite").path) { store in
                let records = Self.records()
                try await store.defineTable(Self.schema)
                try await store.write { transaction in
                    for record in records { try transaction.upsert(record, in: "items") }
                }
                var compared = 0
                for (number, predicate) in Self.predicates.enumerated() {
                    // Unpaged and paged queries, with the orderings rotating from predicate to
                    // predicate so each ordering meets every kind of predicate.
                    var queries = (0..<4).map { Query(predicate, order: Self.orders[(number * 3 + $0) % Self.orders.count]) }
                    for (k, page) in Self.pages.enumerated() {
                        let order = Self.orders[(number + k) % Self.orders.count]
                        queries.append(Query(predicate, order: order, limit: page.limit, offset: page.offset))
                    }
                    let batch = queries
                    let (results, count) = try await store.read { transaction in
                        (try batch.map { try transaction.records(in: "items", matching: $0) },
                         try transaction.count(in: "items", matching: predicate))
                    }
                    #expect(count == QueryEvaluator.count(predicate, in: records), "count of \(predicate)")
                    for (query, result) in zip(batch, results) {
                        let expected = QueryEvaluator.apply(query, to: records)
                        if result != expected {
                            let got = Set(result.map { Array($0.id.utf8) }), want = Set(expected.map { Array($0.id.utf8) })
                            Issue.record("""
                                query \(query.predicate) order \(query.order.map { "\($0.field)\($0.ascending ? "↑" : "↓")" }) \
                                limit \(String(describing: query.limit)) offset \(query.offset): \
                                \(result.count) rows instead of \(expected.count); \
                                extra \(got.subtracting(want).count), missing \(want.subtracting(got).count)
                                """)
                        }
                        compared += 1
                    }
                }
                #expect(compared == Self.predicates.count * (4 + Self.pages.count))
            }
        }
    }

    @Test("the first(in:matching:) helper and a write transaction see the same results")
    func writeTransactionQueries() async throws {
        let store = try await SQLiteStore.inMemory()
        let records = Self.records()
        try await store.defineTable(Self.schema)
        let query = Query(Field("n") > 0 && Field("u").isNull, order: [SortKey("s")], limit: 3)
        let (inWrite, first) = try await store.write { transaction in
            for record in records { try transaction.upsert(record, in: "items") }
            return (try transaction.records(in: "items", matching: query), try transaction.first(in: "items", matching: query))
        }
        #expect(inWrite == QueryEvaluator.apply(query, to: records))
        #expect(first == inWrite.first)
        try await store.close()
    }

    @Test("queries that do not fit the schema are refused as the core refuses them")
    func invalidQueries() async throws {
        let store = try await SQLiteStore.inMemory()
        try await store.defineTable(Self.schema)
        let invalid: [Query] = [
            Query(Field("n") == "text"), Query(Field("s") > 3), Query(Field("x") == true),
            Query(Field("tags") == [1]), Query(Field("meta") == 1), Query(Field("n").contains("1")),
            Query(Field("b").hasPrefix("t")), Query(Field("b").hasSuffix("e")), Query(Field("x") == .double(.nan)), Query(Field("") == 1),
            Query(Field("ID") == "1"), Query(.all, limit: -1), Query(.all, offset: -1),
            Query(.all, order: [SortKey("tags")]), Query(Field("id") == 1),
        ]
        for query in invalid {
            let code = await syncErrorCode {
                _ = try await store.read { try $0.records(in: "items", matching: query) }
            }
            #expect(code == .invalidQuery, "\(query.predicate)")
        }
        let countCode = await syncErrorCode {
            _ = try await store.read { try $0.count(in: "items", matching: Field("s") > 3) }
        }
        #expect(countCode == .invalidQuery)
        let missing = await syncErrorCode {
            _ = try await store.read { try $0.records(in: "nope", matching: .all) }
        }
        #expect(missing == .tableNotDefined)
        try await store.close()
    }

    /// The adapter reuses a recent query's SQL, unvalidated, for a query of the same structure
    /// (`SQLQueryShapes.sql(reusing:table:parameter:)`): each reused query still answers with
    /// its own literals, and a query that differs only where validation looks is refused.
    @Test("queries shaped like a recent one: their own results, and refusals as before")
    func reusedStructure() async throws {
        let store = try await SQLiteStore.inMemory()
        let records = Self.records()
        try await store.defineTable(Self.schema)
        try await store.write { transaction in
            for record in records { try transaction.upsert(record, in: "items") }
        }
        let literals: [(Int64, String)] = [(1, "a"), (-1, "abc"), (42, "é"), (0, "e\u{301}"), (.max, ""), (3, "日本")]
        let queries = literals.flatMap { n, s in
            [Query(Field("n") >= .int(n) && Field("s") != .string(s), order: [SortKey("s", ascending: false)], limit: 5),
             Query(Field("s") == .string(s), order: [SortKey("n")]),
             Query(Field("n") < .int(n), order: [SortKey("n"), SortKey("id")], limit: 4, offset: 2)]
        }
        let results = try await store.read { transaction in
            try queries.map { try transaction.records(in: "items", matching: $0) }
        }
        for (query, result) in zip(queries, results) {
            #expect(result == QueryEvaluator.apply(query, to: records), "\(query.predicate) limit \(String(describing: query.limit))")
        }
        // Each refused query follows a valid one of its structure, in the same transaction.
        let pairs: [(valid: Query, refused: Query)] = [
            (Query(Field("n") == 1, order: [SortKey("s")], limit: 3), Query(Field("n") == "text", order: [SortKey("s")], limit: 3)),
            (Query(Field("s") == "a"), Query(Field("s") == 3)),
            (Query(Field("n") == 1, limit: 3), Query(Field("n") == 1, limit: -1)),
            (Query(Field("n") == 1, limit: 3, offset: 1), Query(Field("n") == 1, limit: 3, offset: -1)),
        ]
        for (valid, refused) in pairs {
            let code = await syncErrorCode {
                _ = try await store.read { transaction in
                    _ = try transaction.records(in: "items", matching: valid)
                    _ = try transaction.records(in: "items", matching: refused)
                }
            }
            #expect(code == .invalidQuery, "\(refused.predicate) limit \(String(describing: refused.limit)) offset \(refused.offset)")
        }
        try await store.close()
    }
}
