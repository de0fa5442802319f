import OfflineSync
/// A column a SQL adapter keeps a system property or declared field in.
public struct SQLColumn: Sendable, Hashable {
    /// The quoted column, as it appears in SQL.
    public var sql: String
    /// The type of the values the column holds.
    public var type: FieldType

    /// Describes a column.
    public init(sql: String, type: FieldType) {
        self.sql = sql
        self.type = type
    }
}

/// What a SQL adapter supplies so ``SQLPredicateTranslator`` can write its SQL: where
/// fields live, how values are bound and how the few dialect-specific expressions read.
///
/// Every expression a dialect returns must evaluate to true, false or NULL (unknown) exactly
/// as `QueryEvaluator` does for the same record, and must bind its parameters (through
/// `bind`) in the order their placeholders appear in its text.
public protocol SQLDialect {
    /// A bound parameter value.
    associatedtype Parameter

    /// The column of a system property or declared field; `nil` for a field SQL cannot see
    /// (an undeclared one), which leaves the predicate to `QueryEvaluator`.
    func column(_ field: String) -> SQLColumn?
    /// A scalar literal bound against a column of its own kind (bool, int, double, string,
    /// bytes, date), or `nil` when the dialect cannot bind it.
    func parameter(_ literal: Value) -> Parameter?
    /// The placeholder of the parameter at 1-based `position` (`?` or `$1`).
    func placeholder(_ position: Int) -> String
    /// The boolean constants: true, false and unknown.
    var trueSQL: String { get }
    /// False.
    var falseSQL: String { get }
    /// Unknown (SQL NULL as a boolean).
    var unknownSQL: String { get }
    /// `column` (a string column) contains `needle`, byte for byte; an empty needle is
    /// contained in every string.
    func contains(_ column: SQLColumn, _ needle: String, bind: (Parameter) -> String) -> String
    /// `column` (a string column) starts with `prefix`, byte for byte; a shorter string is
    /// false, not unknown.
    func hasPrefix(_ column: SQLColumn, _ prefix: String, bind: (Parameter) -> String) -> String
    /// `column` (a string column) ends with `suffix`, byte for byte; a shorter string is
    /// false, not unknown, and an empty suffix ends every string. `nil` leaves the test to
    /// `QueryEvaluator` (the default, so dialects written before this requirement keep
    /// compiling and stay correct).
    func hasSuffix(_ column: SQLColumn, _ suffix: String, bind: (Parameter) -> String) -> String?
    /// One ordering term: ascending puts nulls first, descending last.
    func orderTerm(_ column: SQLColumn, ascending: Bool) -> String

    /// A column's value inside a computed expression (`QueryExpression`), or `nil` to leave
    /// expressions that read it to `QueryEvaluator` (the default for every computed-value
    /// requirement, so dialects written before them keep compiling and stay correct).
    func value(of column: SQLColumn, bind: (Parameter) -> String) -> SQLValue?
    /// A non-null literal inside a computed expression, or `nil`.
    func value(of literal: Value, bind: (Parameter) -> String) -> SQLValue?
    /// `function` applied to `arguments`, with the evaluator's result for every row (null
    /// exactly where `QueryEvaluator.value(of:in:)` is null, never an error), or `nil` to
    /// leave it to the evaluator. The translator adds the arguments' doubtful conditions.
    func call(_ function: QueryFunction, _ arguments: [SQLValue], bind: (Parameter) -> String) -> SQLValue?
    /// `lhs op rhs` of two computed values with the evaluator's three-valued result (SQL
    /// NULL for unknown), or `nil` for kinds the dialect cannot compare exactly.
    func compare(_ lhs: SQLValue, _ op: ComparisonOperator, _ rhs: SQLValue) -> String?
}

extension SQLDialect {
    /// No SQL for suffix tests: ``SQLPredicateTranslator`` leaves them to `QueryEvaluator`.
    public func hasSuffix(_ column: SQLColumn, _ suffix: String, bind: (Parameter) -> String) -> String? { nil }
}

