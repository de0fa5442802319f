/// A comparison operator of a ``QueryPredicate``.
public enum ComparisonOperator: String, Sendable, Hashable, Codable, CaseIterable {
    /// `==`
    case equal = "=="
    /// `!=`
    case notEqual = "!="
    /// `<`
    case less = "<"
    /// `<=`
    case lessOrEqual = "<="
    /// `>`
    case greater = ">"
    /// `>=`
    case greaterOrEqual = ">="
}

/// A condition on a record, evaluated with SQL's three-valued logic: a comparison with a
/// null (missing) field is *unknown*, `not(unknown)` is unknown, and a record matches only
/// when the whole predicate is true. Strings compare by UTF-8 bytes, case-sensitively.
public indirect enum QueryPredicate: Sendable, Hashable {
    /// Matches every record.
    case all
    /// `field <op> value`. Integers and doubles compare numerically with each other.
    case compare(String, ComparisonOperator, Value)
    /// `field` equals one of the values.
    case isIn(String, [Value])
    /// The field is null or missing (never unknown).
    case isNull(String)
    /// The string field contains the substring (case-sensitive).
    case contains(String, String)
    /// The string field starts with the prefix (case-sensitive).
    case hasPrefix(String, String)
    /// The string field ends with the suffix (case-sensitive).
    case hasSuffix(String, String)
    /// All sub-predicates hold (true when empty).
    case and([QueryPredicate])
    /// At least one sub-predicate holds (false when empty).
    case or([QueryPredicate])
    /// The sub-predicate does not hold.
    case not(QueryPredicate)
    /// `lhs <op> rhs` of two computed values (``QueryExpression``), compared as
    /// ``compare(_:_:_:)`` compares a field with a literal: unknown when either is null.
    case compareExpressions(QueryExpression, ComparisonOperator, QueryExpression)
    /// The computed value is null — a null argument, or an input outside a function's
    /// domain (never unknown).
    case isNullExpression(QueryExpression)

    /// Every field name the predicate mentions.
    public var fieldNames: Set<String> {
        switch self {
        case .all: return []
        case .compare(let f, _, _), .isIn(let f, _), .isNull(let f), .contains(let f, _), .hasPrefix(let f, _),
             .hasSuffix(let f, _): return [f]
        case .and(let ps), .or(let ps): return ps.reduce(into: Set<String>()) { $0.formUnion($1.fieldNames) }
        case .not(let p): return p.fieldNames
        case let .compareExpressions(l, _, r): return l.fieldNames.union(r.fieldNames)
        case .isNullExpression(let e): return e.fieldNames
        }
    }
}

/// One ordering key of a ``Query``.
public struct SortKey: Sendable, Hashable {
    /// The field (or system property) to order by.
    public var field: String
    /// Ascending (nulls first) or descending (nulls last).
    public var ascending: Bool
    /// Creates an ordering key.
    public init(_ field: String, ascending: Bool = true) {
        self.field = field
        self.ascending = ascending
    }
}

/// A query: a predicate, ordering on several keys, then offset and limit.
///
/// Results are always ordered by the given keys and then by id, so every store returns the
/// same rows in the same order for the same data and query.
public struct Query: Sendable, Hashable {
    /// The condition rows must meet.
    public var predicate: QueryPredicate
    /// The ordering keys, most significant first.
    public var order: [SortKey]
    /// The maximum number of rows, or `nil` for all.
    public var limit: Int?
    /// How many matching rows to skip first.
    public var offset: Int

    /// Creates a query.
    public init(_ predicate: QueryPredicate = .all, order: [SortKey] = [], limit: Int? = nil, offset: Int = 0) {
        self.predicate = predicate
        self.order = order
        self.limit = limit
        self.offset = offset
    }

    /// Every record, ordered by id.
    public static let all = Query()

    /// The same query with another limit.
    public func limit(_ limit: Int?) -> Query { var q = self; q.limit = limit; return q }
    /// The same query with another offset.
    public func offset(_ offset: Int) -> Query { var q = self; q.offset = offset; return q }
    /// The same query with one more ordering key.
    public func orderBy(_ field: String, ascending: Bool = true) -> Query {
        var q = self; q.order.append(SortKey(field, ascending: ascending)); return q
    }

    /// Checks the query against a table's schema: names are valid, limit and offset are not
    /// negative, literals fit the declared types, substring tests target strings and ordering
    /// targets scalar fields. Every store calls this first, so all stores accept and refuse
    /// the same queries. Throws ``SyncError/Code/invalidQuery``.
    public func validate(against schema: TableSchema) throws {
        if let limit, limit < 0 { throw SyncError(.invalidQuery, "limit is negative") }
        if offset < 0 { throw SyncError(.invalidQuery, "offset is negative") }
        try Query.validate(predicate, schema)
        for key in order {
            let type = try Query.fieldType(key.field, schema)
            if let type, !type.isScalar {
                throw SyncError(.invalidQuery, "cannot order by field '\(key.field)' of type \(type.rawValue)")
            }
        }
    }

