import OfflineSync
import OfflineSyncStoreKit

/// A query whose SQL does not depend on its literal values, keyed by everything its SQL does
/// depend on, so a connection translates each such shape once and later queries of the same
/// shape only bind their values. The queue's lookups are this kind — "the newest operation on
/// this item" runs on every local write — and translating one (building the SQL text, then
/// hashing it to find the prepared statement) was 7% of local-writes-sqlite in `perf`.
///
/// The shapes are conjunctions of comparisons of a declared string or integer column with a
/// literal of the same kind (``SQLPredicateTranslator`` writes `(column op ?n)` for those,
/// whatever the value: the integer/double and null cases, which plan by value, are excluded),
/// ordered by scalar columns, with or without a limit. Anything else is translated per query.
struct SQLiteQueryShape: Hashable {
    /// The table's mapping, by identity: a changed schema is a new mapping, so a new shape.
    let table: ObjectIdentifier
    /// Field names byte for byte (canonically equal names may be different columns) and the
    /// operator of each comparison, in the predicate's order.
    let terms: [Term]
    let order: [Order]

    struct Term: Hashable {
        let field: ExactString
        let op: ComparisonOperator
    }

    struct Order: Hashable {
        let field: ExactString
        let ascending: Bool
    }

    /// The shape of `query` over `table` and the values its comparisons bind, in placeholder
    /// order; `nil` when the query is not of a cacheable shape.
    static func of(_ query: Query, in table: SQLiteTable) -> (shape: SQLiteQueryShape, bindings: [SQLiteValue])? {
        var terms: [Term] = []
        var bindings: [SQLiteValue] = []
        for conjunct in query.predicate.conjuncts {
            switch conjunct {
            case .all:
                continue
            case let .compare(field, op, literal):
                guard let column = table.column(field) else { return nil }
                switch (column.type, literal) {
                case (.string, .string(let s)): bindings.append(.text(s))
                case (.int, .int(let i)): bindings.append(.int(i))
                default: return nil
                }
                terms.append(Term(field: ExactString(field), op: op))
            default:
                return nil
            }
        }
        var order: [Order] = []
        for key in query.order {
            guard let column = table.column(key.field), column.type.isScalar else { return nil }
            order.append(Order(field: ExactString(key.field), ascending: key.ascending))
        }
        return (SQLiteQueryShape(table: ObjectIdentifier(table), terms: terms, order: order), bindings)
    }

    /// Whether the translation bound exactly the shape's values, byte for byte and in order.
    static func same(_ shape: [SQLiteValue], _ translated: [SQLiteValue]) -> Bool {
        guard shape.count == translated.count else { return false }
        for (a, b) in zip(shape, translated) {
            switch (a, b) {
            case let (.int(x), .int(y)) where x == y: continue
            case let (.text(x), .text(y)) where x.utf8.elementsEqual(y.utf8): continue
            default: return false
            }
        }
        return true
    }
}
