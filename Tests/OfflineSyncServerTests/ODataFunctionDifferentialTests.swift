import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncOData
import OfflineSyncPostgreSQL
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// Every OData function the Datasync clients' LINQ translation writes (CommunityToolkit
/// Query/Linq/LookupTables.cs `MethodNames` and `InstanceProperties`; arithmetic and `in`
/// from Query/OData/ODataExpressionVisitor.cs), run by real stores and compared with the
/// reference evaluator on the same rows.
@Suite("OData functions: SQLite, PostgreSQL and LMDB stores answer as the reference evaluator")
struct ODataFunctionDifferentialTests {
    static let schema = TableSchema("items", fields: [
        FieldDefinition("title", .string), FieldDefinition("n", .int), FieldDefinition("x", .double),
        FieldDefinition("d", .date), FieldDefinition("other", .string),
    ])

    static func date(_ text: String) -> Value { .date(WireDate.parseISO8601(text)!) }

    /// Rows with the edges: nulls, empty and non-ASCII strings, spaces, negative and extreme
    /// numbers, halves, dates before 1970 and far from it.
    static let records: [Record] = [
        Record(id: "a", fields: ["title": "Milk", "n": 3, "x": 2.5, "d": date("2024-08-23T20:22:54.291Z"), "other": "milk"]),
        Record(id: "b", fields: ["title": "  bread  ", "n": -7, "x": -2.5, "d": date("1969-12-31T23:59:59.999Z"), "other": "x"]),
        Record(id: "c", fields: ["title": "ÉCLAIR café", "n": 0, "x": 0.0, "d": date("2000-02-29T12:00:00Z"), "other": "éclair café"]),
        Record(id: "d", fields: ["title": "", "n": .int(Int64.max), "x": 1e300, "d": date("0001-01-01T00:00:00Z")]),
        Record(id: "e", fields: ["title": .null, "n": .null, "x": .null, "d": .null, "other": "milk"]),
        Record(id: "f", fields: ["title": "apple pie", "n": 10, "x": 3.5, "d": date("9999-12-31T23:59:59Z"), "other": "apple"]),
        Record(id: "g", fields: ["title": "Pie", "n": .int(Int64.min), "x": -0.5, "d": date("2024-01-01T00:00:00Z"), "other": "pie"]),
    ]

