import Foundation

/// What one `Encoder` wrote. A reference, so a nested container or a `superEncoder` can
/// keep writing into its parent's slot after the parent's `encode` call returned.
final class EncodingNode {
    enum Kind { case empty, single, keyed, unkeyed }
    var kind: Kind = .empty
    var single: Value = .null
    var keyed: [String: Slot] = [:]
    var unkeyed: [Slot] = []

    /// A finished value, or a node still open to nested containers.
    enum Slot {
        case value(Value)
        case node(EncodingNode)

        var resolved: Value {
            switch self {
            case .value(let value): return value
            case .node(let node): return node.resolved
            }
        }
    }

    /// The value written so far. A value that wrote nothing is an empty object, as in `JSONEncoder`.
    var resolved: Value {
        switch kind {
        case .empty: return .object([:])
        case .single: return single
        case .keyed: return .object(keyed.mapValues(\.resolved))
        case .unkeyed: return .array(unkeyed.map(\.resolved))
        }
    }

    func becomeKeyed() {
        switch kind {
        case .empty: kind = .keyed
        case .keyed: break
        case .single, .unkeyed:
            preconditionFailure("Attempt to get a keyed encoding container after a \(kind) container encoded a value.")
        }
    }

    func becomeUnkeyed() {
        switch kind {
        case .empty: kind = .unkeyed
        case .unkeyed: break
        case .single, .keyed:
            preconditionFailure("Attempt to get an unkeyed encoding container after a \(kind) container encoded a value.")
        }
    }

    func setSingle(_ value: Value) {
        switch kind {
        case .empty, .single:
            kind = .single
            single = value
        case .keyed, .unkeyed:
            preconditionFailure("Attempt to encode a single value after a \(kind) container encoded values.")
        }
    }
}

/// The `Encoder` behind ``RecordEncoder``.
struct RecordEncoding: Encoder {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    let sendableUserInfo: [CodingUserInfoKey: any Sendable]

