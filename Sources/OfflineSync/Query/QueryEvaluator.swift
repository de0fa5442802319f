/// The reference semantics of `Query`: every store must return exactly what this returns
/// for the same records and query. Key/value adapters use it directly.
public enum QueryEvaluator {
    /// SQL's three truth values.
    public enum Truth: Sendable, Hashable {
        /// The predicate holds.
        case `true`
        /// The predicate does not hold.
        case `false`
        /// A null took part, so the result is unknown (and the row does not match).
        case unknown
    }

    /// Whether the record matches the predicate (only `true` matches).
    public static func matches(_ record: Record, _ predicate: QueryPredicate) -> Bool {
        evaluate(record, predicate) == .true
    }

    /// Evaluates the predicate with three-valued logic.
    public static func evaluate(_ record: Record, _ predicate: QueryPredicate) -> Truth {
        switch predicate {
        case .all: return .true
        case let .compare(field, op, literal):
            return compare(record[field], op, literal)
        case let .isIn(field, literals):
            let value = record[field]
            if value.isNull { return .unknown }
            var sawNull = false
            for literal in literals {
                if literal.isNull { sawNull = true; continue }
                if compare(value, .equal, literal) == .true { return .true }
            }
            return sawNull ? .unknown : .false
        case .isNull(let field):
            return record[field].isNull ? .true : .false
        case let .contains(field, needle):
            switch record[field] {
            case .null: return .unknown
            case .string(let s): return containsBytes(Array(s.utf8), Array(needle.utf8)) ? .true : .false
            default: return .false
            }
        case let .hasPrefix(field, prefix):
            switch record[field] {
            case .null: return .unknown
            case .string(let s): return s.utf8.starts(with: prefix.utf8) ? .true : .false
            default: return .false
            }
        case let .hasSuffix(field, suffix):
            switch record[field] {
            case .null: return .unknown
            case .string(let s): return s.utf8.reversed().starts(with: suffix.utf8.reversed()) ? .true : .false
            default: return .false
            }
        case .and(let ps):
            var result = Truth.true
            for p in ps {
                switch evaluate(record, p) {
                case .false: return .false
                case .unknown: result = .unknown
                case .true: break
                }
            }
            return result
        case .or(let ps):
            var result = Truth.false
            for p in ps {
                switch evaluate(record, p) {
                case .true: return .true
                case .unknown: result = .unknown
                case .false: break
                }
            }
            return result
        case .not(let p):
            switch evaluate(record, p) {
            case .true: return .false
            case .false: return .true
            case .unknown: return .unknown
            }
        case let .compareExpressions(lhs, op, rhs):
            return compareExpressions(record, lhs, op, rhs)
        case .isNullExpression(let expression):
            return value(of: expression, in: record).isNull ? .true : .false
        }
    }

    /// Applies the query to records: filter, order (by the keys, then id), offset, limit.
    public static func apply<S: Sequence>(_ query: Query, to records: S) -> [Record] where S.Element == Record {
        var matched = records.filter { matches($0, query.predicate) }
        matched.sort { areInIncreasingOrder($0, $1, query.order) }
        let start = min(query.offset, matched.count)
        let end = query.limit.map { start + min(matched.count - start, $0) } ?? matched.count
        return Array(matched[start..<end])
    }

    /// The number of records matching the predicate.
    public static func count<S: Sequence>(_ predicate: QueryPredicate, in records: S) -> Int where S.Element == Record {
        records.reduce(0) { $0 + (matches($1, predicate) ? 1 : 0) }
    }

    /// The order a query's keys define, with the id (by UTF-8 bytes) as the final key.
    public static func areInIncreasingOrder(_ a: Record, _ b: Record, _ keys: [SortKey]) -> Bool {
        for key in keys {
            let c = orderCompare(a[key.field], b[key.field])
            if c != 0 { return key.ascending ? c < 0 : c > 0 }
        }
        return Value.utf8Less(a.id, b.id)
    }

    /// A total order over values for sorting: null first, then booleans, numbers, strings,
    /// bytes, dates, arrays, objects; within a kind the natural order. Returns -1, 0 or 1.
    public static func orderCompare(_ a: Value, _ b: Value) -> Int {
        let ra = rank(a), rb = rank(b)
        if ra != rb { return ra < rb ? -1 : 1 }
        return scalarCompare(a, b) ?? 0
    }

    private static func rank(_ v: Value) -> Int {
        switch v {
        case .null: return 0
        case .bool: return 1
        case .int, .double: return 2
        case .string: return 3
        case .bytes: return 4
        case .date: return 5
        case .array: return 6
        case .object: return 7
        }
    }

    /// Compares two values of comparable kinds (-1, 0, 1), or `nil` when they are not comparable.
    public static func scalarCompare(_ a: Value, _ b: Value) -> Int? {
        switch (a, b) {
        case let (.bool(x), .bool(y)): return x == y ? 0 : (!x ? -1 : 1)
        case let (.int(x), .int(y)): return x == y ? 0 : (x < y ? -1 : 1)
        case let (.double(x), .double(y)): return x == y ? 0 : (x < y ? -1 : 1)
        case let (.int(x), .double(y)): return compareIntDouble(x, y)
        case let (.double(x), .int(y)): return -compareIntDouble(y, x)
        case let (.string(x), .string(y)):
            if ExactString.sameBytes(x, y) { return 0 }
            return Value.utf8Less(x, y) ? -1 : 1
        case let (.bytes(x), .bytes(y)):
            if x == y { return 0 }
            return x.lexicographicallyPrecedes(y) ? -1 : 1
        case let (.date(x), .date(y)): return x == y ? 0 : (x < y ? -1 : 1)
        default: return nil
        }
    }

    /// Exact comparison of an integer with a double (no rounding of large integers):
    /// -1, 0 or 1. SQL adapters use it to plan int-vs-double comparisons the same way.
    public static func compareIntDouble(_ i: Int64, _ d: Double) -> Int {
        if d >= 9_223_372_036_854_775_808.0 { return -1 }
        if d < -9_223_372_036_854_775_808.0 { return 1 }
        let whole = d.rounded(.down)
        let t = Int64(whole)
        if i < t { return -1 }
        if i > t { return 1 }
        return d > whole ? -1 : 0
    }

    static func compare(_ value: Value, _ op: ComparisonOperator, _ literal: Value) -> Truth {
        if value.isNull || literal.isNull { return .unknown }
        guard let c = scalarCompare(value, literal) else {
            // Values of kinds that cannot be compared: unequal, and unordered.
            if op == .notEqual { return value == literal ? .false : .true }
            if op == .equal { return value == literal ? .true : .false }
            return .false
        }
        let holds: Bool
        switch op {
        case .equal: holds = c == 0
        case .notEqual: holds = c != 0
        case .less: holds = c < 0
        case .lessOrEqual: holds = c <= 0
        case .greater: holds = c > 0
        case .greaterOrEqual: holds = c >= 0
        }
        return holds ? .true : .false
    }

    static func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        if needle.isEmpty { return true }
        if needle.count > haystack.count { return false }
        var i = 0
        while i + needle.count <= haystack.count {
            if haystack[i] == needle[0], haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}
