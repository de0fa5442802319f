import OfflineSync
@testable import OfflineSyncPostgreSQL
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Which computed-value conjuncts PostgreSQL evaluates in SQL. The results are checked
/// against the evaluator on a live server by `ODataFunctionDifferentialTests` (server tests);
/// this suite makes sure those answers come from SQL where the dialect claims they do.
@Suite("PostgreSQL translates computed values to SQL")
struct ExpressionTranslationTests {
    typealias Route = ComputedValues.Route
    static func call(_ f: QueryFunction, _ args: QueryExpression...) -> QueryExpression { .call(f, args) }
    static func eq(_ l: QueryExpression, _ r: Value) -> QueryPredicate { ComputedValues.eq(l, r) }

    static let cases: [(QueryPredicate, Route)] = [
        // Strings read from a column may hold U+0000, which text cannot: SQL pre-filters.
        (eq(call(.lowercased, .field("title")), "milk"), .prefilter),
        (eq(call(.length, .field("title")), 4), .prefilter),
        (eq(call(.substring, .field("title"), .literal(1), .literal(2)), "il"), .prefilter),
        (.compareExpressions(call(.concat, .literal("a"), .literal("b")), .equal, .literal("ab")), .sql),
        (eq(call(.year, .field("d")), 2024), .sql),
        (eq(call(.hour, .field(SystemField.updatedAt)), 11), .sql),
        (eq(call(.add, .field("n"), .literal(1)), 4), .sql),
        (eq(call(.divide, .field("n"), .literal(2)), 4), .sql),
        (eq(call(.modulo, .field("n"), .literal(3)), 1), .sql),
        (eq(call(.round, .field("x")), 3.0), .sql),
        (eq(call(.floor, .field("x")), 2.0), .sql),
        (eq(call(.ceiling, .field("n")), 2), .sql),
        (.isNullExpression(call(.multiply, .field("n"), .literal(2))), .sql),
        // Double arithmetic raises errors on overflow and underflow in PostgreSQL; bigint
        // against float8 compares rounded: both left to the evaluator.
        (eq(call(.multiply, .field("x"), .literal(2.0)), 5.0), .evaluator),
        (eq(call(.round, .field("x")), 3), .evaluator),
        (eq(call(.lowercased, .field("meta")), "x"), .evaluator),
    ]

    @Test("each function runs in SQL", arguments: 0..<cases.count)
    func route(_ index: Int) {
        let (predicate, route) = Self.cases[index]
        var translator = SQLPredicateTranslator<PGDialect>(table: PGTable(number: 1, schema: ComputedValues.schema, quotedSchema: "\"s\""),
                                                          textFunctions: true)
        let (sql, rest) = translator.split(predicate)
        #expect(ComputedValues.route(of: predicate, sql: sql, rest: rest) == route, "\(predicate)")
    }

    @Test("a database that is not UTF-8 leaves string functions to the evaluator")
    func notUTF8() {
        var translator = SQLPredicateTranslator<PGDialect>(table: PGTable(number: 1, schema: ComputedValues.schema, quotedSchema: "\"s\""),
                                                          textFunctions: false)
        let predicate = Self.eq(Self.call(.lowercased, .field("title")), "milk")
        let (sql, rest) = translator.split(predicate)
        #expect(ComputedValues.route(of: predicate, sql: sql, rest: rest) == .evaluator)
    }
}
