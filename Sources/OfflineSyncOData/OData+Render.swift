import Foundation
import OfflineSync
import OfflineSyncWire

/// Writes predicates back as OData `$filter` text for ``ODataQuery/queryString(skip:)``.
///
/// ``truth(_:)`` writes a filter that is true exactly where the predicate is true and
/// ``falsity(_:)`` one that is true exactly where it is false, so `not` needs no unknown. The
/// shapes ``ODataFilterParser`` produces are recognised first and written as the text that
/// parses back to them, so a parsed filter reads back unchanged.
enum ODataRenderer {
    /// Filter text and whether it is an `and` / `or` list (parenthesised inside another).
    struct Text {
        var text: String
        var isList = false

        var grouped: String { isList ? "(\(text))" : text }
    }

    static func filter(_ predicate: QueryPredicate) -> String { truth(predicate).text }

    static func join(_ parts: [Text], _ op: String) -> Text {
        Text(text: parts.map(\.grouped).joined(separator: " \(op) "), isList: true)
    }

    /// The call text of a substring test, or `nil` for another predicate.
    static func call(_ predicate: QueryPredicate) -> (text: String, field: String)? {
        switch predicate {
        case let .contains(f, s): return ("contains(\(f),\(literal(.string(s))))", f)
        case let .hasPrefix(f, s): return ("startswith(\(f),\(literal(.string(s))))", f)
        case let .hasSuffix(f, s): return ("endswith(\(f),\(literal(.string(s))))", f)
        default: return nil
        }
    }

    /// True exactly where the predicate is true.
    static func truth(_ predicate: QueryPredicate) -> Text {
        if let text = comparison(predicate, negated: false) { return Text(text: text) }
        switch predicate {
        case .all: return Text(text: "true")
        case .and(let parts):
            if parts.isEmpty { return Text(text: "true") }
            if let text = membership(parts) { return Text(text: text) }
            return parts.count == 1 ? truth(parts[0]) : join(parts.map(truth), "and")
        case .or(let parts):
            if parts.isEmpty { return Text(text: "false") }
            if let text = valueMembership(parts) { return Text(text: text) }
            if parts.count == 1 { return truth(parts[0]) }
            if parts.count == 2, case .isNull(let field) = parts[0], let text = nullOr(field, parts[1]) {
                return Text(text: text)
            }
            // `call(…) ne literal`, which the parser reads as "null, or set and different".
            if parts.count == 2, case .isNullExpression(let value) = parts[0], case .call = value,
               case .compareExpressions(value, .notEqual, .literal(let literal)) = parts[1], !literal.isNull {
                return Text(text: "\(expression(value)) ne \(self.literal(literal))")
            }
            return join(parts.map(truth), "or")
        case .not(let inner):
            return falsity(inner)
        case .isNull(let field):
            return Text(text: "\(field) eq null")
        case let .compare(field, op, value):
            if value.isNull { return Text(text: "false") }
            if op == .notEqual { return Text(text: "\(field) ne \(literal(value)) and \(field) ne null", isList: true) }
            return Text(text: "\(field) \(ODataFilterParser.name(op)) \(literal(value))")
        case let .isIn(field, values):
            let candidates = values.filter { !$0.isNull }
            if candidates.isEmpty { return Text(text: "false") }
            let parts = candidates.map { Text(text: "\(field) eq \(literal($0))") }
            return parts.count == 1 ? parts[0] : join(parts, "or")
        case .contains, .hasPrefix, .hasSuffix:
            return Text(text: call(predicate)?.text ?? "false")
        case let .compareExpressions(left, op, right):
            // A computed value against a literal: the parser's plain form, unknown (no match)
            // where the value is null, so it needs no guard.
            if case .call = left, case .literal(let value) = right, !value.isNull, op != .notEqual {
                return Text(text: "\(expression(left)) \(ODataFilterParser.name(op)) \(literal(value))")
            }
            return both(left, right, "\(expression(left)) \(ODataFilterParser.name(op)) \(expression(right))")
        case .isNullExpression(let inner):
            return Text(text: "\(expression(inner)) eq null")
        }
    }

