import Foundation

/// The coding key the record coders use for dictionary keys, array indices and `super`.
struct RecordCodingKey: CodingKey, Sendable {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }

    /// The key of an array element, spelled as Foundation's coders spell it.
    init(index: Int) {
        self.stringValue = "Index \(index)"
        self.intValue = index
    }

    static let `super` = RecordCodingKey(stringValue: "super")
    static let id = RecordCodingKey(stringValue: SystemField.id)
    static let version = RecordCodingKey(stringValue: SystemField.version)
    static let updatedAt = RecordCodingKey(stringValue: SystemField.updatedAt)
    static let deleted = RecordCodingKey(stringValue: SystemField.deleted)
}

extension ValueKind {
    /// "a string", "an int", "bytes"… for error descriptions (never the value itself).
    var withArticle: String {
        switch self {
        case .null, .bytes: return rawValue
        case .int, .object, .array: return "an \(rawValue)"
        case .bool, .double, .string, .date: return "a \(rawValue)"
        }
    }
}

extension Timestamp {
    /// The millisecond of `date`, or `nil` when it lies outside the range of ``Timestamp``.
    ///
    /// A `Date` is a `Double` of seconds, so the date of a whole millisecond is often a hair
    /// below it (`…122.99999`). A date that is the `Date` of a whole millisecond, or lies
    /// within a microsecond of one, is taken as that millisecond; any other date loses its
    /// sub-millisecond part (it is rounded down, towards the past).
    init?(coding date: Date) {
        let scaled = date.timeIntervalSince1970 * 1000
        // 2^63 is exactly representable; every Double below it converts to Int64 without trapping.
        guard scaled.isFinite, scaled >= -9_223_372_036_854_775_808.0, scaled < 9_223_372_036_854_775_808.0 else {
            return nil
        }
        self.init(date)
    }
}

extension Value {
    /// `true` if this value or a nested one is a NaN double.
    var containsNaN: Bool {
        switch self {
        case .double(let d): return d.isNaN
        case .array(let items): return items.contains { $0.containsNaN }
        case .object(let object): return object.values.contains { $0.containsNaN }
        default: return false
        }
    }
}
