import OfflineSync
import OfflineSyncStoreKit

/// A piece of parameterised SQL: text with `?` placeholders and the values bound to them.
struct SQLiteFragment {
    var sql: String
    var bindings: [SQLiteValue]
}

/// Translates predicates and ordering for a SQLite table (see ``SQLPredicateTranslator``).
struct SQLiteQueryTranslator {
    let table: SQLiteTable

    /// Bound values above this many in one conjunct make it fall back to the evaluator
    /// (SQLite caps the number of parameters per statement).
    static let maxBindings = 10_000

    /// The query split into the conjuncts SQL can evaluate (as one fragment, `nil` when none)
    /// and the rest, which the caller evaluates row by row.
    func split(_ predicate: QueryPredicate) -> (sql: SQLiteFragment?, rest: [QueryPredicate]) {
        var translator = SQLPredicateTranslator(dialect: SQLiteDialect(table: table), maxParameters: Self.maxBindings)
        let (sql, rest) = translator.split(predicate)
        return (sql.map { SQLiteFragment(sql: $0, bindings: translator.parameters) }, rest)
    }

    /// `ORDER BY` for the keys then `id`, or `nil` when a key is an undeclared field.
    func orderBy(_ keys: [SortKey]) -> String? {
        SQLPredicateTranslator(dialect: SQLiteDialect(table: table), maxParameters: Self.maxBindings).orderBy(keys)
    }
}