    /// Each filter, with the ids the evaluator must give (so a filter that matches nothing by
    /// mistake is caught, not just one that differs between stores).
    static let cases: [(filter: String, ids: [String])] = [
        ("tolower(title) eq 'milk'", ["a"]),
        ("toupper(title) eq 'PIE'", ["g"]),
        ("tolower(title) eq 'Éclair café'", ["c"]),
        ("tolower(title) eq other", ["a", "g"]),
        ("tolower(title) ne 'milk'", ["b", "c", "d", "e", "f", "g"]),
        ("trim(title) eq 'bread'", ["b"]),
        ("length(title) eq 0", ["d"]),
        ("length(title) gt 8", ["b", "c", "f"]),
        ("indexof(title, 'pie') eq 6", ["f"]),
        ("indexof(title, 'zzz') eq -1", ["a", "b", "c", "d", "f", "g"]),
        ("substring(title, 1) eq 'ilk'", ["a"]),
        ("substring(title, 1, 2) eq 'CL'", ["c"]),
        ("substring(title, 100) eq ''", ["a", "b", "c", "d", "f", "g"]),
        ("concat(title, other) eq 'Milkmilk'", ["a"]),
        ("concat(concat(title, ' '), other) eq 'Pie pie'", ["g"]),
        ("startswith(tolower(title), 'ap')", ["f"]),
        ("endswith(toupper(title), 'IE')", ["f", "g"]),
        ("contains(tolower(title), 'read')", ["b"]),
        ("year(d) eq 2024", ["a", "g"]),
        ("year(d) lt 1970", ["b", "d"]),
        ("month(d) eq 12", ["b", "f"]),
        ("day(d) eq 29", ["c"]),
        ("hour(d) eq 23", ["b", "f"]),
        ("minute(d) eq 22", ["a"]),
        ("second(d) eq 59", ["b", "f"]),
        ("year(updatedAt) ge 2000", ["a", "b", "c", "d", "e", "f", "g"]),
        ("title in ('Milk', 'Pie')", ["a", "g"]),
        ("title in ('Milk', null)", ["a", "e"]),
        ("not (title in ('Milk', 'Pie'))", ["b", "c", "d", "e", "f"]),
        ("tolower(title) in ('milk', 'pie')", ["a", "g"]),
        ("n add 1 eq 4", ["a"]),
        ("(n add 1) gt 5", ["f"]),
        ("n add 1 lt 0", ["b", "g"]),
        ("n sub 2 eq 8", ["f"]),
        ("n mul 2 eq -14", ["b"]),
        ("n div 2 eq -3", ["b"]),
        ("n mod 3 eq -1", ["b"]),
        ("n mod 0 eq 0", []),
        ("n div 0 ne 1", ["a", "b", "c", "d", "e", "f", "g"]),
        ("x add 0.5 eq 3.0", ["a"]),
        ("x mul 1e10 gt 1", ["a", "f"]),
        ("x div 2 eq 1.25", ["a"]),
        ("floor(x) eq 2", ["a"]),
        ("floor(x) eq -3", ["b"]),
        ("ceiling(x) eq 3", ["a"]),
        ("ceiling(x) eq -0.0", ["c", "g"]),
        ("round(x) eq 3", ["a"]),
        ("round(x) eq -3", ["b"]),
        ("round(x) eq 4", ["f"]),
        ("round(x) eq -1", ["g"]),
        ("round(n) eq 3", ["a"]),
        ("n add x gt 5", ["a", "d", "f"]),
        ("n eq n", ["a", "b", "c", "d", "e", "f", "g"]),
        ("title eq other", []),
        ("title ne other", ["a", "b", "c", "d", "e", "f", "g"]),
        ("not (length(title) gt 3)", ["d", "e", "g"]),
        ("length(title) add n gt 10", ["c", "d", "f"]),
    ]

    /// Strings holding U+0000, which SQLite's `length()` and `substr()` stop at and
    /// PostgreSQL's `text` cannot hold: the SQL stores must still answer as the evaluator.
    static let textSchema = TableSchema("texts", fields: [FieldDefinition("title", .string)])
    static let texts: [Record] = [
        Record(id: "p", fields: ["title": "a\u{0}bc"]), Record(id: "q", fields: ["title": "\u{0}"]),
        Record(id: "r", fields: ["title": "abc"]), Record(id: "s", fields: ["title": "Ab\u{0}C"]),
    ]
    static let textCases: [(filter: String, ids: [String])] = [
        ("length(title) eq 4", ["p", "s"]),
        ("length(title) eq 1", ["q"]),
        ("substring(title, 2) eq 'bc'", ["p"]),
        ("indexof(title, 'c') eq 3", ["p"]),
        ("toupper(title) eq 'ABC'", ["r"]),
        ("concat(title, 'x') ne 'abcx'", ["p", "q", "s"]),
        ("trim(title) eq title", ["p", "q", "r", "s"]),
        ("startswith(tolower(title), 'ab')", ["r", "s"]),
    ]

