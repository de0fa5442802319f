import OfflineSync

/// A computed value in SQL (a field, a literal or a function of them, see `QueryExpression`):
/// its text and the kind of value it yields, as a ``SQLDialect`` writes it.
public struct SQLValue: Sendable, Hashable {
    /// What the SQL yields (or SQL NULL, which stands for the evaluator's null).
    public enum Kind: Sendable, Hashable {
        /// A string, in the dialect's text form.
        case string
        /// A 64-bit integer.
        case int
        /// A double.
        case double
        /// A date, as the dialect stores dates (milliseconds since 1970 in ours).
        case date

        /// The kind of a column of `type`; `nil` for types no function takes (bool, bytes,
        /// arrays, objects, `any`).
        public init?(_ type: FieldType) {
            switch type {
            case .string: self = .string
            case .int: self = .int
            case .double: self = .double
            case .date: self = .date
            default: return nil
            }
        }
    }

    /// The SQL expression.
    public var sql: String
    /// The kind of its non-null values.
    public var kind: Kind
    /// SQL conditions under which `sql` may differ from the evaluator's value for a row (a
    /// string holding U+0000, which SQLite's `length()` stops at and PostgreSQL's text cannot
    /// hold). A comparison whose operands carry any is only a pre-filter: rows meeting a
    /// condition pass it, and the evaluator decides them.
    public var doubtful: [String]

    /// Describes a computed value.
    public init(sql: String, kind: Kind, doubtful: [String] = []) {
        self.sql = sql
        self.kind = kind
        self.doubtful = doubtful
    }

    /// Whether the value is a number (an integer or a double).
    public var isNumber: Bool { kind == .int || kind == .double }
}

extension SQLDialect {
    /// No computed values in SQL: ``SQLPredicateTranslator`` leaves them to `QueryEvaluator`.
    public func value(of column: SQLColumn, bind: (Parameter) -> String) -> SQLValue? { nil }
    /// No computed values in SQL.
    public func value(of literal: Value, bind: (Parameter) -> String) -> SQLValue? { nil }
    /// No computed values in SQL.
    public func call(_ function: QueryFunction, _ arguments: [SQLValue], bind: (Parameter) -> String) -> SQLValue? { nil }
    /// No computed values in SQL.
    public func compare(_ lhs: SQLValue, _ op: ComparisonOperator, _ rhs: SQLValue) -> String? { nil }
}

extension SQLPredicateTranslator {
    /// Functions nested deeper than this are left to the evaluator.
    static var maxExpressionDepth: Int { 16 }
    /// A computed comparison whose SQL grows beyond this many bytes (some functions repeat
    /// their arguments, for overflow and range checks) is left to the evaluator.
    static var maxExpressionSQL: Int { 16_384 }

    /// `lhs op rhs` over computed values, or `nil` when the dialect cannot write part of it.
    /// The operands' doubtful conditions are added to `doubts`.
    mutating func compareExpressions(_ lhs: QueryExpression, _ op: ComparisonOperator, _ rhs: QueryExpression) -> String? {
        guard let l = value(of: lhs, depth: 0), let r = value(of: rhs, depth: 0),
              let sql = dialect.compare(l, op, r), sql.utf8.count <= Self.maxExpressionSQL else { return nil }
        doubts += l.doubtful + r.doubtful
        return sql
    }

    /// `expression IS NULL`, or `nil` when the dialect cannot write the expression.
    mutating func isNull(_ expression: QueryExpression) -> String? {
        guard let v = value(of: expression, depth: 0), v.sql.utf8.count <= Self.maxExpressionSQL else { return nil }
        doubts += v.doubtful
        return "(\(v.sql) IS NULL)"
    }

    private mutating func value(of expression: QueryExpression, depth: Int) -> SQLValue? {
        guard depth <= Self.maxExpressionDepth else { return nil }
        let dialect = self.dialect
        switch expression {
        case .field(let name):
            guard let column = dialect.column(name) else { return nil }
            return dialect.value(of: column) { bind($0) }
        case .literal(let literal):
            // A null literal makes the whole expression null; rare enough to leave to the evaluator.
            if literal.isNull { return nil }
            return dialect.value(of: literal) { bind($0) }
        case let .call(function, arguments):
            guard function.arity.contains(arguments.count) else { return nil }
            var values: [SQLValue] = []
            for argument in arguments {
                guard let v = value(of: argument, depth: depth + 1) else { return nil }
                values.append(v)
            }
            guard var result = dialect.call(function, values, bind: { bind($0) }) else { return nil }
            // A function of a doubtful argument is doubtful under the same conditions.
            var seen = Set(result.doubtful)
            for condition in values.flatMap(\.doubtful) where seen.insert(condition).inserted {
                result.doubtful.append(condition)
            }
            return result
        }
    }
}

/// SQL building blocks both SQL adapters write their functions with.
public enum SQLFunctions {
    /// The argument kinds `function` takes, as ``SQLValue/Kind``s, when `arguments` have them
    /// exactly (integers where the function wants integers, strings, dates) — `false` for any
    /// mismatch, which the evaluator turns into null and the dialect leaves to it.
    public static func accepts(_ function: QueryFunction, _ arguments: [SQLValue]) -> Bool {
        for (argument, kind) in zip(arguments, function.argumentKinds + [function.argumentKinds.last!]) {
            switch kind {
            case .string: if argument.kind != .string { return false }
            case .integer: if argument.kind != .int { return false }
            case .number: if !argument.isNumber { return false }
            case .date: if argument.kind != .date { return false }
            }
        }
        return true
    }

    /// `round(x)` of a double with halves away from zero, from `floor` and `ceil` (both exact):
    /// `x - floor(x)` is exact for every double, so the half test has no rounding error, which
    /// SQLite's `round()` (`x + 0.5`, wrong at 0.49999999999999994 and above 2⁵²) and
    /// PostgreSQL's (halves to even) both have.
    public static func roundHalfAwayFromZero(_ x: String, floor: String = "floor", ceil: String = "ceil") -> String {
        "(CASE WHEN \(x) >= 0 THEN (CASE WHEN \(x) - \(floor)(\(x)) >= 0.5 THEN \(ceil)(\(x)) ELSE \(floor)(\(x)) END)"
            + " ELSE (CASE WHEN \(ceil)(\(x)) - \(x) >= 0.5 THEN \(floor)(\(x)) ELSE \(ceil)(\(x)) END) END)"
    }

    /// The SQL operator of a comparison.
    public static func sqlOperator(_ op: ComparisonOperator) -> String {
        switch op {
        case .equal: return "="
        case .notEqual: return "<>"
        case .less: return "<"
        case .lessOrEqual: return "<="
        case .greater: return ">"
        case .greaterOrEqual: return ">="
        }
    }

    /// `-62135596800000`, 0001-01-01T00:00:00Z in milliseconds: the first date the calendar
    /// functions answer for.
    public static let firstCalendarMillisecond: Int64 = -62_135_596_800_000
    /// `253402300800000`, 10000-01-01T00:00:00Z: the first date past their range.
    public static let pastCalendarMillisecond: Int64 = 253_402_300_800_000

    /// The millisecond date `ms` in whole seconds, rounded toward negative infinity (`/` and
    /// `%` truncate toward zero in SQLite and PostgreSQL).
    public static func floorSeconds(_ ms: String) -> String {
        "((\(ms) - (((\(ms)) % 1000) + 1000) % 1000) / 1000)"
    }
}
