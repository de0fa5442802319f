import OfflineSync
import OfflineSyncStoreKit

/// Data and queries for differential testing against ``QueryEvaluator``: deterministic
/// (seeded ``SplitMix64``), with nulls, missing fields, duplicates, negative numbers,
/// integers next to doubles, non-ASCII strings and mixed-kind undeclared fields.
enum QueryFixtures {
    static let table = "q"

    /// Declared fields of every scalar type (two indexed) and three non-scalar ones;
    /// `u` (mixed kinds) and `tag` (strings) stay undeclared.
    static let schema = TableSchema(table, fields: [
        FieldDefinition("flag", .bool), FieldDefinition("n", .int, indexed: true), FieldDefinition("x", .double),
        FieldDefinition("s", .string, indexed: true), FieldDefinition("b", .bytes), FieldDefinition("t", .date),
        FieldDefinition("o", .object), FieldDefinition("a", .array), FieldDefinition("y", .any),
    ], indexes: [IndexDefinition(["s", "n"]), IndexDefinition(["updatedAt"])])

    static let ints: [Int64] = Array(-5...5) + [.min, .max, 1000, -1000, 9_007_199_254_740_993]
    static let doubles: [Double] = [-3.5, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 1e10, -.infinity, .infinity, 0.1,
                                    9.3e18, -9.3e18, 9_007_199_254_740_992.0, .leastNonzeroMagnitude]
    static let strings: [String] = ["", "a", "A", "b", "ab", "abc", "abd", "\u{E9}", "e\u{301}", "e", "日本", "日本語",
                                    "emoji😀", "😀", "Zebra", "zebra", " a", "a b", "a\u{0}b", "ü", "ue", "%", "_", "a%b", "x_y"]
    static let bytes: [[UInt8]] = [[], [0], [0, 1], [1], [255], [0, 0], [1, 0], [0x7F], [0x80]]
    static let dates: [Int64] = [-1000, -1, 0, 1, 1_700_000_000_000, 1_700_000_000_001, 253_402_300_799_999, .min]
    static let mixed: [Value] = [.int(2), .double(2.0), .double(2.5), .string("2"), .string("a"), .string("é"), .bool(true),
                                 .bool(false), .int(-1), .double(-0.0), .bytes([1]), .date(Timestamp(millisecondsSince1970: 0)),
                                 .int(.max), .double(.infinity)]
    static let versions: [String?] = [nil, "v1", "v2", "v10", "V1", "\u{E9}", ""]
    static let idPrefixes = ["a", "B", "\u{E9}", "e\u{301}", "z", "日", "0", "a b", "~"]

    static func int(_ rng: inout SplitMix64) -> Value { .int(rng.pick(ints)) }
    static func double(_ rng: inout SplitMix64) -> Value { .double(rng.pick(doubles)) }
    static func string(_ rng: inout SplitMix64) -> Value { .string(rng.pick(strings)) }
    static func bytesValue(_ rng: inout SplitMix64) -> Value { .bytes(rng.pick(bytes)) }
    static func date(_ rng: inout SplitMix64) -> Value { .date(Timestamp(millisecondsSince1970: rng.pick(dates))) }

    /// `count` records with unique ids `<prefix>-<index>`.
    static func records(seed: UInt64, count: Int, startIndex: Int = 0) -> [Record] {
        var rng = SplitMix64(seed: seed)
        return (startIndex..<(startIndex + count)).map { index in
            record(id: "\(rng.pick(idPrefixes))-\(index)", &rng)
        }
    }

    static func record(id: String, _ rng: inout SplitMix64) -> Record {
        var fields: [String: Value] = [:]
        func maybe(_ name: String, _ make: (inout SplitMix64) -> Value) {
            if rng.chance(80) { fields[name] = make(&rng) }
        }
        maybe("flag") { .bool($0.chance(50)) }
        maybe("n", int)
        maybe("x") { rng in rng.chance(15) ? .double(Double(rng.pick(ints.filter { $0 > -100 && $0 < 100 }))) : double(&rng) }
        maybe("s", string)
        maybe("b", bytesValue)
        maybe("t", date)
        if rng.chance(30) { fields["o"] = .object(["k": int(&rng), "s": string(&rng)]) }
        if rng.chance(30) { fields["a"] = .array([int(&rng), string(&rng)]) }
        if rng.chance(40) { fields["y"] = rng.pick(mixed) }
        if rng.chance(70) { fields["u"] = rng.pick(mixed) }
        if rng.chance(50) { fields["tag"] = string(&rng) }
        let version = rng.pick(versions)
        let updatedAt: Timestamp? = rng.chance(70) ? Timestamp(millisecondsSince1970: rng.pick(dates)) : nil
        return Record(id: id, fields: fields, version: version, updatedAt: updatedAt, deleted: rng.chance(20))
    }

