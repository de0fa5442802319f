import Foundation

/// Decodes a `Decodable` value, usually a ``SyncModel``, from a ``Record``.
///
/// The inverse of ``RecordEncoder`` (see its table for the mapping). The decoder sees the
/// record as one object: its fields, plus `id` (a string), `version` (a string, absent
/// when `nil`), `updatedAt` (a date, absent when `nil`) and `deleted` (a bool), so a model
/// reads the system properties by declaring those keys and ignores them otherwise.
///
/// Conversions are exact or refused:
/// - an integer decodes into any integer type that holds it; one that does not fit throws
///   `DecodingError.dataCorrupted`;
/// - a `Double`/`Float` property accepts an int that it represents exactly;
/// - an integer property accepts a double only when it is whole and in range;
/// - a `Float` property accepts a double inside `Float`'s range (rounded to the nearest `Float`);
/// - a `Date` or ``Timestamp`` property reads a date, `Data` reads bytes, `URL` and `UUID`
///   read strings (an unparsable string throws `DecodingError.dataCorrupted`), a
///   ``Value`` property reads any value as is, and `[UInt8]` reads bytes or an array of ints;
/// - `.null` decodes as `nil` for optionals.
///
/// Failures throw the `DecodingError` case `Codable` users expect — `keyNotFound`,
/// `valueNotFound` (a `.null` where a value is required), `typeMismatch` (another kind of
/// value) or `dataCorrupted` (a value that does not fit) — with the coding path of the
/// offending value. Descriptions name types and kinds, never the record's values.
public struct RecordDecoder: Sendable {
    /// Contextual information handed to the values' `init(from:)` through `Decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates a decoder.
    public init() {}

    /// Decodes a value of `type` from `record`.
    ///
    /// - Throws: `DecodingError` as described on the type; any error the type's own
    ///   `init(from:)` throws.
    public func decode<T: Decodable>(_ type: T.Type, from record: Record) throws -> T {
        var object = record.fields
        object[SystemField.id] = .string(record.id)
        if let version = record.version { object[SystemField.version] = .string(version) }
        if let updatedAt = record.updatedAt { object[SystemField.updatedAt] = .date(updatedAt) }
        object[SystemField.deleted] = .bool(record.deleted)
        let decoder = RecordDecoding(value: .object(object), codingPath: [], userInfo: userInfo)
        return try decoder.unbox(T.self, from: .object(object), at: [])
    }
}
