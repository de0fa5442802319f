/// A value computed from a record, for ``QueryPredicate/compareExpressions(_:_:_:)`` and
/// ``QueryPredicate/isNullExpression(_:)``: a field, a literal, or a function of them.
///
/// Every function is *null in, null out*: a null (or missing) argument, an argument of the
/// wrong kind, or an input outside the function's domain (a division by zero, an integer
/// overflow, a date outside the years 1–9999) makes the result null, never an error. The
/// reference semantics are `QueryEvaluator.value(of:in:)` (``QueryEvaluator``); every
/// store gives the same results.
public indirect enum QueryExpression: Sendable, Hashable {
    /// A field or system property of the record.
    case field(String)
    /// A constant.
    case literal(Value)
    /// A function applied to arguments (see ``QueryFunction`` for each one's arguments).
    case call(QueryFunction, [QueryExpression])

    /// Every field name the expression mentions.
    public var fieldNames: Set<String> {
        switch self {
        case .field(let name): return [name]
        case .literal: return []
        case .call(_, let arguments): return arguments.reduce(into: Set<String>()) { $0.formUnion($1.fieldNames) }
        }
    }
}

/// The functions of a ``QueryExpression`` — those OData `$filter` offers, with the meaning
/// every store implements identically. Strings are measured and indexed in Unicode scalars.
public enum QueryFunction: String, Sendable, Hashable, Codable, CaseIterable {
    /// `lowercased(s)`: ASCII letters A–Z mapped to a–z; every other character unchanged
    /// (SQLite's `lower`, without locale rules that differ between stores).
    case lowercased
    /// `uppercased(s)`: ASCII letters a–z mapped to A–Z; every other character unchanged.
    case uppercased
    /// `trimmed(s)`: leading and trailing spaces (U+0020) removed, as SQL's `trim`.
    case trimmed
    /// `length(s)`: the number of Unicode scalars, an integer.
    case length
    /// `indexOf(s, t)`: the scalar offset of the first `t` in `s` from 0, -1 when absent, 0
    /// for an empty `t`.
    case indexOf
    /// `substring(s, start)` or `substring(s, start, length)`: the scalars from `start` (from
    /// 0), at most `length` of them; `start` is clamped to 0…count and `length` to ≥ 0.
    /// `start` and `length` are integers.
    case substring
    /// `concat(s, t)`: `s` followed by `t` (both strings).
    case concat
    /// `year(d)`: the date's UTC year, 1–9999 (null outside that range).
    case year
    /// `month(d)`: the UTC month, 1–12.
    case month
    /// `day(d)`: the UTC day of the month, 1–31.
    case day
    /// `hour(d)`: the UTC hour, 0–23.
    case hour
    /// `minute(d)`: the minute, 0–59.
    case minute
    /// `second(d)`: the second, 0–59 (milliseconds dropped).
    case second
    /// `add(a, b)`: integers add exactly (null on overflow); with a double, both add as doubles
    /// (null when the result is not finite).
    case add
    /// `subtract(a, b)`: as ``add``.
    case subtract
    /// `multiply(a, b)`: as ``add``.
    case multiply
    /// `divide(a, b)`: integers divide truncating toward zero; doubles divide exactly; a zero
    /// divisor, an overflow or a result that is not finite is null.
    case divide
    /// `modulo(a, b)`: the remainder of truncating division, with the sign of `a`
    /// (`fmod` for doubles); a zero divisor is null.
    case modulo
    /// `floor(x)`: the largest whole number ≤ x (an integer stays as it is; a double stays a double).
    case floor
    /// `ceiling(x)`: the smallest whole number ≥ x.
    case ceiling
    /// `round(x)`: the nearest whole number, halves away from zero (OData's rule).
    case round

    /// How many arguments the function takes.
    public var arity: ClosedRange<Int> {
        switch self {
        case .lowercased, .uppercased, .trimmed, .length, .year, .month, .day, .hour, .minute, .second,
             .floor, .ceiling, .round: return 1...1
        case .indexOf, .concat, .add, .subtract, .multiply, .divide, .modulo: return 2...2
        case .substring: return 2...3
        }
    }