    /// The hand-written table: every operator and the tricky corners of the semantics.
    static func handWritten(existingId: String) -> [Query] {
        let n = Field("n"), x = Field("x"), s = Field("s"), flag = Field("flag"), b = Field("b"), t = Field("t")
        let u = Field("u"), tag = Field("tag"), id = Field(SystemField.id), version = Field(SystemField.version)
        let updatedAt = Field(SystemField.updatedAt), deleted = Field(SystemField.deleted)
        func date(_ ms: Int64) -> Value { .date(Timestamp(millisecondsSince1970: ms)) }
        let predicates: [QueryPredicate] = [
            .all,
            // Integers, including double literals and values beyond Int64.
            n == 3, n != 3, n < 0, n <= 0, n > 2, n >= 2, n == -5, n < -1000,
            n == 2.0, n < 2.5, n > -0.5, n >= 9.3e18, n <= -9.3e18, n > .double(.infinity), n < .double(.infinity),
            n > .double(-.infinity), n == .int(.max), n >= .int(.max), n > 9.223372036854775807e18, n < -9.223372036854775808e18,
            n <= -9.223372036854775808e18, n == 9_007_199_254_740_992.0, n == 9_007_199_254_740_993,
            // Doubles, including integer literals, signed zeros and infinities.
            x == 2, x == 0, x == -0.0, x != 0, x > 1e10, x < .double(-.infinity), x >= .double(-.infinity), x == .double(.infinity),
            x < 0, x <= -1, x > .int(.max), x == 9_007_199_254_740_993, x > 0.0, x >= .double(.leastNonzeroMagnitude),
            // Strings: byte order, case, normalisation, NUL, LIKE wildcards as plain characters.
            s == "\u{E9}", s == "e\u{301}", s == "e", s < "b", s >= "日", s > "Zebra", s > "zebra", s == "", s != "", s < "",
            s == "a\u{0}b", s > "a", s <= "a b", s == "%", s == "_",
            // Booleans, bytes and dates.
            flag == true, flag == false, flag != true, flag < true, flag >= false,
            b == .bytes([0]), b < .bytes([1]), b > .bytes([]), b == .bytes([]), b >= .bytes([0x80]), b < .bytes([0, 0]),
            t < date(0), t >= date(1_700_000_000_000), t == date(.min), t > date(-1), t != date(0),
            // isIn, with and without null literals, empty, mixed kinds.
            n.isIn([1, 2, 3]), n.isIn([1, nil]), n.isIn([]), n.isIn([2.0, 3.5]), n.isIn([nil]), s.isIn(["a", "\u{E9}", ""]),
            x.isIn([0, 2, 2.5]), flag.isIn([true]), b.isIn([.bytes([]), .bytes([0])]), t.isIn([date(0), date(1)]),
            .not(n.isIn([1, nil])), .not(n.isIn([1, 2])), .not(n.isIn([])), u.isIn([2, "a"]), id.isIn([.string(existingId), "nope"]),
            // isNull on declared, undeclared, non-scalar, never-written and system fields.
            n.isNull, !n.isNull, u.isNull, Field("nosuch").isNull, !Field("nosuch").isNull, Field("o").isNull, !Field("a").isNull,
            version.isNull, updatedAt.isNull, !updatedAt.isNull, deleted.isNull,
            // Substrings: non-ASCII, combining marks alone, empty needle, wildcards, case.
            s.contains("b"), s.contains("\u{E9}"), s.contains("\u{301}"), s.contains(""), s.contains("日本"), s.contains("%"),
            s.contains("_"), s.contains("A"), s.contains("a\u{0}"), s.contains("😀"), s.contains("abc"), s.contains("zebra"),
            s.hasPrefix("a"), s.hasPrefix(""), s.hasPrefix("日"), s.hasPrefix("%"), s.hasPrefix("e"), s.hasPrefix("😀"),
            s.hasPrefix("ab"), s.hasPrefix("a%"), s.hasPrefix("x_"), s.hasPrefix("A"),
            s.hasSuffix("b"), s.hasSuffix(""), s.hasSuffix("語"), s.hasSuffix("%"), s.hasSuffix("\u{301}"), s.hasSuffix("e"),
            s.hasSuffix("😀"), s.hasSuffix("bc"), s.hasSuffix("abc"), s.hasSuffix("xabc"), s.hasSuffix("_y"), s.hasSuffix("\u{0}b"),
            s.hasSuffix("B"), s.hasSuffix("本語"),
            !s.contains("a"), !s.hasPrefix(""), !s.hasSuffix(""), !s.hasSuffix("a"),
            // Undeclared fields of mixed kinds.
            u == 2, u > 1, u == "a", u < "b", u != 2, u >= 2.5, u == true, u == .bytes([1]), u < date(1), u == -0.0,
            u.contains("a"), u.hasPrefix("2"), u.hasSuffix("a"), tag.contains("a"), tag.hasPrefix(""), tag.hasSuffix("a"), tag.hasSuffix(""), tag == "", tag > "a", !tag.contains("a"),
            Field("nosuch") == 1, Field("nosuch") != 1, Field("y").isNull,
            // Null literals and three-valued logic.
            n == nil, n != nil, !(n == nil), !(n > 2), !(n != 3), .or([n > 2, n.isNull]), .and([]), .or([]),
            .not(.and([])), .not(.or([])), !(n > 2 && s == "a"), !(n > 2 || x < 0), .or([!(n > 0), s.isNull]),
            .and([n > 0, .or([s.hasPrefix("a"), .not(x < 1)]), .not(.and([flag == true, t > date(0)]))]),
            .not(.not(n > 0)), .or([n == nil, x == nil]), .not(.or([n == 1, .and([s == "a", u == 2])])),
            .and([n >= -2, n <= 2, .not(n.isIn([0]))]), .or([.and([]), n == nil]), .and([.or([]), n.isNull]),
            // System fields.
            id == .string(existingId), id < "b", id >= "日", id.hasPrefix("\u{E9}"), id.hasPrefix("e"), id.contains("-1"), id.hasSuffix("-1"), id.hasSuffix("0"),
            id != .string(existingId), version == "v1", version > "v1", version == "", version < "v2", version != "V1",
            version.hasPrefix("v"), version.hasSuffix("1"), updatedAt > date(0), updatedAt <= date(1), deleted == true, deleted != true, deleted == false,
            .and([deleted == false, n > 0]),
        ]
        var queries = predicates.map { Query($0) }
        let orders: [[SortKey]] = [
            [SortKey("n")], [SortKey("n", ascending: false)], [SortKey("x"), SortKey("s", ascending: false)], [SortKey("s")],
            [SortKey("flag", ascending: false), SortKey("n"), SortKey("x", ascending: false)], [SortKey("b")],
            [SortKey("t", ascending: false)], [SortKey("u")], [SortKey("u", ascending: false)], [SortKey("tag")],
            [SortKey("id", ascending: false)], [SortKey("updatedAt"), SortKey("version", ascending: false)],
            [SortKey("deleted"), SortKey("n")], [SortKey("version")], [SortKey("nosuch")], [SortKey("s"), SortKey("n")],
            [SortKey("x", ascending: false), SortKey("n", ascending: false), SortKey("s"), SortKey("b"), SortKey("t")],
            // A key on the id ends the order (ids are unique; a SQL store stops its ORDER BY there).
            [SortKey("n", ascending: false), SortKey("id", ascending: false)],
            [SortKey("flag"), SortKey("id", ascending: false), SortKey("n"), SortKey("s", ascending: false)],
        ]
        queries += orders.map { Query(.all, order: $0) }
        queries += orders.map { Query(n > -2 || s.hasPrefix("a"), order: $0, limit: 17, offset: 4) }
        queries += [
            Query(.all, limit: 0), Query(.all, limit: 1), Query(.all, limit: 10, offset: 5), Query(.all, offset: 299),
            Query(.all, offset: 300), Query(.all, offset: 1000), Query(.all, limit: 1000), Query(.all, limit: 10, offset: 295),
            Query(.all, order: [SortKey("n", ascending: false)], limit: 7, offset: 3), Query(n > 0, limit: 0, offset: 10),
            Query(s.contains("a"), order: [SortKey("s")], limit: 3), Query(.all, limit: 0, offset: 1000),
            Query(n == 3, offset: 1), Query(.all, order: [SortKey("u")], limit: 5, offset: 100),
            Query(n.isNull, order: [SortKey("x")], limit: Int.max), Query(.all, limit: Int.max, offset: 2),
        ]
        return queries
    }

