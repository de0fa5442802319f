// The reference semantics of `QueryExpression`: what every store computes.

extension QueryEvaluator {
    /// The value of `expression` for `record`; `.null` when an argument is null, of the wrong
    /// kind, or outside the function's domain (see `QueryFunction`).
    public static func value(of expression: QueryExpression, in record: Record) -> Value {
        switch expression {
        case .field(let name): return record[name]
        case .literal(let value): return value
        case let .call(function, arguments):
            guard function.arity.contains(arguments.count) else { return .null }
            let values = arguments.map { value(of: $0, in: record) }
            if values.contains(where: \.isNull) { return .null }
            return apply(function, values)
        }
    }

    /// `lhs op rhs` of two expressions, as `QueryPredicate.compareExpressions` means it.
    static func compareExpressions(_ record: Record, _ lhs: QueryExpression, _ op: ComparisonOperator,
                                   _ rhs: QueryExpression) -> Truth {
        compare(value(of: lhs, in: record), op, value(of: rhs, in: record))
    }

    private static func apply(_ function: QueryFunction, _ values: [Value]) -> Value {
        switch function {
        case .lowercased, .uppercased, .trimmed, .length, .indexOf, .substring, .concat:
            return string(function, values)
        case .year, .month, .day, .hour, .minute, .second:
            guard case .date(let date) = values[0], let parts = CivilTime(date) else { return .null }
            switch function {
            case .year: return .int(parts.year)
            case .month: return .int(parts.month)
            case .day: return .int(parts.day)
            case .hour: return .int(parts.hour)
            case .minute: return .int(parts.minute)
            default: return .int(parts.second)
            }
        case .add, .subtract, .multiply, .divide, .modulo:
            return arithmetic(function, values[0], values[1])
        case .floor, .ceiling, .round:
            switch values[0] {
            case .int: return values[0]
            case .double(let x):
                let rule: FloatingPointRoundingRule = function == .floor ? .down
                    : function == .ceiling ? .up : .toNearestOrAwayFromZero
                return .double(x.rounded(rule))
            default: return .null
            }
        }
    }

    private static func string(_ function: QueryFunction, _ values: [Value]) -> Value {
        guard case .string(let s) = values[0] else { return .null }
        switch function {
        case .lowercased: return .string(mapASCII(s, from: UInt8(ascii: "A"), to: UInt8(ascii: "Z"), offset: 32))
        case .uppercased: return .string(mapASCII(s, from: UInt8(ascii: "a"), to: UInt8(ascii: "z"), offset: -32))
        case .trimmed:
            let scalars = Array(s.unicodeScalars)
            guard let first = scalars.firstIndex(where: { $0 != " " }) else { return .string("") }
            let last = scalars.lastIndex { $0 != " " }!
            return .string(String(String.UnicodeScalarView(scalars[first...last])))
        case .length:
            return .int(Int64(s.unicodeScalars.count))
        case .indexOf:
            guard case .string(let t) = values[1] else { return .null }
            return .int(indexOf(Array(s.unicodeScalars), Array(t.unicodeScalars)))
        case .substring:
            let scalars = Array(s.unicodeScalars)
            guard case .int(let rawStart) = values[1] else { return .null }
            let start = Int(min(max(rawStart, 0), Int64(scalars.count)))
            var end = scalars.count
            if values.count > 2 {
                guard case .int(let rawLength) = values[2] else { return .null }
                end = Int(min(Int64(start) + min(max(rawLength, 0), Int64(scalars.count)), Int64(scalars.count)))
            }
            return .string(String(String.UnicodeScalarView(scalars[start..<end])))
        case .concat:
            guard case .string(let t) = values[1] else { return .null }
            return .string(s + t)
        default:
            return .null
        }
    }

    private static func mapASCII(_ s: String, from low: UInt8, to high: UInt8, offset: Int) -> String {
        var bytes = Array(s.utf8)
        for i in bytes.indices where bytes[i] >= low && bytes[i] <= high { bytes[i] = UInt8(Int(bytes[i]) + offset) }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func indexOf(_ haystack: [Unicode.Scalar], _ needle: [Unicode.Scalar]) -> Int64 {
        if needle.isEmpty { return 0 }
        guard needle.count <= haystack.count else { return -1 }
        for i in 0...(haystack.count - needle.count) where haystack[i..<(i + needle.count)].elementsEqual(needle) {
            return Int64(i)
        }
        return -1
    }

    private static func arithmetic(_ function: QueryFunction, _ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case let (.int(x), .int(y)):
            let result: (partialValue: Int64, overflow: Bool)
            switch function {
            case .add: result = x.addingReportingOverflow(y)
            case .subtract: result = x.subtractingReportingOverflow(y)
            case .multiply: result = x.multipliedReportingOverflow(by: y)
            case .divide:
                if y == 0 { return .null }
                result = x.dividedReportingOverflow(by: y)
            default:
                if y == 0 { return .null }
                // Int64.min % -1 is 0, which Swift reports as an overflow.
                if y == -1 { return .int(0) }
                result = x.remainderReportingOverflow(dividingBy: y)
            }
            return result.overflow ? .null : .int(result.partialValue)
        default:
            guard let x = a.numericDouble, let y = b.numericDouble else { return .null }
            let result: Double
            switch function {
            case .add: result = x + y
            case .subtract: result = x - y
            case .multiply: result = x * y
            case .divide:
                if y == 0 { return .null }
                result = x / y
            default:
                if y == 0 { return .null }
                result = x.truncatingRemainder(dividingBy: y)
            }
            return result.isFinite ? .double(result) : .null
        }
    }
}

extension Value {
    /// An int or a double as a double (`nil` for anything else).
    fileprivate var numericDouble: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
}

/// A timestamp's UTC calendar fields (proleptic Gregorian), for years 1–9999.
struct CivilTime {
    var year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64

    /// `nil` outside 0001-01-01T00:00:00Z … 9999-12-31T23:59:59.999Z.
    init?(_ timestamp: Timestamp) {
        let ms = timestamp.millisecondsSince1970
        // -62135596800000: 0001-01-01; 253402300800000: 10000-01-01.
        guard ms >= -62_135_596_800_000, ms < 253_402_300_800_000 else { return nil }
        let seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
        let days = seconds >= 0 ? seconds / 86_400 : -((-seconds + 86_399) / 86_400)
        let secondOfDay = seconds - days * 86_400
        hour = secondOfDay / 3600
        minute = secondOfDay % 3600 / 60
        second = secondOfDay % 60
        (year, month, day) = Timestamp.civilDate(days: days)
    }
}
