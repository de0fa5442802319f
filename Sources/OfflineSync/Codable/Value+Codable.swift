import Foundation

/// `Value` is `Codable` so that models can hold untyped parts, such as a `[String: Value]`
/// property or a `Value?` field.
///
/// With ``RecordEncoder`` and ``RecordDecoder`` a value passes through unchanged, every
/// kind kept. With any other coder (`JSONEncoder`, `PropertyListEncoder`…) it uses the
/// natural shape: `null`, booleans, numbers, strings, arrays and string-keyed objects;
/// bytes encode as `Data` and dates as `Date`, following that coder's strategies. Such
/// formats cannot tell every kind apart, so decoding from them infers the kind: a whole
/// number becomes an ``Value/int(_:)``, any other number a ``Value/double(_:)``, and bytes and
/// dates come back as whatever their strategy produced (a base64 string, a number…).
extension Value: Codable {
    /// Encodes the value: see the extension's documentation.
    ///
    /// - Throws: whatever the encoder throws (for example for a NaN in `JSONEncoder`).
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let bool):
            var container = encoder.singleValueContainer()
            try container.encode(bool)
        case .int(let int):
            var container = encoder.singleValueContainer()
            try container.encode(int)
        case .double(let double):
            var container = encoder.singleValueContainer()
            try container.encode(double)
        case .string(let string):
            var container = encoder.singleValueContainer()
            try container.encode(string)
        case .bytes(let bytes):
            var container = encoder.singleValueContainer()
            try container.encode(Data(bytes))
        case .date(let timestamp):
            var container = encoder.singleValueContainer()
            try container.encode(timestamp.date)
        case .array(let items):
            var container = encoder.unkeyedContainer()
            for item in items { try container.encode(item) }
        case .object(let object):
            var container = encoder.container(keyedBy: RecordCodingKey.self)
            for (key, item) in object { try container.encode(item, forKey: RecordCodingKey(stringValue: key)) }
        }
    }

    /// Decodes a value: exactly from ``RecordDecoder``, by inference from other decoders.
    ///
    /// - Throws: `DecodingError.dataCorrupted` when the input is none of the shapes above.
    public init(from decoder: any Decoder) throws {
        if let recordDecoder = decoder as? RecordDecoding {
            self = recordDecoder.value
            return
        }
        if let container = try? decoder.singleValueContainer() {
            if container.decodeNil() { self = .null; return }
            if let bool = try? container.decode(Bool.self) { self = .bool(bool); return }
            if let int = try? container.decode(Int64.self) { self = .int(int); return }
            if let double = try? container.decode(Double.self) { self = .double(double); return }
            if let string = try? container.decode(String.self) { self = .string(string); return }
        }
        if let container = try? decoder.container(keyedBy: RecordCodingKey.self) {
            var object: [String: Value] = [:]
            for key in container.allKeys { object[key.stringValue] = try container.decode(Value.self, forKey: key) }
            self = .object(object)
            return
        }
        if var container = try? decoder.unkeyedContainer() {
            var items: [Value] = []
            if let count = container.count { items.reserveCapacity(count) }
            while !container.isAtEnd { items.append(try container.decode(Value.self)) }
            self = .array(items)
            return
        }
        throw DecodingError.dataCorrupted(
            .init(codingPath: decoder.codingPath, debugDescription: "Expected null, a boolean, a number, a string, an array or an object.")
        )
    }
}