    /// Random, type-correct queries over the fixture schema.
    static func randomQueries(seed: UInt64, count: Int, ids: [String]) -> [Query] {
        var rng = SplitMix64(seed: seed)
        let orderable = ["flag", "n", "x", "s", "b", "t", "u", "tag", "id", "version", "updatedAt", "deleted"]
        return (0..<count).map { _ in
            let predicate = randomPredicate(depth: 3, ids: ids, &rng)
            var order: [SortKey] = []
            for _ in 0..<rng.below(4) { order.append(SortKey(rng.pick(orderable), ascending: rng.chance(50))) }
            let limit: Int? = rng.chance(50) ? nil : rng.below(41)
            let offset = rng.chance(60) ? 0 : rng.below(321)
            return Query(predicate, order: order, limit: limit, offset: offset)
        }
    }

    static func randomPredicate(depth: Int, ids: [String], _ rng: inout SplitMix64) -> QueryPredicate {
        if depth == 0 || rng.chance(40) { return randomLeaf(ids: ids, &rng) }
        switch rng.below(3) {
        case 0: return .and((0..<rng.below(4)).map { _ in randomPredicate(depth: depth - 1, ids: ids, &rng) })
        case 1: return .or((0..<rng.below(4)).map { _ in randomPredicate(depth: depth - 1, ids: ids, &rng) })
        default: return .not(randomPredicate(depth: depth - 1, ids: ids, &rng))
        }
    }

