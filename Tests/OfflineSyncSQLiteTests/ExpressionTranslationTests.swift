import OfflineSync
@testable import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Which computed-value conjuncts SQLite evaluates in SQL. The results themselves are
/// checked against the evaluator by `ODataFunctionDifferentialTests` (server tests), which
/// run the same functions on real stores; this suite makes sure those answers come from SQL.
@Suite("SQLite translates computed values to SQL")
struct ExpressionTranslationTests {
    typealias Route = ComputedValues.Route
    static func call(_ f: QueryFunction, _ args: QueryExpression...) -> QueryExpression { .call(f, args) }
    static func eq(_ l: QueryExpression, _ r: Value) -> QueryPredicate { ComputedValues.eq(l, r) }

    static let cases: [(QueryPredicate, Route)] = [
        (eq(call(.lowercased, .field("title")), "milk"), .sql),
        (eq(call(.uppercased, .field("title")), "MILK"), .sql),
        (eq(call(.trimmed, .field("title")), "milk"), .sql),
        (eq(call(.indexOf, .field("title"), .literal("l")), 2), .sql),
        (eq(call(.concat, .field("title"), .literal("!")), "milk!"), .sql),
        (.compareExpressions(call(.lowercased, .field("title")), .equal, .field("title")), .sql),
        (eq(call(.year, .field("d")), 2024), .sql),
        (eq(call(.month, .field(SystemField.updatedAt)), 11), .sql),
        (eq(call(.second, .field("d")), 59), .sql),
        (eq(call(.add, .field("n"), .literal(1)), 4), .sql),
        (eq(call(.divide, .field("n"), .literal(2)), 4), .sql),
        (eq(call(.modulo, .field("n"), .literal(3)), 1), .sql),
        (eq(call(.multiply, .field("x"), .literal(2.0)), 5.0), .sql),
        (eq(call(.modulo, .field("x"), .literal(2)), 0.5), .sql),
        (eq(call(.round, .field("x")), 3.0), .sql),
        (eq(call(.floor, .field("x")), 2), .sql),
        (eq(call(.ceiling, .field("n")), 2), .sql),
        (.compareExpressions(call(.add, .field("n"), .field("x")), .greater, .literal(5)), .sql),
        (.isNullExpression(call(.add, .field("n"), .literal(1))), .sql),
        (.not(eq(call(.lowercased, .field("title")), "milk")), .sql),
        // length() and substr() stop at U+0000: SQL pre-filters, the evaluator decides.
        (eq(call(.length, .field("title")), 4), .prefilter),
        (eq(call(.substring, .field("title"), .literal(1), .literal(2)), "il"), .prefilter),
        // A field SQL cannot see, and a function of the wrong kind of argument.
        (eq(call(.lowercased, .field("meta")), "x"), .evaluator),
        (eq(call(.length, .field("n")), 1), .evaluator),
    ]

    @Test("each function runs in SQL", arguments: 0..<cases.count)
    func route(_ index: Int) {
        let (predicate, route) = Self.cases[index]
        let table = SQLiteTable(number: 1, schema: ComputedValues.schema, schemaBytes: ValueCodec.encode(ComputedValues.schema))
        let (sql, rest) = SQLiteQueryTranslator(table: table).split(predicate)
        #expect(ComputedValues.route(of: predicate, sql: sql?.sql, rest: rest) == route, "\(predicate)")
    }
}
