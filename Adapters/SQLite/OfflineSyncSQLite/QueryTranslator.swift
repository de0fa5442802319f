import OfflineSync

/// A piece of parameterised SQL: text with `?` placeholders and the values bound to them.
struct SQLFragment {
    var sql: String
    var bindings: [SQLValue]
}

/// Translates ``QueryPredicate``s and ordering keys into parameterised SQL whose three-valued result
/// equals ``QueryEvaluator`` exactly, for everything that names only system properties and
/// declared fields. Anything naming an undeclared field (kept in the `extra` blob) is left to
/// the evaluator.
///
/// Every SQL expression produced evaluates to 1 (true), 0 (false) or NULL (unknown), and
/// SQLite's AND / OR / NOT follow the same Kleene logic as the evaluator. Values are always
/// bound parameters, names always quoted.
struct QueryTranslator {
    let table: TableInfo

    /// Bound values above this many in one conjunct make it fall back to the evaluator
    /// (SQLite caps the number of parameters per statement).
    static let maxBindings = 10_000
    /// Predicate nesting deeper than this falls back to the evaluator (SQLite caps expression depth).
    static let maxDepth = 200

    /// The query split into the conjuncts SQL can evaluate (as one fragment, `nil` when none)
    /// and the rest, which the caller evaluates row by row.
    func split(_ predicate: QueryPredicate) -> (sql: SQLFragment?, rest: [QueryPredicate]) {
        var parts: [SQLFragment] = []
        var rest: [QueryPredicate] = []
        var bindingCount = 0
        for conjunct in Self.conjuncts(of: predicate) {
            if case .all = conjunct { continue }
            if let fragment = translate(conjunct, depth: 0),
               bindingCount + fragment.bindings.count <= Self.maxBindings {
                bindingCount += fragment.bindings.count
                parts.append(fragment)
            } else {
                rest.append(conjunct)
            }
        }
        guard !parts.isEmpty else { return (nil, rest) }
        let sql = parts.map(\.sql).joined(separator: " AND ")
        return (SQLFragment(sql: sql, bindings: parts.flatMap(\.bindings)), rest)
    }

    /// The top-level conjuncts: nested `and`s flattened (a row matches when all are true).
    static func conjuncts(of predicate: QueryPredicate) -> [QueryPredicate] {
        if case .and(let parts) = predicate { return parts.flatMap { conjuncts(of: $0) } }
        return [predicate]
    }

    /// `ORDER BY` for the keys then `id`, or `nil` when a key is an undeclared field.
    func orderBy(_ keys: [SortKey]) -> String? {
        var terms: [String] = []
        for key in keys {
            guard let column = table.column(key.field), column.type.isScalar else { return nil }
            // SQLite orders NULL first ascending and last descending, as the evaluator does.
            terms.append("\(column.sql) \(key.ascending ? "ASC" : "DESC")")
        }
        terms.append("\"id\" ASC")
        return "ORDER BY " + terms.joined(separator: ", ")
    }

    /// The SQL for a predicate, or `nil` when part of it needs the evaluator.
    func translate(_ predicate: QueryPredicate, depth: Int) -> SQLFragment? {
        guard depth <= Self.maxDepth else { return nil }
        switch predicate {
        case .all:
            return SQLFragment(sql: "1", bindings: [])
        case let .compare(field, op, literal):
            guard let column = table.column(field) else { return nil }
            return compare(column, op, literal)
        case let .isIn(field, literals):
            guard let column = table.column(field) else { return nil }
            return isIn(column, literals)
        case .isNull(let field):
            guard let column = table.column(field) else { return nil }
            return SQLFragment(sql: "(\(column.sql) IS NULL)", bindings: [])
        case let .contains(field, needle):
            guard let column = table.column(field), column.type == .string else { return nil }
            // instr over blobs: byte-exact and case-sensitive (LIKE would fold ASCII case).
            // An empty needle is found in every string (instr returns 1), as in the evaluator.
            return SQLFragment(sql: "(instr(CAST(\(column.sql) AS BLOB), ?) > 0)",
                               bindings: [.blob(Array(needle.utf8))])
        case let .hasPrefix(field, prefix):
            guard let column = table.column(field), column.type == .string else { return nil }
            // Over blobs, length() and substr() count bytes, so the prefix compares byte for
            // byte. substr() of a zero-length blob is NULL, hence the explicit length test
            // (a shorter string is false, not unknown) and the empty prefix as a constant.
            let bytes = Array(prefix.utf8)
            if bytes.isEmpty { return Self.trueUnlessNull(column) }
            let blob = "CAST(\(column.sql) AS BLOB)"
            return SQLFragment(
                sql: "(CASE WHEN \(column.sql) IS NULL THEN NULL WHEN length(\(blob)) < ? THEN 0 ELSE substr(\(blob), 1, ?) = ? END)",
                bindings: [.int(Int64(bytes.count)), .int(Int64(bytes.count)), .blob(bytes)])
        case .and(let parts):
            return combine(parts, with: "AND", empty: "1", depth: depth)
        case .or(let parts):
            return combine(parts, with: "OR", empty: "0", depth: depth)
        case .not(let inner):
            guard let fragment = translate(inner, depth: depth + 1) else { return nil }
            return SQLFragment(sql: "(NOT \(fragment.sql))", bindings: fragment.bindings)
        }
    }

