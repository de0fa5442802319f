import Foundation

/// Encodes an `Encodable` value, usually a ``SyncModel``, into a ``Record``.
///
/// This is a real `Encoder`, not a JSON round trip, so every value keeps its exact kind:
///
/// | Swift type | Record value |
/// |---|---|
/// | `Bool` | ``Value/bool(_:)`` |
/// | `Int`, `Int8`…`Int64`, `UInt`, `UInt8`…`UInt64` (and `Int128`/`UInt128`) | ``Value/int(_:)``; a value outside `Int64` throws |
/// | `Float`, `Double` | ``Value/double(_:)``; NaN throws (no store keeps it) |
/// | `String` | ``Value/string(_:)`` |
/// | `Data` | ``Value/bytes(_:)`` |
/// | `[UInt8]` | an array of ints (`Codable` cannot tell it from any other array) |
/// | `Date` | ``Value/date(_:)``, to the millisecond: the sub-millisecond part is dropped |
/// | ``Timestamp`` | ``Value/date(_:)`` |
/// | `URL` | ``Value/string(_:)`` of its `absoluteString` |
/// | `UUID` | ``Value/string(_:)`` of its `uuidString` |
/// | ``Value`` | itself |
/// | structs, classes, `[String: T]` | ``Value/object(_:)`` |
/// | arrays, sets | ``Value/array(_:)`` |
/// | `nil` (`Optional`) | no field at the top level (synthesized `Codable` skips the key); `.null` inside arrays |
///
/// Enums with a raw value encode as the raw value; enums with associated values use
/// synthesized `Codable`'s nested objects. Dictionaries whose keys are neither `String`
/// nor `Int` (nor `CodingKeyRepresentable`) encode as arrays of alternating keys and
/// values, as `Codable` does everywhere. Any other type uses its own `Codable` representation.
///
/// At the top level the value must encode as a keyed container (an object). Its key `id`
/// becomes ``Record/id`` and must be a `String`; `version` (a `String`), `updatedAt` (a
/// `Date` or ``Timestamp``) and `deleted` (a `Bool`) become the system properties when
/// present; every other key becomes a field, and must be a valid field name
/// (see ``Names/validateField(_:)``).
///
/// Failures throw `EncodingError.invalidValue` with the coding path of the offending
/// value. Neither the error's description nor its payload carries the value itself: the
/// payload is a ``RedactedValue`` naming only the type, because record contents may be private.
public struct RecordEncoder: Sendable {
    /// Contextual information handed to the values' `encode(to:)` through `Encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates an encoder.
    public init() {}

    /// Encodes `value` into a record.
    ///
    /// - Throws: `EncodingError.invalidValue` when the value does not encode as an object,
    ///   has no `id` or a non-`String` one, has a system property of the wrong type, uses an
    ///   invalid field name, or holds a value no record can keep (an integer outside
    ///   `Int64`, a NaN, a date outside the range of ``Timestamp``); any error the value's
    ///   own `encode(to:)` throws.
    public func encode<T: Encodable>(_ value: T) throws -> Record {
        let encoder = RecordEncoding(node: EncodingNode(), codingPath: [], userInfo: userInfo)
        guard case .object(var object) = try encoder.box(value, at: []) else {
            throw EncodingError.invalidValue(
                RedactedValue(T.self),
                .init(codingPath: [], debugDescription: "\(T.self) must encode as a keyed container (an object with an 'id' key) to become a Record.")
            )
        }

        guard let idValue = object.removeValue(forKey: SystemField.id) else {
            throw EncodingError.invalidValue(
                RedactedValue(T.self),
                .init(codingPath: [], debugDescription: "\(T.self) encoded no 'id' key; a Record needs a String id.")
            )
        }
        let id: String
        switch idValue {
        case .string(let string): id = string
        // An integer id (`Int`, `Int64`…) is kept as its digits.
        case .int(let number): id = String(number)
        default: throw Self.systemPropertyError(RecordCodingKey.id, expected: "a String or an integer", found: idValue)
        }

        var version: String?
        switch object.removeValue(forKey: SystemField.version) {
        case nil, .null?: version = nil
        case .string(let string)?: version = string
        case let other?: throw Self.systemPropertyError(RecordCodingKey.version, expected: "a String", found: other)
        }

        var updatedAt: Timestamp?
        switch object.removeValue(forKey: SystemField.updatedAt) {
        case nil, .null?: updatedAt = nil
        case .date(let timestamp)?: updatedAt = timestamp
        case let other?:
            throw Self.systemPropertyError(RecordCodingKey.updatedAt, expected: "a Date or Timestamp", found: other)
        }

        var deleted = false
        switch object.removeValue(forKey: SystemField.deleted) {
        case nil, .null?: deleted = false
        case .bool(let flag)?: deleted = flag
        case let other?: throw Self.systemPropertyError(RecordCodingKey.deleted, expected: "a Bool", found: other)
        }

        for key in object.keys {
            do {
                try Names.validateField(key)
            } catch let error as SyncError {
                throw EncodingError.invalidValue(
                    RedactedValue(kind: object[key]?.kind ?? .null),
                    .init(codingPath: [RecordCodingKey(stringValue: key)],
                          debugDescription: "Invalid field name: \(error.message).", underlyingError: error)
                )
            }
        }
        return Record(id: id, fields: object, version: version, updatedAt: updatedAt, deleted: deleted)
    }

    private static func systemPropertyError(_ key: RecordCodingKey, expected: String, found: Value) -> EncodingError {
        EncodingError.invalidValue(
            RedactedValue(kind: found.kind),
            .init(codingPath: [key], debugDescription: "The '\(key.stringValue)' key must encode as \(expected), but it encoded as \(found.kind.withArticle).")
        )
    }

    /// Stands in for a value in an `EncodingError.invalidValue`, so that printing or logging
    /// the error never reveals record contents. It names only the value's type.
    public struct RedactedValue: Sendable, Hashable, CustomStringConvertible {
        /// The name of the rejected value's Swift type, or of its record value kind.
        public let typeName: String

        init(_ type: Any.Type) { typeName = String(describing: type) }
        init(kind: ValueKind) { typeName = "Value.\(kind.rawValue)" }

        /// `<redacted TypeName>`.
        public var description: String { "<redacted \(typeName)>" }
    }
}