/// Translates `QueryPredicate`s and ordering keys into parameterised SQL whose
/// three-valued result equals `QueryEvaluator` exactly, for everything that names only
/// system properties and declared scalar fields, through a ``SQLDialect``. Anything else is
/// left to the evaluator: ``split(_:)`` returns the conjuncts SQL evaluates and the rest.
///
/// The logic is shared by every SQL adapter: three-valued `NOT`/`AND`/`OR`, comparisons with
/// null literals, integer-versus-double comparisons without rounding
/// (`QueryEvaluator/planIntColumn(_:_:)`), `IN` lists with nulls and literals of other
/// kinds. Values are always bound parameters.
public struct SQLPredicateTranslator<Dialect: SQLDialect> {
    /// The dialect writing the SQL.
    public let dialect: Dialect
    /// The parameters bound so far, in placeholder order.
    public private(set) var parameters: [Dialect.Parameter]
    /// Bound values above this many make a conjunct fall back to the evaluator.
    public let maxParameters: Int
    /// Predicate nesting deeper than this falls back to the evaluator.
    public let maxDepth: Int
    /// The doubtful conditions of the conjunct being translated (see ``SQLValue/doubtful``).
    var doubts: [String] = []

    /// A translator binding after `parameters` (already in the statement).
    public init(dialect: Dialect, parameters: [Dialect.Parameter] = [], maxParameters: Int, maxDepth: Int = 200) {
        self.dialect = dialect
        self.parameters = parameters
        self.maxParameters = maxParameters
        self.maxDepth = maxDepth
    }

    /// Binds a value and returns its placeholder.
    public mutating func bind(_ value: Dialect.Parameter) -> String {
        parameters.append(value)
        return dialect.placeholder(parameters.count)
    }

    /// The predicate's top-level conjuncts split into those SQL evaluates (joined with
    /// `AND`, `nil` when none) and the rest, for `QueryEvaluator`. A row matches the
    /// predicate exactly when the SQL part is true and every remaining conjunct is true.
    ///
    /// A conjunct whose computed values are doubtful for some rows is in both: SQL keeps the
    /// rows where it holds or where a doubtful condition does, and the evaluator decides.
    public mutating func split(_ predicate: QueryPredicate) -> (sql: String?, rest: [QueryPredicate]) {
        var parts: [String] = []
        var rest: [QueryPredicate] = []
        for conjunct in predicate.conjuncts {
            if case .all = conjunct { continue }
            let mark = parameters.count
            doubts = []
            if let sql = translate(conjunct, depth: 0), parameters.count <= maxParameters {
                if doubts.isEmpty {
                    parts.append(sql)
                } else {
                    parts.append("(" + (doubts + [sql]).joined(separator: " OR ") + ")")
                    rest.append(conjunct)
                }
            } else {
                parameters.removeSubrange(mark...)
                rest.append(conjunct)
            }
        }
        return (parts.isEmpty ? nil : parts.joined(separator: " AND "), rest)
    }

    /// `ORDER BY` for the keys then the id, or `nil` when a key is a field SQL cannot see.
    ///
    /// The keys end at a key on the id: ids are unique, so nothing after it can order two
    /// rows, and leaving it last lets an index that ends with the id deliver the order in
    /// either direction (`ORDER BY "f_sequence" DESC, "id" DESC` walks an index on
    /// `("f_sequence", "id")` backwards, where the ascending id tie-break would make SQLite
    /// sort the index's rows again in a temporary B-tree).
    public func orderBy(_ keys: [SortKey]) -> String? {
        var terms: [String] = []
        for key in keys {
            guard let column = dialect.column(key.field), column.type.isScalar else { return nil }
            terms.append(dialect.orderTerm(column, ascending: key.ascending))
            if key.field.utf8.elementsEqual(SystemField.id.utf8) { return "ORDER BY " + terms.joined(separator: ", ") }
        }
        guard let id = dialect.column(SystemField.id) else { return nil }
        terms.append("\(id.sql) ASC")
        return "ORDER BY " + terms.joined(separator: ", ")
    }

