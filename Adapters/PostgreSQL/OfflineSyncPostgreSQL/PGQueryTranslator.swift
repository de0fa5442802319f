import OfflineSync

/// Translates ``QueryPredicate``s and ordering keys into parameterised PostgreSQL whose
/// three-valued result equals ``QueryEvaluator`` exactly, for everything that names only
/// system properties and declared scalar fields. Anything naming an undeclared field (kept
/// in the `extra` blob) is left to the evaluator.
///
/// Every expression produced is `boolean` (true, false or NULL for unknown), and
/// PostgreSQL's AND / OR / NOT follow the same Kleene logic as the evaluator. Strings and ids
/// are `bytea`, so comparisons and ordering are by UTF-8 bytes. Values are always bound
/// parameters (`$n`, numbered from ``parameters``), names always quoted.
struct PGQueryTranslator {
    let table: PGTable
    /// The parameters bound so far; new ones are numbered after them.
    private(set) var parameters: [PGParameter]

    /// Bound values above this many make a conjunct fall back to the evaluator (PostgreSQL
    /// takes at most 65,535 parameters per statement).
    static let maxParameters = 30_000
    /// Predicate nesting deeper than this falls back to the evaluator.
    static let maxDepth = 200

    init(table: PGTable, parameters: [PGParameter] = []) {
        self.table = table
        self.parameters = parameters
    }

    /// The query's top-level conjuncts split into those SQL evaluates (one `WHERE` body,
    /// `nil` when none) and the rest, which the caller evaluates row by row.
    mutating func split(_ predicate: QueryPredicate) -> (sql: String?, rest: [QueryPredicate]) {
        var parts: [String] = []
        var rest: [QueryPredicate] = []
        for conjunct in Self.conjuncts(of: predicate) {
            if case .all = conjunct { continue }
            let mark = parameters.count
            if let sql = translate(conjunct, depth: 0), parameters.count <= Self.maxParameters {
                parts.append(sql)
            } else {
                parameters.removeSubrange(mark...)
                rest.append(conjunct)
            }
        }
        return (parts.isEmpty ? nil : parts.joined(separator: " AND "), rest)
    }

    /// The top-level conjuncts: nested `and`s flattened.
    static func conjuncts(of predicate: QueryPredicate) -> [QueryPredicate] {
        if case .and(let parts) = predicate { return parts.flatMap { conjuncts(of: $0) } }
        return [predicate]
    }

    /// `ORDER BY` for the keys then `id`, or `nil` when a key is an undeclared field.
    /// Ascending puts nulls first and descending last, as the evaluator does.
    func orderBy(_ keys: [SortKey]) -> String? {
        var terms: [String] = []
        for key in keys {
            guard let column = table.column(key.field), column.type.isScalar else { return nil }
            terms.append("\(column.sql) \(key.ascending ? "ASC NULLS FIRST" : "DESC NULLS LAST")")
        }
        terms.append("\"id\" ASC")
        return "ORDER BY " + terms.joined(separator: ", ")
    }

    /// Binds a value and returns its placeholder.
    mutating func bind(_ value: PGParameter) -> String {
        parameters.append(value)
        return "$\(parameters.count)"
    }