    init(node: EncodingNode, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: any Sendable]) {
        self.node = node
        self.codingPath = codingPath
        self.sendableUserInfo = userInfo
    }

    var userInfo: [CodingUserInfoKey: Any] { sendableUserInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.becomeKeyed()
        return KeyedEncodingContainer(RecordKeyedEncodingContainer<Key>(node: node, encoder: self, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.becomeUnkeyed()
        return RecordUnkeyedEncodingContainer(node: node, encoder: self, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        RecordSingleValueEncodingContainer(node: node, encoder: self, codingPath: codingPath)
    }

    // MARK: Values

    /// The record value of any encodable value. Types with a record kind of their own are
    /// recognised here; everything else encodes itself into a child encoder.
    func box<T: Encodable>(_ value: T, at path: @autoclosure () -> [any CodingKey]) throws -> Value {
        // Metatype comparisons are far cheaper than a chain of dynamic casts.
        if T.self == String.self { return .string(value as! String) }
        if T.self == Int.self { return .int(Int64(value as! Int)) }
        if T.self == Int64.self { return .int(value as! Int64) }
        if T.self == Double.self { return try double(value as! Double, at: path()) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        if T.self == Value.self {
            let value = value as! Value
            if value.containsNaN { throw Self.nanError(Value.self, at: path()) }
            return value
        }
        if T.self == Date.self {
            guard let timestamp = Timestamp(coding: value as! Date) else {
                throw EncodingError.invalidValue(
                    RecordEncoder.RedactedValue(Date.self),
                    .init(codingPath: path(), debugDescription: "Date is outside the range of a millisecond Timestamp.")
                )
            }
            return .date(timestamp)
        }
        if T.self == Timestamp.self { return .date(value as! Timestamp) }
        if T.self == Data.self { return .bytes([UInt8](value as! Data)) }
        if T.self == URL.self { return .string((value as! URL).absoluteString) }
        if T.self == UUID.self { return .string((value as! UUID).uuidString) }
        let child = EncodingNode()
        try value.encode(to: RecordEncoding(node: child, codingPath: path(), userInfo: sendableUserInfo))
        return child.resolved
    }

    func integer<I: BinaryInteger>(_ value: I, at path: @autoclosure () -> [any CodingKey]) throws -> Value {
        guard let int = Int64(exactly: value) else {
            throw EncodingError.invalidValue(
                RecordEncoder.RedactedValue(I.self),
                .init(codingPath: path(), debugDescription: "\(I.self) value does not fit in a 64-bit signed integer, the widest integer a record holds.")
            )
        }
        return .int(int)
    }

    func double(_ value: Double, at path: @autoclosure () -> [any CodingKey]) throws -> Value {
        if value.isNaN { throw Self.nanError(Double.self, at: path()) }
        return .double(value)
    }

    func float(_ value: Float, at path: @autoclosure () -> [any CodingKey]) throws -> Value {
        if value.isNaN { throw Self.nanError(Float.self, at: path()) }
        return .double(Double(value))
    }

    static func nanError(_ type: Any.Type, at path: [any CodingKey]) -> EncodingError {
        EncodingError.invalidValue(
            RecordEncoder.RedactedValue(type),
            .init(codingPath: path, debugDescription: "NaN cannot be stored in a record: no store keeps it exactly.")
        )
    }
}

// MARK: - Keyed

struct RecordKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    let encoder: RecordEncoding
    let codingPath: [any CodingKey]

    private func set(_ value: Value, _ key: Key) { node.keyed[key.stringValue] = .value(value) }
    private func path(_ key: any CodingKey) -> [any CodingKey] { codingPath + [key] }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(try encoder.double(value, at: path(key)), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(try encoder.float(value, at: path(key)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(.int(value), key) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    mutating func encode(_ value: Int128, forKey key: Key) throws { set(try encoder.integer(value, at: path(key)), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(try encoder.integer(value, at: path(key)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(try encoder.integer(value, at: path(key)), key) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    mutating func encode(_ value: UInt128, forKey key: Key) throws { set(try encoder.integer(value, at: path(key)), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(try encoder.box(value, at: path(key)), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let child = childNode(forKey: key.stringValue) { $0 == .keyed }
        child.becomeKeyed()
        return KeyedEncodingContainer(RecordKeyedEncodingContainer<NestedKey>(
            node: child, encoder: encoder, codingPath: path(key)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = childNode(forKey: key.stringValue) { $0 == .unkeyed }
        child.becomeUnkeyed()
        return RecordUnkeyedEncodingContainer(node: child, encoder: encoder, codingPath: path(key))
    }

    mutating func superEncoder() -> any Encoder {
        superEncoder(key: RecordCodingKey.super)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        superEncoder(key: key)
    }

    private func superEncoder(key: any CodingKey) -> any Encoder {
        let child = EncodingNode()
        node.keyed[key.stringValue] = .node(child)
        return RecordEncoding(node: child, codingPath: path(key), userInfo: encoder.sendableUserInfo)
    }

    /// The open node at `key` if it already is of the wanted kind (asking twice for the same
    /// nested container is allowed), else a fresh one that replaces whatever was there.
    private func childNode(forKey key: String, reuseIf isWanted: (EncodingNode.Kind) -> Bool) -> EncodingNode {
        if case .node(let existing)? = node.keyed[key], isWanted(existing.kind) { return existing }
        let child = EncodingNode()
        node.keyed[key] = .node(child)
        return child
    }
}

// MARK: - Unkeyed

struct RecordUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let node: EncodingNode
    let encoder: RecordEncoding
    let codingPath: [any CodingKey]

    var count: Int { node.unkeyed.count }

    private func append(_ value: Value) { node.unkeyed.append(.value(value)) }
    private var nextPath: [any CodingKey] { codingPath + [RecordCodingKey(index: count)] }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(try encoder.double(value, at: nextPath)) }
    mutating func encode(_ value: Float) throws { append(try encoder.float(value, at: nextPath)) }
    mutating func encode(_ value: Int) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { append(.int(value)) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    mutating func encode(_ value: Int128) throws { append(try encoder.integer(value, at: nextPath)) }
    mutating func encode(_ value: UInt) throws { append(try encoder.integer(value, at: nextPath)) }
    mutating func encode(_ value: UInt8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { append(try encoder.integer(value, at: nextPath)) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    mutating func encode(_ value: UInt128) throws { append(try encoder.integer(value, at: nextPath)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        append(try encoder.box(value, at: nextPath))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        let child = EncodingNode()
        child.becomeKeyed()
        node.unkeyed.append(.node(child))
        return KeyedEncodingContainer(RecordKeyedEncodingContainer<NestedKey>(node: child, encoder: encoder, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let child = EncodingNode()
        child.becomeUnkeyed()
        node.unkeyed.append(.node(child))
        return RecordUnkeyedEncodingContainer(node: child, encoder: encoder, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let path = nextPath
        let child = EncodingNode()
        node.unkeyed.append(.node(child))
        return RecordEncoding(node: child, codingPath: path, userInfo: encoder.sendableUserInfo)
    }
}

// MARK: - Single value

struct RecordSingleValueEncodingContainer: SingleValueEncodingContainer {
    let node: EncodingNode
    let encoder: RecordEncoding
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.setSingle(.null) }
    mutating func encode(_ value: Bool) throws { node.setSingle(.bool(value)) }
    mutating func encode(_ value: String) throws { node.setSingle(.string(value)) }
    mutating func encode(_ value: Double) throws { node.setSingle(try encoder.double(value, at: codingPath)) }
    mutating func encode(_ value: Float) throws { node.setSingle(try encoder.float(value, at: codingPath)) }
    mutating func encode(_ value: Int) throws { node.setSingle(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { node.setSingle(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { node.setSingle(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { node.setSingle(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { node.setSingle(.int(value)) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    mutating func encode(_ value: Int128) throws { node.setSingle(try encoder.integer(value, at: codingPath)) }
    mutating func encode(_ value: UInt) throws { node.setSingle(try encoder.integer(value, at: codingPath)) }
    mutating func encode(_ value: UInt8) throws { node.setSingle(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { node.setSingle(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { node.setSingle(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { node.setSingle(try encoder.integer(value, at: codingPath)) }
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    mutating func encode(_ value: UInt128) throws { node.setSingle(try encoder.integer(value, at: codingPath)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        node.setSingle(try encoder.box(value, at: codingPath))
    }
}
