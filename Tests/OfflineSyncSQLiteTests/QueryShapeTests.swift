import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A connection translates a query of a cacheable shape (comparisons of string and integer
/// columns with literals of their kind) once and binds later values into the same SQL. Every
/// value must still give exactly the evaluator's result, also after the table's schema
/// changes under the same shape.
@Suite("SQLiteStore: queries of one shape with other values")
struct QueryShapeTests {
    static let strings = ["a", "b", "", "é", "e\u{301}", "ab", "日本"]

    static func records() -> [Record] {
        (0..<120).map { i in
            var fields: [String: Value] = ["n": .int(Int64(i % 9)), "s": .string(strings[i % strings.count])]
            if i % 5 != 0 { fields["t"] = .string(strings[(i / 3) % strings.count]) }
            return Record(id: "r\(i)", fields: fields)
        }
    }

    /// Queries of three shapes, each with every value; the same shapes run twice.
    static func queries() -> [Query] {
        var queries: [Query] = []
        for value in strings {
            queries.append(Query(Field("s") == .string(value), order: [SortKey("n", ascending: false)], limit: 3))
            queries.append(Query(Field("t") != .string(value) && Field("n") >= 4, order: [SortKey("s")]))
        }
        for n in 0..<10 { queries.append(Query(Field("n") == .int(Int64(n)) && Field("s") > "a", offset: 1)) }
        return queries + queries
    }

    @Test("each value gives the evaluator's result, before and after the schema changes")
    func shapesWithValues() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(at: directory.appendingPathComponent("s.sqlite").path) { store in
                var schema = TableSchema("items", fields: [
                    FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string), FieldDefinition("t", .string),
                ])
                try await store.defineTable(schema)
                let records = Self.records()
                try await store.write { txn in for record in records { try txn.upsert(record, in: "items") } }
                for round in 0..<2 {
                    let queries = Self.queries()
                    let results = try await store.read { txn in try queries.map { try txn.records(in: "items", matching: $0) } }
                    for (query, result) in zip(queries, results) {
                        #expect(result == QueryEvaluator.apply(query, to: records), "round \(round): \(query.predicate)")
                    }
                    // A new declared field moves the columns: the same shapes must not reuse
                    // the old table's SQL.
                    schema = TableSchema("items", fields: [FieldDefinition("added\(round)", .int)] + schema.fields)
                    try await store.defineTable(schema)
                }
            }
        }
    }
}