    static func randomLeaf(ids: [String], _ rng: inout SplitMix64) -> QueryPredicate {
        let fields = ["flag", "n", "x", "s", "b", "t", "u", "tag", "id", "version", "updatedAt", "deleted"]
        let field = rng.pick(fields)
        let stringLike = ["s", "tag", "id", "version", "u"].contains(field)
        let roll = rng.below(100)
        if roll < 8 { return .isNull(field) }
        if stringLike && roll < 22 {
            let needle = rng.chance(20) ? String(rng.pick(strings).unicodeScalars.prefix(1)) : rng.pick(strings)
            switch rng.below(3) {
            case 0: return .contains(field, needle)
            case 1: return .hasPrefix(field, needle)
            default: return .hasSuffix(field, needle)
            }
        }
        if roll < 34 {
            return .isIn(field, (0..<rng.below(4)).map { _ in randomLiteral(field, ids: ids, &rng) })
        }
        return .compare(field, rng.pick(ComparisonOperator.allCases), randomLiteral(field, ids: ids, &rng))
    }

    static func randomLiteral(_ field: String, ids: [String], _ rng: inout SplitMix64) -> Value {
        if rng.chance(5) { return .null }
        switch field {
        case "flag", "deleted": return .bool(rng.chance(50))
        case "n": return rng.chance(75) ? int(&rng) : double(&rng)
        case "x": return rng.chance(75) ? double(&rng) : int(&rng)
        case "s", "tag": return string(&rng)
        case "b": return bytesValue(&rng)
        case "t", "updatedAt": return date(&rng)
        case "id": return rng.chance(60) ? .string(rng.pick(ids)) : string(&rng)
        case "version": return .string(rng.pick(versions) ?? "v1")
        default: return rng.pick(mixed)
        }
    }

