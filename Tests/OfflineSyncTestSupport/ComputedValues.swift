import OfflineSync

/// Shared by the SQL adapters' tests of which computed-value conjuncts their SQL evaluates.
public enum ComputedValues {
    /// A table with a field of each kind the functions take, and one SQL cannot see (`meta`).
    public static let schema = TableSchema("items", fields: [
        FieldDefinition("title", .string), FieldDefinition("n", .int), FieldDefinition("x", .double),
        FieldDefinition("d", .date), FieldDefinition("meta", .any),
    ])

    /// Where a conjunct is decided.
    public enum Route: Sendable, Equatable {
        /// Wholly in SQL.
        case sql
        /// SQL filters, letting doubtful rows through, and the evaluator re-checks.
        case prefilter
        /// Only by the evaluator.
        case evaluator
    }

    /// `function(arguments…)`.
    public static func call(_ function: QueryFunction, _ arguments: QueryExpression...) -> QueryExpression {
        .call(function, arguments)
    }

    /// `expression == literal`.
    public static func eq(_ expression: QueryExpression, _ literal: Value) -> QueryPredicate {
        .compareExpressions(expression, .equal, .literal(literal))
    }

    /// The route a translator's split took for `predicate`.
    public static func route(of predicate: QueryPredicate, sql: String?, rest: [QueryPredicate]) -> Route? {
        switch (sql, rest) {
        case (_?, []): return .sql
        case (_?, [predicate]): return .prefilter
        case (nil, [predicate]): return .evaluator
        default: return nil
        }
    }
}
