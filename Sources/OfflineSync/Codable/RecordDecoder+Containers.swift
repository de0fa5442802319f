import Foundation

/// The `Decoder` behind ``RecordDecoder``: a view of one value at one coding path.
struct RecordDecoding: Decoder {
    let value: Value
    let codingPath: [any CodingKey]
    let sendableUserInfo: [CodingUserInfoKey: any Sendable]

    init(value: Value, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: any Sendable]) {
        self.value = value
        self.codingPath = codingPath
        self.sendableUserInfo = userInfo
    }

    var userInfo: [CodingUserInfoKey: Any] { sendableUserInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        switch value {
        case .object(let object):
            return KeyedDecodingContainer(RecordKeyedDecodingContainer<Key>(object: object, decoder: self, codingPath: codingPath))
        case .null:
            throw DecodingError.valueNotFound(
                KeyedDecodingContainer<Key>.self,
                .init(codingPath: codingPath, debugDescription: "Cannot get a keyed decoding container: found null instead.")
            )
        default:
            throw DecodingError.typeMismatch(
                [String: Value].self,
                .init(codingPath: codingPath, debugDescription: "Expected an object (keyed container) but found \(value.kind.withArticle) instead.")
            )
        }
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        switch value {
        case .array(let items):
            return RecordUnkeyedDecodingContainer(items: items, decoder: self, codingPath: codingPath)
        case .null:
            throw DecodingError.valueNotFound(
                (any UnkeyedDecodingContainer).self,
                .init(codingPath: codingPath, debugDescription: "Cannot get an unkeyed decoding container: found null instead.")
            )
        default:
            throw DecodingError.typeMismatch(
                [Value].self,
                .init(codingPath: codingPath, debugDescription: "Expected an array (unkeyed container) but found \(value.kind.withArticle) instead.")
            )
        }
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        RecordSingleValueDecodingContainer(value: value, decoder: self, codingPath: codingPath)
    }

    // MARK: Values

    /// A `valueNotFound` for `.null`, a `typeMismatch` for any other kind.
    static func mismatch(_ type: Any.Type, found value: Value, at path: [any CodingKey]) -> DecodingError {
        if value.isNull {
            return .valueNotFound(type, .init(codingPath: path, debugDescription: "Expected \(type) but found null instead."))
        }
        return .typeMismatch(type, .init(codingPath: path, debugDescription: "Expected \(type) but found \(value.kind.withArticle) instead."))
    }

    static func corrupted(_ path: [any CodingKey], _ description: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: path, debugDescription: description))
    }

    func bool(_ value: Value, at path: @autoclosure () -> [any CodingKey]) throws -> Bool {
        guard case .bool(let bool) = value else { throw Self.mismatch(Bool.self, found: value, at: path()) }
        return bool
    }

    func string(_ value: Value, at path: @autoclosure () -> [any CodingKey]) throws -> String {
        guard case .string(let string) = value else { throw Self.mismatch(String.self, found: value, at: path()) }
        return string
    }

    func double(_ value: Value, at path: @autoclosure () -> [any CodingKey]) throws -> Double {
        switch value {
        case .double(let double): return double
        case .int(let int):
            guard let double = Double(exactly: int) else {
                throw Self.corrupted(path(), "Stored integer cannot be represented exactly as a Double.")
            }
            return double
        default: throw Self.mismatch(Double.self, found: value, at: path())
        }
    }

    func float(_ value: Value, at path: @autoclosure () -> [any CodingKey]) throws -> Float {
        switch value {
        case .double(let double):
            if double.isFinite, abs(double) > Double(Float.greatestFiniteMagnitude) {
                throw Self.corrupted(path(), "Stored number does not fit in Float.")
            }
            return Float(double)
        case .int(let int):
            guard let float = Float(exactly: int) else {
                throw Self.corrupted(path(), "Stored integer cannot be represented exactly as a Float.")
            }
            return float
        default: throw Self.mismatch(Float.self, found: value, at: path())
        }
    }

    func integer<I: FixedWidthInteger>(_ value: Value, at path: @autoclosure () -> [any CodingKey]) throws -> I {
        // A record id is a string; a model with an integer id reads its digits back.
        if case .string(let text) = value, let key = path().first, path().count == 1, key.stringValue == SystemField.id,
           let number = I(text, radix: 10) {
            return number
        }
        switch value {
        case .int(let int):
            guard let result = I(exactly: int) else {
                throw Self.corrupted(path(), "Stored integer does not fit in \(I.self).")
            }
            return result
        case .double(let double):
            guard double.isFinite, double == double.rounded(.towardZero) else {
                throw Self.corrupted(path(), "Stored number is not a whole number, so it cannot be decoded as \(I.self).")
            }
            guard let result = I(exactly: double) else {
                throw Self.corrupted(path(), "Stored number does not fit in \(I.self).")
            }
            return result
        default: throw Self.mismatch(I.self, found: value, at: path())
        }
    }

    /// Decodes any decodable type. Types with a record kind of their own are read here;
    /// everything else decodes itself from a child decoder.
    func unbox<T: Decodable>(_ type: T.Type, from value: Value, at path: @autoclosure () -> [any CodingKey]) throws -> T {
        if T.self == Value.self { return value as! T }
        if T.self == String.self { return try string(value, at: path()) as! T }
        if T.self == Int.self { return try integer(value, at: path()) as Int as! T }
        if T.self == Int64.self { return try integer(value, at: path()) as Int64 as! T }
        if T.self == Double.self { return try double(value, at: path()) as! T }
        if T.self == Bool.self { return try bool(value, at: path()) as! T }
        if T.self == Date.self {
            guard case .date(let timestamp) = value else { throw Self.mismatch(Date.self, found: value, at: path()) }
            return timestamp.date as! T
        }
        if T.self == Timestamp.self {
            guard case .date(let timestamp) = value else { throw Self.mismatch(Timestamp.self, found: value, at: path()) }
            return timestamp as! T
        }
        if T.self == Data.self {
            guard case .bytes(let bytes) = value else { throw Self.mismatch(Data.self, found: value, at: path()) }
            return Data(bytes) as! T
        }
        if T.self == [UInt8].self, case .bytes(let bytes) = value {
            return bytes as! T
        }
        if T.self == URL.self {
            let string = try string(value, at: path())
            guard let url = URL(string: string) else { throw Self.corrupted(path(), "Stored string is not a valid URL.") }
            return url as! T
        }
        if T.self == UUID.self {
            let string = try string(value, at: path())
            guard let uuid = UUID(uuidString: string) else { throw Self.corrupted(path(), "Stored string is not a valid UUID.") }
            return uuid as! T
        }
        return try T(from: RecordDecoding(value: value, codingPath: path(), userInfo: sendableUserInfo))
    }
}