    /// Queries every store must refuse with ``SyncError/Code/invalidQuery``, and whether the
    /// predicate alone (for `count`) is invalid too.
    static let invalid: [(query: Query, predicateInvalid: Bool)] = {
        let n = Field("n")
        let predicates: [QueryPredicate] = [
            n == "3", n.isIn(["3"]), n.isIn([1, "3"]), n.contains("3"), n.hasPrefix("3"), n.hasSuffix("3"), Field("x") == "1",
            Field("flag") == 1, Field("b").hasSuffix(""), Field(SystemField.deleted).hasSuffix("e"),
            Field("s") == 1, Field("s").isIn([.bytes([1])]), Field("t") == 0, Field("b") == "x", Field("o") == [:], Field("a") == [1],
            Field("y") == 1, Field("o").contains("k"), Field("x") == .double(.nan), Field("u") == .double(.nan),
            Field("u").isIn([1, .double(.nan)]), Field("") == 1, Field("a\u{0}") == 1, Field("a\nb").isNull, Field("ID") == "x",
            Field("Version").isNull, Field(String(repeating: "f", count: 129)) == 1, .and([.all, .not(n == "x")]),
            .or([Field("s").contains("a"), Field("flag").contains("t")]), Field(SystemField.id) == 1, Field(SystemField.deleted) == 1,
            Field(SystemField.updatedAt) == "x", Field(SystemField.updatedAt).hasPrefix("1"),
            Field(SystemField.updatedAt).hasSuffix("1"), Field(SystemField.version) == 1,
            .not(.not(.not(Field("t") == "2024"))),
        ]
        var all = predicates.map { (Query($0), true) }
        all += [
            (Query(.all, limit: -1), false), (Query(.all, offset: -1), false), (Query(n > 0, limit: -5, offset: 2), false),
            (Query(.all, order: [SortKey("o")]), false), (Query(.all, order: [SortKey("a", ascending: false)]), false),
            (Query(.all, order: [SortKey("y")]), false), (Query(.all, order: [SortKey("n"), SortKey("o")]), false),
            (Query(.all, order: [SortKey("")]), false), (Query(.all, order: [SortKey("Deleted")]), false),
        ]
        return all
    }()
}

/// Compares a store's query results with ``QueryEvaluator`` on the same records.
enum Differential {
    static func check(_ store: any LocalStore, table: String, records: [Record], queries: [Query], label: String,
                      file: String = #fileID, line: Int = #line) async throws {
        var mismatches: [String] = []
        for (index, query) in queries.enumerated() {
            let expected = QueryEvaluator.apply(query, to: records)
            let expectedCount = QueryEvaluator.count(query.predicate, in: records)
            let heading = "\(label) #\(index) `\(Render.query(query))`"
            do {
                let (actual, count) = try await store.read { tx in
                    (try tx.records(in: table, matching: query), try tx.count(in: table, matching: query.predicate))
                }
                if let difference = Render.difference(expected, actual) {
                    mismatches.append("\(heading): \(difference)")
                } else if count != expectedCount {
                    mismatches.append("\(heading): count(in:matching:) expected \(expectedCount), got \(count)")
                }
            } catch {
                mismatches.append("\(heading): threw \(describe(error))")
            }
        }
        if !mismatches.isEmpty {
            let shown = mismatches.prefix(5).joined(separator: "\n    ")
            let more = mismatches.count > 5 ? "\n    … and \(mismatches.count - 5) more" : ""
            throw ConformanceFailure("\(mismatches.count) of \(queries.count) queries differ from QueryEvaluator:\n    \(shown)\(more)",
                                     file: file, line: line)
        }
    }

    /// Defines the fixture table and writes the records in batches of 100 transactions.
    static func load(_ store: any LocalStore, _ records: [Record], file: String = #fileID, line: Int = #line) async throws {
        try await must(await store.defineTable(QueryFixtures.schema), "defining the query table", file: file, line: line)
        for start in stride(from: 0, to: records.count, by: 100) {
            let batch = Array(records[start..<min(start + 100, records.count)])
            try await must(await store.write { tx in
                for record in batch { try tx.upsert(record, in: QueryFixtures.table) }
            }, "writing records \(start)…", file: file, line: line)
        }
        let all = try await must(await store.read { tx in try tx.records(in: QueryFixtures.table, matching: .all) },
                                 "reading all records", file: file, line: line)
        try expectRecords(all, records.sorted { Value.utf8Less($0.id, $1.id) }, "the loaded query data", file: file, line: line)
    }
}
