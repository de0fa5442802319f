import Foundation

/// A point in time with millisecond precision, stored as milliseconds since 1970-01-01 UTC.
///
/// Sync systems exchange timestamps at millisecond precision; keeping the integer makes
/// every store round-trip a date exactly, which a `Date` (a `Double` of seconds) cannot promise.
public struct Timestamp: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z (negative before it).
    public var millisecondsSince1970: Int64

    /// Creates a timestamp from milliseconds since 1970.
    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// Creates a timestamp from a `Date`, dropping anything finer than a millisecond.
    ///
    /// A date that is a whole millisecond (up to the error of `Double` arithmetic) maps to
    /// exactly that millisecond; `Date(timeIntervalSince1970: 0.999)` is 999 ms, not 998.
    /// Dates beyond the range of `Int64` milliseconds are clamped to it.
    public init(_ date: Date) {
        let scaled = date.timeIntervalSince1970 * 1000
        guard scaled.isFinite else {
            self.millisecondsSince1970 = scaled < 0 ? .min : .max
            return
        }
        let nearest = scaled.rounded()
        let chosen = abs(scaled - nearest) < 1e-3 ? nearest : scaled.rounded(.down)
        if chosen >= 9_223_372_036_854_775_808.0 {
            self.millisecondsSince1970 = .max
        } else if chosen < -9_223_372_036_854_775_808.0 {
            self.millisecondsSince1970 = .min
        } else {
            self.millisecondsSince1970 = Int64(chosen)
        }
    }

    /// The current time, to the millisecond.
    public static func now() -> Timestamp { Timestamp(Date()) }

    /// The same instant as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1000) }

    /// Orders timestamps chronologically.
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// ISO 8601 with milliseconds, in UTC.
    public var description: String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}

/// A field value of a record.
///
/// Equality is exact: strings compare by their UTF-8 bytes (no Unicode normalisation),
/// doubles by value with `-0.0` and `0.0` told apart by sign, so a store that changes a
/// value in any way fails the conformance suite. `Double.nan` is not a valid value:
/// stores reject it with ``SyncError/Code/invalidValue``.
public enum Value: Sendable {
    /// The absence of a value. A top-level field set to `null` is the same as a missing field.
    case null
    /// A boolean.
    case bool(Bool)
    /// A 64-bit signed integer.
    case int(Int64)
    /// A 64-bit IEEE double (never NaN).
    case double(Double)
    /// A Unicode string, kept byte for byte.
    case string(String)
    /// Raw bytes.
    case bytes([UInt8])
    /// A date with millisecond precision.
    case date(Timestamp)
    /// An ordered list of values.
    case array([Value])
    /// A map from string keys to values.
    case object([String: Value])
}

extension Value: Hashable {
    /// Exact equality: see the type's documentation.
    public static func == (lhs: Value, rhs: Value) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern || (a.isNaN && b.isNaN)
        case let (.string(a), .string(b)): return ExactString.sameBytes(a, b)
        case let (.bytes(a), .bytes(b)): return a == b
        case let (.date(a), .date(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            guard a.count == b.count else { return false }
            for (key, value) in a {
                // Swift's String equality is canonical equivalence; demand identical bytes too.
                guard let index = b.index(forKey: key) else { return false }
                let (otherKey, otherValue) = b[index]
                guard ExactString.sameBytes(otherKey, key), otherValue == value else { return false }
            }
            return true
        default: return false
        }
    }

    /// Hashes consistently with `==`.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let v): hasher.combine(1); hasher.combine(v)
        case .int(let v): hasher.combine(2); hasher.combine(v)
        case .double(let v): hasher.combine(3); hasher.combine(v.bitPattern)
        case .string(let v): hasher.combine(4); hasher.combine(Array(v.utf8))
        case .bytes(let v): hasher.combine(5); hasher.combine(v)
        case .date(let v): hasher.combine(6); hasher.combine(v)
        case .array(let v): hasher.combine(7); hasher.combine(v)
        case .object(let v):
            hasher.combine(8)
            hasher.combine(v.count)
            for key in v.keys.sorted(by: Value.utf8Less) { hasher.combine(Array(key.utf8)) }
        }
    }

    /// Byte-wise (UTF-8, i.e. Unicode scalar) order of strings: the order SQL stores use.
    public static func utf8Less(_ a: String, _ b: String) -> Bool {
        // Native strings are contiguous UTF-8: compare in bulk.
        let fast: Bool?? = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                let common = Swift.min(x.count, y.count)
                let c = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
                return c != 0 ? c < 0 : x.count < y.count
            }
        }
        if let fast = fast ?? nil { return fast }
        return a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}