    /// Numbers at the edges of the SQL functions: halves SQLite's `round()` gets wrong,
    /// integers past 2⁵² held in doubles, integer overflow, float overflow and underflow.
    static let numberSchema = TableSchema("numbers", fields: [FieldDefinition("x", .double), FieldDefinition("n", .int)])
    static let numbers: [Record] = [
        Record(id: "r1", fields: ["x": 0.49999999999999994, "n": .int(Int64.max)]),
        Record(id: "r2", fields: ["x": -0.49999999999999994, "n": .int(Int64.min)]),
        Record(id: "r3", fields: ["x": 4_503_599_627_370_497.0, "n": -1]),
        Record(id: "r4", fields: ["x": 2.5, "n": 7]),
        Record(id: "r5", fields: ["x": -2.5, "n": .null]),
        Record(id: "r6", fields: ["x": 1e308, "n": 0]),
        Record(id: "r7", fields: ["x": 1e-300, "n": 5]),
        Record(id: "r8", fields: ["x": .null, "n": 3]),
    ]
    static let numberCases: [(filter: String, ids: [String])] = [
        ("round(x) eq 0", ["r1", "r2", "r7"]),
        ("round(x) eq 4503599627370497", ["r3"]),
        ("round(x) eq -3", ["r5"]),
        ("floor(x) eq -1", ["r2"]),
        ("ceiling(x) eq 1", ["r1", "r7"]),
        ("x mul 10 eq null", ["r6", "r8"]),
        ("x mod 2 eq 0.5", ["r4"]),
        ("x mod 0 eq null", ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"]),
        ("x mul 1e-300 eq 0", ["r7"]),
        ("n add 1 eq null", ["r1", "r5"]),
        ("n sub 1 eq null", ["r2", "r5"]),
        ("n div -1 eq null", ["r2", "r5"]),
        ("n mod -1 eq 0", ["r1", "r2", "r3", "r4", "r6", "r7", "r8"]),
        ("n mul n gt 0", ["r3", "r4", "r7", "r8"]),
    ]

    func check(_ store: any LocalStore) async throws {
        try await check(store, Self.schema, Self.records, Self.cases)
        try await check(store, Self.textSchema, Self.texts, Self.textCases)
        try await check(store, Self.numberSchema, Self.numbers, Self.numberCases)
    }

    private func check(_ store: any LocalStore, _ schema: TableSchema, _ records: [Record],
                       _ cases: [(filter: String, ids: [String])]) async throws {
        let table = schema.name
        try await store.defineTable(schema)
        try await store.write { txn in
            for (i, record) in records.enumerated() {
                var stamped = record
                stamped.updatedAt = Timestamp(millisecondsSince1970: 1_700_000_000_000 + Int64(i))
                try txn.upsert(stamped, in: table)
            }
        }
        let stored = try await store.read { txn in try txn.records(in: table, matching: Query.all) }
        for (filter, expected) in cases {
            let predicate = try ODataQuery.parseFilter(filter)
            let reference = QueryEvaluator.apply(Query(predicate), to: stored).map(\.id)
            #expect(reference == expected, "evaluator: \(filter)")
            let answered = try await store.read { txn in try txn.records(in: table, matching: Query(predicate)).map(\.id) }
            #expect(answered == reference, "store: \(filter)")
            // Ordered and limited, so the SQL stores' ORDER BY … LIMIT path runs too.
            let firstTwo = try await store.read { txn in
                try txn.records(in: table, matching: Query(predicate, order: [SortKey(SystemField.id, ascending: false)], limit: 2)).map(\.id)
            }
            #expect(firstTwo == Array(reference.reversed().prefix(2)), "ordered: \(filter)")
            let counted = try await store.read { txn in try txn.count(in: table, matching: predicate) }
            #expect(counted == reference.count, "count: \(filter)")
        }
    }

    @Test("SQLite store")
    func sqlite() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("s.sqlite").path)
            try await check(store)
            try await store.close()
        }
    }

    @Test("LMDB store")
    func lmdb() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await LMDBStore(directory: directory.appendingPathComponent("env"))
            try await check(store)
            try await store.close()
        }
    }

    @Test("PostgreSQL store", .enabled(if: TestPostgres.shouldRun, "OFFLINE_SYNC_TEST_POSTGRES_URL is not set: run with Scripts/with-postgres.sh"))
    func postgres() async throws {
        guard let url = TestPostgres.url else { Issue.record("OFFLINE_SYNC_TEST_POSTGRES_URL is not set but CI is"); return }
        let schema = "osync_test_\(TestPostgres.run)_fn_" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let store = try await PostgreSQLStore(connectionString: url, options: .init(poolSize: 1, schema: schema))
        try await check(store)
        try await store.close()
    }
}