// MARK: - Keyed

struct RecordKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: [String: Value]
    let decoder: RecordDecoding
    let codingPath: [any CodingKey]

    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    private func path(_ key: any CodingKey) -> [any CodingKey] { codingPath + [key] }

    private func value(_ key: Key) throws -> Value {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "No value associated with key \"\(key.stringValue)\".")
            )
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { try value(key).isNull }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.bool(value(key), at: path(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.string(value(key), at: path(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.double(value(key), at: path(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.float(value(key), at: path(key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder.integer(value(key), at: path(key)) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.integer(value(key), at: path(key)) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.integer(value(key), at: path(key)) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 { try decoder.integer(value(key), at: path(key)) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.unbox(T.self, from: value(key), at: path(key))
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try child(try value(key), key).container(keyedBy: NestedKey.self)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(try value(key), key).unkeyedContainer()
    }

    /// Like `JSONDecoder`, a missing `super` key gives a decoder over null rather than throwing.
    func superDecoder() throws -> any Decoder {
        child(object[RecordCodingKey.super.stringValue] ?? .null, RecordCodingKey.super)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        child(object[key.stringValue] ?? .null, key)
    }

    private func child(_ value: Value, _ key: any CodingKey) -> RecordDecoding {
        RecordDecoding(value: value, codingPath: path(key), userInfo: decoder.sendableUserInfo)
    }
}

// MARK: - Unkeyed

struct RecordUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let items: [Value]
    let decoder: RecordDecoding
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(items: [Value], decoder: RecordDecoding, codingPath: [any CodingKey]) {
        self.items = items
        self.decoder = decoder
        self.codingPath = codingPath
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    private var currentPath: [any CodingKey] { codingPath + [RecordCodingKey(index: currentIndex)] }

    /// The current element; throws `valueNotFound` at the end.
    private func current(_ type: Any.Type) throws -> Value {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type, .init(codingPath: currentPath, debugDescription: "Unkeyed container is at end.")
            )
        }
        return items[currentIndex]
    }

    /// Moves past the current element once it decoded.
    private mutating func advance<T>(_ result: T) -> T {
        currentIndex += 1
        return result
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any?.self, .init(codingPath: currentPath, debugDescription: "Unkeyed container is at end.")
            )
        }
        guard items[currentIndex].isNull else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { advance(try decoder.bool(current(type), at: currentPath)) }
    mutating func decode(_ type: String.Type) throws -> String { advance(try decoder.string(current(type), at: currentPath)) }
    mutating func decode(_ type: Double.Type) throws -> Double { advance(try decoder.double(current(type), at: currentPath)) }
    mutating func decode(_ type: Float.Type) throws -> Float { advance(try decoder.float(current(type), at: currentPath)) }
    mutating func decode(_ type: Int.Type) throws -> Int { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { advance(try decoder.integer(current(type), at: currentPath)) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    mutating func decode(_ type: Int128.Type) throws -> Int128 { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { advance(try decoder.integer(current(type), at: currentPath)) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { advance(try decoder.integer(current(type), at: currentPath)) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    mutating func decode(_ type: UInt128.Type) throws -> UInt128 { advance(try decoder.integer(current(type), at: currentPath)) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let result = try decoder.unbox(T.self, from: current(type), at: currentPath)
        currentIndex += 1
        return result
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let result = try child(current(KeyedDecodingContainer<NestedKey>.self)).container(keyedBy: NestedKey.self)
        currentIndex += 1
        return result
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let result = try child(current((any UnkeyedDecodingContainer).self)).unkeyedContainer()
        currentIndex += 1
        return result
    }

    mutating func superDecoder() throws -> any Decoder {
        let result = try child(current((any Decoder).self))
        currentIndex += 1
        return result
    }

    private func child(_ value: Value) -> RecordDecoding {
        RecordDecoding(value: value, codingPath: currentPath, userInfo: decoder.sendableUserInfo)
    }
}

// MARK: - Single value

struct RecordSingleValueDecodingContainer: SingleValueDecodingContainer {
    let value: Value
    let decoder: RecordDecoding
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.bool(value, at: codingPath) }
    func decode(_ type: String.Type) throws -> String { try decoder.string(value, at: codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try decoder.double(value, at: codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try decoder.float(value, at: codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try decoder.integer(value, at: codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(value, at: codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(value, at: codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(value, at: codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(value, at: codingPath) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    func decode(_ type: Int128.Type) throws -> Int128 { try decoder.integer(value, at: codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(value, at: codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(value, at: codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(value, at: codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(value, at: codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(value, at: codingPath) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    func decode(_ type: UInt128.Type) throws -> UInt128 { try decoder.integer(value, at: codingPath) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try decoder.unbox(T.self, from: value, at: codingPath)
    }
}