extension Value {
    /// The kind of this value, for schemas and error messages.
    public var kind: ValueKind {
        switch self {
        case .null: return .null
        case .bool: return .bool
        case .int: return .int
        case .double: return .double
        case .string: return .string
        case .bytes: return .bytes
        case .date: return .date
        case .array: return .array
        case .object: return .object
        }
    }

    /// `true` for `.null`.
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The string payload, if this is a string.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The integer payload, if this is an integer.
    public var intValue: Int64? { if case .int(let v) = self { return v } else { return nil } }
    /// The double payload, if this is a double.
    public var doubleValue: Double? { if case .double(let v) = self { return v } else { return nil } }
    /// The boolean payload, if this is a boolean.
    public var boolValue: Bool? { if case .bool(let v) = self { return v } else { return nil } }
    /// The date payload, if this is a date.
    public var dateValue: Timestamp? { if case .date(let v) = self { return v } else { return nil } }
    /// The bytes payload, if this is bytes.
    public var bytesValue: [UInt8]? { if case .bytes(let v) = self { return v } else { return nil } }
    /// The object payload, if this is an object.
    public var objectValue: [String: Value]? { if case .object(let v) = self { return v } else { return nil } }
    /// The array payload, if this is an array.
    public var arrayValue: [Value]? { if case .array(let v) = self { return v } else { return nil } }

    /// Throws ``SyncError/Code/invalidValue`` if the value (or a nested one) is a NaN double.
    public func validate(path: String) throws {
        // The common case, checked without building any path string.
        guard containsNaN else { return }
        try validateNaN(path: path)
    }

    /// Throws for the first NaN found, naming where it is.
    private func validateNaN(path: String) throws {
        switch self {
        case .double(let d) where d.isNaN:
            throw SyncError(.invalidValue, "field '\(path)' holds NaN, which no store can keep exactly")
        case .array(let items):
            for (index, item) in items.enumerated() { try item.validateNaN(path: "\(path)[\(index)]") }
        case .object(let object):
            for (key, item) in object { try item.validateNaN(path: "\(path).\(key)") }
        default: break
        }
    }
}

/// The kinds of ``Value``.
public enum ValueKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// ``Value/null``
    case null
    /// ``Value/bool(_:)``
    case bool
    /// ``Value/int(_:)``
    case int
    /// ``Value/double(_:)``
    case double
    /// ``Value/string(_:)``
    case string
    /// ``Value/bytes(_:)``
    case bytes
    /// ``Value/date(_:)``
    case date
    /// ``Value/array(_:)``
    case array
    /// ``Value/object(_:)``
    case object
}

extension Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    /// A string literal is a `.string`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal is an `.int`.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// A float literal is a `.double`.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A boolean literal is a `.bool`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `nil` is `.null`.
    public init(nilLiteral: ()) { self = .null }
    /// An array literal is an `.array`.
    public init(arrayLiteral elements: Value...) { self = .array(elements) }
    /// A dictionary literal is an `.object`.
    public init(dictionaryLiteral elements: (String, Value)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension Value: CustomStringConvertible {
    /// A short rendering for logs and the command line: `"text"`, `42`, `<12 bytes>`.
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let v): return String(v)
        case .int(let v): return String(v)
        case .double(let v): return String(v)
        case .string(let v): return "\"\(v)\""
        case .bytes(let v): return "<\(v.count) bytes>"
        case .date(let v): return v.description
        case .array(let v): return "[" + v.map(\.description).joined(separator: ", ") + "]"
        case .object(let v):
            return "{" + v.keys.sorted(by: Value.utf8Less).map { "\($0): \(v[$0]!.description)" }.joined(separator: ", ") + "}"
        }
    }
}