    /// The text of a comparison of two values that the parser reads as exactly `predicate`
    /// (`negated`: as its negation): `left op right` where `predicate` is the never-unknown
    /// form ``ODataFilterParser/expressionTruth(_:_:_:)`` builds for it, which spells out
    /// OData's null rules. Writing that form out instead would read back as a larger one, and
    /// the filter would grow with every page's nextLink.
    static func comparison(_ predicate: QueryPredicate, negated: Bool) -> String? {
        switch predicate {
        case .and, .or, .not: break
        default: return nil
        }
        guard let (left, op, right) = innerComparison(predicate, depth: 4) else { return nil }
        func text(_ op: ComparisonOperator) -> String { "\(expression(left)) \(ODataFilterParser.name(op)) \(expression(right))" }
        switch op {
        case .equal:
            let equal = ODataFilterParser.expressionTruth(left, .equal, right)
            if predicate == equal { return text(negated ? .notEqual : .equal) }
            if predicate == .not(equal) { return text(negated ? .equal : .notEqual) }
            return nil
        default:
            guard predicate == ODataFilterParser.expressionTruth(left, op, right) else { return nil }
            return negated ? "not (\(text(op)))" : text(op)
        }
    }

    /// `value in (…)` for a computed value, which the parser reads as one never-unknown
    /// equality per listed literal; `nil` for other disjunctions.
    static func valueMembership(_ parts: [QueryPredicate]) -> String? {
        var value: QueryExpression?
        var literals: [Value] = []
        for part in parts {
            guard let (left, op, right) = innerComparison(part, depth: 3), op == .equal, case .literal(let literal) = right,
                  value == nil || value == left, part == ODataFilterParser.expressionTruth(left, .equal, right) else { return nil }
            if case .field = left { return nil }
            value = left
            literals.append(literal)
        }
        guard let value, !literals.isEmpty else { return nil }
        return "\(expression(value)) in (\(literals.map(literal).joined(separator: ",")))"
    }

    /// The first comparison of two values within `depth` levels of `and`, `or` and `not`.
    static func innerComparison(_ predicate: QueryPredicate, depth: Int) -> (QueryExpression, ComparisonOperator, QueryExpression)? {
        guard depth > 0 else { return nil }
        switch predicate {
        case let .compareExpressions(left, op, right): return (left, op, right)
        case .and(let parts), .or(let parts):
            for part in parts { if let found = innerComparison(part, depth: depth - 1) { return found } }
            return nil
        case .not(let inner): return innerComparison(inner, depth: depth - 1)
        default: return nil
        }
    }

    /// `field in (…)` for the shape the parser reads it as (set, and one of the values), or
    /// `nil` for other conjunctions.
    static func membership(_ parts: [QueryPredicate]) -> String? {
        guard parts.count == 2, case .not(.isNull(let field)) = parts[0], case .isIn(field, let values) = parts[1],
              !values.isEmpty, !values.contains(where: \.isNull) else { return nil }
        return "\(field) in (\(values.map(literal).joined(separator: ",")))"
    }

    /// `condition` where both values are set (OData compares nulls as values).
    static func both(_ left: QueryExpression, _ right: QueryExpression, _ condition: String) -> Text {
        var parts = [left, right].compactMap { side -> Text? in
            if case .literal(let value) = side, !value.isNull { return nil }
            return Text(text: "\(expression(side)) ne null")
        }
        parts.append(Text(text: condition))
        return parts.count == 1 ? parts[0] : join(parts, "and")
    }

    /// An expression as OData writes it.
    static func expression(_ expression: QueryExpression) -> String {
        switch expression {
        case .field(let name): return name
        case .literal(let value): return literal(value)
        case let .call(function, arguments):
            let operators: [QueryFunction: String] = [.add: "add", .subtract: "sub", .multiply: "mul", .divide: "div", .modulo: "mod"]
            if let op = operators[function], arguments.count == 2 {
                return "(\(self.expression(arguments[0])) \(op) \(self.expression(arguments[1])))"
            }
            let name = ODataFilterParser.valueFunctions.first { $0.value == function }?.key ?? function.rawValue
            return "\(name)(\(arguments.map { self.expression($0) }.joined(separator: ",")))"
        }
    }