    private func combine(_ parts: [QueryPredicate], with op: String, empty: String, depth: Int) -> SQLFragment? {
        if parts.isEmpty { return SQLFragment(sql: empty, bindings: []) }
        var sql: [String] = []
        var bindings: [SQLValue] = []
        for part in parts {
            guard let fragment = translate(part, depth: depth + 1) else { return nil }
            sql.append(fragment.sql)
            bindings += fragment.bindings
        }
        return SQLFragment(sql: "(" + sql.joined(separator: " \(op) ") + ")", bindings: bindings)
    }

    // MARK: Comparisons

    /// Always true for a non-null column, unknown for a null one.
    private static func trueUnlessNull(_ column: ColumnRef) -> SQLFragment {
        SQLFragment(sql: "(CASE WHEN \(column.sql) IS NULL THEN NULL ELSE 1 END)", bindings: [])
    }

    /// Always false for a non-null column, unknown for a null one.
    private static func falseUnlessNull(_ column: ColumnRef) -> SQLFragment {
        SQLFragment(sql: "(CASE WHEN \(column.sql) IS NULL THEN NULL ELSE 0 END)", bindings: [])
    }

    private static func sqlOperator(_ op: ComparisonOperator) -> String {
        switch op {
        case .equal: return "="
        case .notEqual: return "<>"
        case .less: return "<"
        case .lessOrEqual: return "<="
        case .greater: return ">"
        case .greaterOrEqual: return ">="
        }
    }

    private func compare(_ column: ColumnRef, _ op: ComparisonOperator, _ literal: Value) -> SQLFragment? {
        if literal.isNull {
            // A comparison with null is unknown for every row, as in SQL.
            return SQLFragment(sql: "NULL", bindings: [])
        }
        switch (column.type, literal) {
        case (.int, .double(let d)):
            // Exactly as the evaluator compares an integer with a double (no rounding).
            return Self.render(column, QueryEvaluator.planIntColumn(op, d), SQLValue.int)
        case (.double, .int(let i)):
            return Self.render(column, QueryEvaluator.planDoubleColumn(op, i), SQLValue.double)
        default:
            guard column.type.isScalar, column.type.accepts(literal), let bound = Self.bindable(literal) else {
                return nil
            }
            return SQLFragment(sql: "(\(column.sql) \(Self.sqlOperator(op)) ?)", bindings: [bound])
        }
    }

    /// Renders a ``NumericComparisonPlan`` for `column`.
    private static func render<L>(_ column: ColumnRef, _ plan: NumericComparisonPlan<L>, _ bind: (L) -> SQLValue) -> SQLFragment {
        switch plan {
        case .constant(let holds):
            return holds ? trueUnlessNull(column) : falseUnlessNull(column)
        case .compare(let op, let literal):
            return SQLFragment(sql: "(\(column.sql) \(sqlOperator(op)) ?)", bindings: [bind(literal)])
        }
    }

    /// `column IN (…)`: null literals kept as NULL (making a miss unknown), literals that can
    /// never equal a value of the column's type dropped, an empty list false (unknown on NULL).
    private func isIn(_ column: ColumnRef, _ literals: [Value]) -> SQLFragment? {
        var items: [String] = []
        var bindings: [SQLValue] = []
        for literal in literals {
            switch (column.type, literal) {
            case (_, .null):
                items.append("NULL")
            case (.int, .double(let d)):
                if let i = QueryEvaluator.exactInt(d) {
                    items.append("?")
                    bindings.append(.int(i))
                }
            case (.double, .int(let i)):
                if let d = QueryEvaluator.exactDouble(i) {
                    items.append("?")
                    bindings.append(.double(d))
                }
            default:
                guard column.type.isScalar, column.type.accepts(literal), let bound = Self.bindable(literal) else {
                    return nil
                }
                items.append("?")
                bindings.append(bound)
            }
        }
        if items.isEmpty { return Self.falseUnlessNull(column) }
        return SQLFragment(sql: "(\(column.sql) IN (\(items.joined(separator: ", "))))", bindings: bindings)
    }

    /// A scalar literal as stored in a column of its own type.
    private static func bindable(_ value: Value) -> SQLValue? {
        switch value {
        case .bool(let b): return .int(b ? 1 : 0)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .text(s)
        case .bytes(let b): return .blob(b)
        case .date(let t): return .int(t.millisecondsSince1970)
        case .null, .array, .object: return nil
        }
    }
}