    /// The kinds of the arguments, in order (the last repeats for optional ones).
    public var argumentKinds: [ArgumentKind] {
        switch self {
        case .lowercased, .uppercased, .trimmed, .length: return [.string]
        case .indexOf, .concat: return [.string, .string]
        case .substring: return [.string, .integer, .integer]
        case .year, .month, .day, .hour, .minute, .second: return [.date]
        case .add, .subtract, .multiply, .divide, .modulo: return [.number, .number]
        case .floor, .ceiling, .round: return [.number]
        }
    }

    /// The kind of the result when the arguments are of their kinds.
    public var resultKind: ArgumentKind {
        switch self {
        case .lowercased, .uppercased, .trimmed, .substring, .concat: return .string
        case .length, .indexOf, .year, .month, .day, .hour, .minute, .second: return .integer
        case .add, .subtract, .multiply, .divide, .modulo, .floor, .ceiling, .round: return .number
        }
    }

    /// What an argument or result of a function is.
    public enum ArgumentKind: Sendable, Hashable {
        /// A string.
        case string
        /// An integer.
        case integer
        /// An integer or a double.
        case number
        /// A date.
        case date

        /// Whether a field of `type` holds values of this kind (`any` may hold anything).
        public func admits(_ type: FieldType) -> Bool {
            switch (self, type) {
            case (_, .any): return true
            case (.string, .string), (.integer, .int), (.number, .int), (.number, .double), (.date, .date): return true
            default: return false
            }
        }
    }
}

extension QueryExpression {
    /// Checks names, arities and — where the schema or a literal tells — argument kinds, as
    /// ``Query/validate(against:)`` does for the rest of a predicate. Throws
    /// ``SyncError/Code/invalidQuery``.
    func validate(_ schema: TableSchema) throws {
        _ = try kind(schema)
    }

    /// The expression's kind where it is known (`nil` for an undeclared field or a null).
    private func kind(_ schema: TableSchema) throws -> QueryFunction.ArgumentKind? {
        switch self {
        case .field(let name):
            switch try Query.fieldType(name, schema) {
            case .string?: return .string
            case .int?: return .integer
            case .double?: return .number
            case .date?: return .date
            case nil, .any?: return nil
            case let type?:
                throw SyncError(.invalidQuery, "field '\(name)' of type \(type.rawValue) cannot take part in an expression")
            }
        case .literal(let value):
            do { try value.validate(path: "literal") } catch let error as SyncError {
                throw SyncError(.invalidQuery, error.message)
            }
            switch value {
            case .null: return nil
            case .string: return .string
            case .int: return .integer
            case .double: return .number
            case .date: return .date
            default: throw SyncError(.invalidQuery, "a \(value.kind.rawValue) literal cannot take part in an expression")
            }
        case let .call(function, arguments):
            guard function.arity.contains(arguments.count) else {
                throw SyncError(.invalidQuery, "\(function.rawValue) takes \(function.arity.lowerBound == function.arity.upperBound ? "\(function.arity.lowerBound)" : "\(function.arity.lowerBound) or \(function.arity.upperBound)") arguments, not \(arguments.count)")
            }
            for (argument, expected) in zip(arguments, function.argumentKinds) {
                guard let actual = try argument.kind(schema) else { continue }
                let fits = actual == expected || (expected == .number && actual == .integer)
                if !fits {
                    throw SyncError(.invalidQuery, "\(function.rawValue) takes a \(expected) argument, not a \(actual) one")
                }
            }
            // Arithmetic on integers stays integer.
            if function.resultKind == .number, try arguments.allSatisfy({ try $0.kind(schema) == .integer }) { return .integer }
            return function.resultKind
        }
    }
}

extension QueryPredicate {
    /// Whether the predicate computes values anywhere (``compareExpressions(_:_:_:)`` or
    /// ``isNullExpression(_:)``), which SQL adapters may leave to the evaluator.
    public var mentionsExpressions: Bool {
        switch self {
        case .compareExpressions, .isNullExpression: return true
        case .and(let parts), .or(let parts): return parts.contains { $0.mentionsExpressions }
        case .not(let inner): return inner.mentionsExpressions
        default: return false
        }
    }
}

extension Timestamp {
    /// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
    /// algorithm), shared by the wire's date formats and the query functions.
    package static func civilDate(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