    /// The SQL for a predicate, or `nil` when part of it needs the evaluator (the caller
    /// drops the parameters bound on the way).
    private mutating func translate(_ predicate: QueryPredicate, depth: Int) -> String? {
        guard depth <= maxDepth else { return nil }
        switch predicate {
        case .all:
            return dialect.trueSQL
        case let .compare(field, op, literal):
            guard let column = dialect.column(field) else { return nil }
            return compare(column, op, literal)
        case let .isIn(field, literals):
            guard let column = dialect.column(field) else { return nil }
            return isIn(column, literals)
        case .isNull(let field):
            guard let column = dialect.column(field) else { return nil }
            return "(\(column.sql) IS NULL)"
        case let .contains(field, needle):
            guard let column = dialect.column(field), column.type == .string else { return nil }
            let dialect = self.dialect
            return dialect.contains(column, needle) { bind($0) }
        case let .hasPrefix(field, prefix):
            guard let column = dialect.column(field), column.type == .string else { return nil }
            let dialect = self.dialect
            return dialect.hasPrefix(column, prefix) { bind($0) }
        case let .hasSuffix(field, suffix):
            guard let column = dialect.column(field), column.type == .string else { return nil }
            let dialect = self.dialect
            return dialect.hasSuffix(column, suffix) { bind($0) }
        case .and(let parts):
            return combine(parts, with: "AND", empty: dialect.trueSQL, depth: depth)
        case .or(let parts):
            return combine(parts, with: "OR", empty: dialect.falseSQL, depth: depth)
        case .not(let inner):
            guard let sql = translate(inner, depth: depth + 1) else { return nil }
            return "(NOT \(sql))"
        case let .compareExpressions(lhs, op, rhs):
            return compareExpressions(lhs, op, rhs)
        case .isNullExpression(let expression):
            return isNull(expression)
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

    /// Holds for every non-null value of the column when `holds`, fails otherwise; unknown on NULL.
    private func constant(_ column: SQLColumn, _ holds: Bool) -> String {
        "(CASE WHEN \(column.sql) IS NULL THEN \(dialect.unknownSQL) ELSE \(holds ? dialect.trueSQL : dialect.falseSQL) END)"
    }

    private mutating func compare(_ column: SQLColumn, _ op: ComparisonOperator, _ literal: Value) -> String? {
        // A comparison with null is unknown for every row, as in SQL.
        if literal.isNull { return dialect.unknownSQL }
        var plan: NumericComparisonPlan<Value>
        switch (column.type, literal) {
        case (.int, .double(let d)):
            // Exactly as the evaluator compares an integer with a double (no rounding).
            switch QueryEvaluator.planIntColumn(op, d) {
            case .constant(let holds): plan = .constant(holds)
            case .compare(let op, let i): plan = .compare(op, .int(i))
            }
        case (.double, .int(let i)):
            switch QueryEvaluator.planDoubleColumn(op, i) {
            case .constant(let holds): plan = .constant(holds)
            case .compare(let op, let d): plan = .compare(op, .double(d))
            }
        default:
            guard column.type.isScalar, column.type.accepts(literal) else { return nil }
            plan = .compare(op, literal)
        }
        switch plan {
        case .constant(let holds):
            return constant(column, holds)
        case .compare(let op, let value):
            guard let parameter = dialect.parameter(value) else { return nil }
            return "(\(column.sql) \(SQLFunctions.sqlOperator(op)) \(bind(parameter)))"
        }
    }

    /// `column IN (…)`: null literals kept as NULL (making a miss unknown), literals that can
    /// never equal a value of the column's type dropped, an empty list false (unknown on NULL).
    private mutating func isIn(_ column: SQLColumn, _ literals: [Value]) -> String? {
        guard column.type.isScalar else { return nil }
        var items: [String] = []
        for literal in literals {
            var value: Value?
            switch (column.type, literal) {
            case (_, .null):
                items.append("NULL")
                continue
            case (.int, .double(let d)):
                value = QueryEvaluator.exactInt(d).map(Value.int)
            case (.double, .int(let i)):
                value = QueryEvaluator.exactDouble(i).map(Value.double)
            default:
                guard column.type.accepts(literal) else { return nil }
                value = literal
            }
            guard let value else { continue }
            guard let parameter = dialect.parameter(value) else { return nil }
            items.append(bind(parameter))
        }
        if items.isEmpty { return constant(column, false) }
        return "(\(column.sql) IN (\(items.joined(separator: ", "))))"
    }
}

extension QueryPredicate {
    /// The top-level conjuncts: nested `and`s flattened (a record matches when all are true).
    public var conjuncts: [QueryPredicate] {
        if case .and(let parts) = self { return parts.flatMap(\.conjuncts) }
        return [self]
    }
}