    /// `field eq null or <predicate>` in the forms the parser produces for `ne` comparisons,
    /// negated comparisons and function calls compared with `ne`; `nil` for anything else.
    static func nullOr(_ field: String, _ predicate: QueryPredicate) -> String? {
        switch predicate {
        case let .compare(f, .notEqual, value) where f == field && !value.isNull:
            return "\(field) ne \(literal(value))"
        case let .not(.compare(f, op, value)) where f == field && !value.isNull && op != .equal && op != .notEqual:
            return "not (\(field) \(ODataFilterParser.name(op)) \(literal(value)))"
        case .not(let inner):
            guard let (text, f) = call(inner), f == field else { return nil }
            return "\(text) ne true"
        default:
            guard let (text, f) = call(predicate), f == field else { return nil }
            return "\(text) ne false"
        }
    }

    /// True exactly where the predicate is false.
    static func falsity(_ predicate: QueryPredicate) -> Text {
        if let text = comparison(predicate, negated: true) { return Text(text: text) }
        switch predicate {
        case .all: return Text(text: "false")
        case .and(let parts):
            if parts.isEmpty { return Text(text: "false") }
            return parts.count == 1 ? falsity(parts[0]) : join(parts.map(falsity), "or")
        case .or(let parts):
            if parts.isEmpty { return Text(text: "true") }
            if let text = valueMembership(parts) { return Text(text: "not (\(text))") }
            return parts.count == 1 ? falsity(parts[0]) : join(parts.map(falsity), "and")
        case .not(let inner):
            return truth(inner)
        case .isNull(let field):
            return Text(text: "\(field) ne null")
        case let .compare(field, op, value):
            if value.isNull { return Text(text: "false") }
            switch op {
            case .notEqual: return Text(text: "\(field) eq \(literal(value))")
            case .equal: return Text(text: "\(field) ne \(literal(value)) and \(field) ne null", isList: true)
            default: return Text(text: "\(field) ne null and not (\(field) \(ODataFilterParser.name(op)) \(literal(value)))", isList: true)
            }
        case let .isIn(field, values):
            if values.contains(where: \.isNull) { return Text(text: "false") }
            return join([Text(text: "\(field) ne null")] + values.map { Text(text: "\(field) ne \(literal($0))") }, "and")
        case .contains, .hasPrefix, .hasSuffix:
            return Text(text: "not " + (call(predicate)?.text ?? "true"))
        case let .compareExpressions(left, op, right):
            return both(left, right, "not (\(expression(left)) \(ODataFilterParser.name(op)) \(expression(right)))")
        case .isNullExpression(let inner):
            return Text(text: "\(expression(inner)) ne null")
        }
    }

    // MARK: Literals

    /// A literal as OData writes it, reading back to the same value.
    static func literal(_ value: Value) -> String {
        switch value {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .double(let d):
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d < 0 ? "-INF" : "INF" }
            return "\(d)"
        case .string(let s):
            // Doubled scalar by scalar, as the parser reads: a quote followed by a combining
            // mark is one Character, which a Character-wise replacement would leave single,
            // ending the literal early when the nextLink is read back.
            var quoted = String.UnicodeScalarView()
            for scalar in s.unicodeScalars {
                quoted.append(scalar)
                if scalar == "'" { quoted.append(scalar) }
            }
            return "'" + String(quoted) + "'"
        case .bytes(let b):
            let base64 = Data(b).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            return "binary'\(base64)'"
        case .date(let t): return WireDate.iso8601(t)
        case .array, .object: return "[unsupported literal]"
        }
    }

    // MARK: Query strings

    /// Percent-encodes everything but letters, digits and `-._~` (and `$`, for option names).
    static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "$"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 15)])
            }
        }
        return out
    }
}