    /// The declared type of a field for queries: system properties have fixed types,
    /// undeclared fields answer `nil`.
    static func fieldType(_ field: String, _ schema: TableSchema) throws -> FieldType? {
        switch field {
        case SystemField.id, SystemField.version: return .string
        case SystemField.updatedAt: return .date
        case SystemField.deleted: return .bool
        default:
            do { try Names.validateField(field) } catch let error as SyncError {
                throw SyncError(.invalidQuery, error.message)
            }
            return schema.field(named: field)?.type
        }
    }

    private static func checkLiteral(_ field: String, _ value: Value, _ type: FieldType?) throws {
        do { try value.validate(path: field) } catch let error as SyncError {
            throw SyncError(.invalidQuery, error.message)
        }
        guard let type, !value.isNull else { return }
        switch (type, value) {
        case (.int, .double), (.double, .int): return
        case (.array, _), (.object, _), (.any, _):
            throw SyncError(.invalidQuery, "cannot compare field '\(field)' of type \(type.rawValue)")
        default:
            if !type.accepts(value) {
                throw SyncError(.invalidQuery, "field '\(field)' is \(type.rawValue) but is compared with a \(value.kind.rawValue)")
            }
        }
    }

    private static func validate(_ predicate: QueryPredicate, _ schema: TableSchema) throws {
        switch predicate {
        case .all: return
        case let .compare(field, _, value):
            try checkLiteral(field, value, try fieldType(field, schema))
        case let .isIn(field, values):
            let type = try fieldType(field, schema)
            for value in values { try checkLiteral(field, value, type) }
        case .isNull(let field):
            _ = try fieldType(field, schema)
        case .contains(let field, _), .hasPrefix(let field, _), .hasSuffix(let field, _):
            if let type = try fieldType(field, schema), type != .string {
                throw SyncError(.invalidQuery, "substring test on field '\(field)' of type \(type.rawValue)")
            }
        case .and(let ps), .or(let ps):
            for p in ps { try validate(p, schema) }
        case .not(let p):
            try validate(p, schema)
        case let .compareExpressions(l, _, r):
            try l.validate(schema)
            try r.validate(schema)
        case .isNullExpression(let e):
            try e.validate(schema)
        }
    }
}

/// A field reference for building predicates: `Field("age") > 30 && Field("name").hasPrefix("A")`.
public struct Field: Sendable, Hashable {
    /// The field name (or a system property name).
    public let name: String
    /// Refers to a field.
    public init(_ name: String) { self.name = name }

    /// `field == value`
    public static func == (lhs: Field, rhs: Value) -> QueryPredicate { .compare(lhs.name, .equal, rhs) }
    /// `field != value`
    public static func != (lhs: Field, rhs: Value) -> QueryPredicate { .compare(lhs.name, .notEqual, rhs) }
    /// `field < value`
    public static func < (lhs: Field, rhs: Value) -> QueryPredicate { .compare(lhs.name, .less, rhs) }
    /// `field <= value`
    public static func <= (lhs: Field, rhs: Value) -> QueryPredicate { .compare(lhs.name, .lessOrEqual, rhs) }
    /// `field > value`
    public static func > (lhs: Field, rhs: Value) -> QueryPredicate { .compare(lhs.name, .greater, rhs) }
    /// `field >= value`
    public static func >= (lhs: Field, rhs: Value) -> QueryPredicate { .compare(lhs.name, .greaterOrEqual, rhs) }
    /// The field equals one of `values`.
    public func isIn(_ values: [Value]) -> QueryPredicate { .isIn(name, values) }
    /// The field is null or missing.
    public var isNull: QueryPredicate { .isNull(name) }
    /// The string field contains `substring`.
    public func contains(_ substring: String) -> QueryPredicate { .contains(name, substring) }
    /// The string field starts with `prefix`.
    public func hasPrefix(_ prefix: String) -> QueryPredicate { .hasPrefix(name, prefix) }
    /// The string field ends with `suffix`.
    public func hasSuffix(_ suffix: String) -> QueryPredicate { .hasSuffix(name, suffix) }
}

extension QueryPredicate {
    /// Both hold.
    public static func && (lhs: QueryPredicate, rhs: QueryPredicate) -> QueryPredicate { .and([lhs, rhs]) }
    /// Either holds.
    public static func || (lhs: QueryPredicate, rhs: QueryPredicate) -> QueryPredicate { .or([lhs, rhs]) }
    /// Does not hold.
    public static prefix func ! (operand: QueryPredicate) -> QueryPredicate { .not(operand) }
}