    /// The SQL for a predicate, or `nil` when part of it needs the evaluator (parameters
    /// bound on the way are then left for the caller to drop).
    private mutating func translate(_ predicate: QueryPredicate, depth: Int) -> String? {
        guard depth <= Self.maxDepth else { return nil }
        switch predicate {
        case .all:
            return "TRUE"
        case let .compare(field, op, literal):
            guard let column = table.column(field) else { return nil }
            return compare(column, op, literal)
        case let .isIn(field, literals):
            guard let column = table.column(field) else { return nil }
            return isIn(column, literals)
        case .isNull(let field):
            guard let column = table.column(field) else { return nil }
            return "(\(column.sql) IS NULL)"
        case let .contains(field, needle):
            guard let column = table.column(field), column.type == .string else { return nil }
            // position() over bytea: byte-exact and case-sensitive; an empty needle is at 1.
            return "(position(\(bind(.bytes(Array(needle.utf8)))) in \(column.sql)) > 0)"
        case let .hasPrefix(field, prefix):
            guard let column = table.column(field), column.type == .string else { return nil }
            // A shorter string yields a shorter substring, so it is false, not unknown.
            let p = bind(.bytes(Array(prefix.utf8)))
            return "(substring(\(column.sql) from 1 for octet_length(\(p))) = \(p))"
        case .and(let parts):
            return combine(parts, with: "AND", empty: "TRUE", depth: depth)
        case .or(let parts):
            return combine(parts, with: "OR", empty: "FALSE", depth: depth)
        case .not(let inner):
            guard let sql = translate(inner, depth: depth + 1) else { return nil }
            return "(NOT \(sql))"
        }
    }

    private mutating func combine(_ parts: [QueryPredicate], with op: String, empty: String, depth: Int) -> String? {
        if parts.isEmpty { return empty }
        var sql: [String] = []
        for part in parts {
            guard let fragment = translate(part, depth: depth + 1) else { return nil }
            sql.append(fragment)
        }
        return "(" + sql.joined(separator: " \(op) ") + ")"
    }

    // MARK: Comparisons

    /// True for a non-null column, unknown for a null one.
    private static func trueUnlessNull(_ column: PGColumn) -> String {
        "(CASE WHEN \(column.sql) IS NULL THEN NULL::boolean ELSE TRUE END)"
    }

    /// False for a non-null column, unknown for a null one.
    private static func falseUnlessNull(_ column: PGColumn) -> String {
        "(CASE WHEN \(column.sql) IS NULL THEN NULL::boolean ELSE FALSE END)"
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

    private mutating func render<L>(_ column: PGColumn, _ plan: NumericComparisonPlan<L>,
                                    _ parameter: (L) -> PGParameter) -> String {
        switch plan {
        case .constant(let holds):
            return holds ? Self.trueUnlessNull(column) : Self.falseUnlessNull(column)
        case .compare(let op, let literal):
            return "(\(column.sql) \(Self.sqlOperator(op)) \(bind(parameter(literal))))"
        }
    }

    private mutating func compare(_ column: PGColumn, _ op: ComparisonOperator, _ literal: Value) -> String? {
        // A comparison with null is unknown for every row, as in SQL.
        if literal.isNull { return "NULL::boolean" }
        switch (column.type, literal) {
        case (.int, .double(let d)):
            // Exactly as the evaluator compares an integer with a double (no rounding).
            return render(column, QueryEvaluator.planIntColumn(op, d), PGParameter.int64)
        case (.double, .int(let i)):
            return render(column, QueryEvaluator.planDoubleColumn(op, i), PGParameter.double)
        default:
            guard column.type.isScalar, column.type.accepts(literal) else { return nil }
            return "(\(column.sql) \(Self.sqlOperator(op)) \(bind(PGTable.parameter(literal))))"
        }
    }

    /// `column IN (…)`: null literals kept as NULL (making a miss unknown), literals that can
    /// never equal a value of the column's type dropped, an empty list false (unknown on NULL).
    private mutating func isIn(_ column: PGColumn, _ literals: [Value]) -> String? {
        guard column.type.isScalar else { return nil }
        var items: [String] = []
        for literal in literals {
            switch (column.type, literal) {
            case (_, .null):
                items.append("NULL")
            case (.int, .double(let d)):
                if let i = QueryEvaluator.exactInt(d) { items.append(bind(.int64(i))) }
            case (.double, .int(let i)):
                if let d = QueryEvaluator.exactDouble(i) { items.append(bind(.double(d))) }
            default:
                guard column.type.accepts(literal) else { return nil }
                items.append(bind(PGTable.parameter(literal)))
            }
        }
        if items.isEmpty { return Self.falseUnlessNull(column) }
        return "(\(column.sql) IN (\(items.joined(separator: ", "))))"
    }
}
