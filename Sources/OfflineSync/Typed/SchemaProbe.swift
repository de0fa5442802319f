import Foundation

/// Derives a model's fields by running its `init(from:)` against a decoder that answers
/// every request with a placeholder and writes down, for each top-level key, the kind of
/// value asked for. What a model's `Decodable` conformance reads is exactly what its coding
/// keys name, so the schema cannot drift from the model.
enum SchemaProbe {
    struct ProbedField: Equatable {
        var name: String
        var type: FieldType
    }

    /// The model's fields, in the order its `init(from:)` reads them, system properties left
    /// out. Throws ``SyncError/Code/invalidConfiguration`` when the model cannot be probed.
    static func fields<M: Decodable>(of model: M.Type) throws -> [ProbedField] {
        let recorder = Recorder()
        do {
            _ = try M(from: ProbeDecoder(recorder: recorder, kind: KindBox()))
        } catch let failure as Failure {
            throw SyncError(.invalidConfiguration, "\(M.self): cannot derive the schema: field '\(failure.field)' of type \(failure.type) does not decode from a placeholder; make it optional or CaseIterable, or declare `static var schema`")
        } catch {
            throw SyncError(.invalidConfiguration, "\(M.self): cannot derive the schema: its init(from:) rejected the placeholder values; declare `static var schema` (\(type(of: error)))")
        }
        let system: Set<String> = [SystemField.id, SystemField.version, SystemField.updatedAt, SystemField.deleted]
        return recorder.fields.filter { !system.contains($0.name) }
    }

    /// A required field whose type cannot be built from a placeholder.
    struct Failure: Error {
        var field: String
        var type: Any.Type
    }

    final class Recorder {
        var fields: [ProbedField] = []
        func note(_ key: any CodingKey, _ type: FieldType) {
            if !fields.contains(where: { $0.name == key.stringValue }) { fields.append(ProbedField(name: key.stringValue, type: type)) }
        }
    }

    /// The first kind of container or value a type asked for.
    final class KindBox {
        var kind: FieldType?
        func note(_ kind: FieldType) { if self.kind == nil { self.kind = kind } }
    }

    /// The field type a value of `T` takes and a placeholder of it (`nil` when `T` rejects
    /// every placeholder: a raw-value enum that is not `CaseIterable`, a validating init).
    static func placeholder<T: Decodable>(_ type: T.Type) -> (FieldType, T?) {
        // The types RecordEncoder maps itself, not through their Codable representation.
        if T.self == Date.self { return (.date, Date(timeIntervalSince1970: 0) as? T) }
        if T.self == Timestamp.self { return (.date, Timestamp(millisecondsSince1970: 0) as? T) }
        if T.self == Data.self { return (.bytes, Data() as? T) }
        if T.self == URL.self { return (.string, URL(string: "probe:") as? T) }
        if T.self == UUID.self { return (.string, UUID() as? T) }
        if T.self == Value.self { return (.any, Value.null as? T) }
        let box = KindBox()
        do {
            let value = try T(from: ProbeDecoder(recorder: nil, kind: box))
            return (box.kind ?? .any, value)
        } catch {
            return (box.kind ?? .any, firstCase(of: T.self))
        }
    }

    private static func firstCase<T>(of type: T.Type) -> T? {
        guard let iterable = T.self as? any CaseIterable.Type else { return nil }
        func first<C: CaseIterable>(_ c: C.Type) -> Any? { c.allCases.first }
        return first(iterable) as? T
    }

    static func kind<T>(of type: T.Type) -> FieldType {
        switch type {
        case is Bool.Type: return .bool
        case is String.Type: return .string
        case is Double.Type, is Float.Type: return .double
        default: return .int
        }
    }
}

private struct ProbeDecoder: Decoder {
    let recorder: SchemaProbe.Recorder?
    let kind: SchemaProbe.KindBox
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        kind.note(.object)
        return KeyedDecodingContainer(ProbeKeyed<Key>(recorder: recorder))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        kind.note(.array)
        return ProbeUnkeyed()
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { ProbeSingle(kind: kind) }
}

/// A keyed container with every key present, each answered with a placeholder; at the
/// model's top level it records each key's kind.
private struct ProbeKeyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let recorder: SchemaProbe.Recorder?
    var codingPath: [any CodingKey] = []
    var allKeys: [Key] { [] } // a dictionary decodes empty
    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    private func scalar<T>(_ value: T, _ key: Key) -> T {
        recorder?.note(key, SchemaProbe.kind(of: T.self))
        return value
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { scalar(false, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { scalar("", key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { scalar(0, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { scalar(0, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { scalar(0, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { scalar(0, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { scalar(0, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { scalar(0, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { scalar(0, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { scalar(0, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { scalar(0, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { scalar(0, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { scalar(0, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { scalar(0, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let (kind, value) = SchemaProbe.placeholder(T.self)
        recorder?.note(key, kind)
        guard let value else { throw SchemaProbe.Failure(field: key.stringValue, type: T.self) }
        return value
    }

    /// An optional field: its kind is recorded and it decodes as absent, so no placeholder is needed.
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        recorder?.note(key, SchemaProbe.placeholder(T.self).0)
        return nil
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        recorder?.note(key, .object)
        return KeyedDecodingContainer(ProbeKeyed<NestedKey>(recorder: nil))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        recorder?.note(key, .array)
        return ProbeUnkeyed()
    }

    func superDecoder() throws -> any Decoder { ProbeDecoder(recorder: recorder, kind: SchemaProbe.KindBox()) }
    func superDecoder(forKey key: Key) throws -> any Decoder { ProbeDecoder(recorder: nil, kind: SchemaProbe.KindBox()) }
}

/// An empty array.
private struct ProbeUnkeyed: UnkeyedDecodingContainer {
    var codingPath: [any CodingKey] = []
    var count: Int? { 0 }
    var isAtEnd: Bool { true }
    var currentIndex: Int { 0 }
    private func end() -> DecodingError {
        DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "the schema probe's arrays are empty"))
    }
    mutating func decodeNil() throws -> Bool { throw end() }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { throw end() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> { throw end() }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw end() }
    mutating func superDecoder() throws -> any Decoder { throw end() }
}

/// A single value: the first kind asked for is the value's kind.
private struct ProbeSingle: SingleValueDecodingContainer {
    let kind: SchemaProbe.KindBox
    var codingPath: [any CodingKey] = []

    private func scalar<T>(_ value: T) -> T {
        kind.note(SchemaProbe.kind(of: T.self))
        return value
    }

    func decodeNil() -> Bool { false }
    func decode(_ type: Bool.Type) throws -> Bool { scalar(false) }
    func decode(_ type: String.Type) throws -> String { scalar("") }
    func decode(_ type: Double.Type) throws -> Double { scalar(0) }
    func decode(_ type: Float.Type) throws -> Float { scalar(0) }
    func decode(_ type: Int.Type) throws -> Int { scalar(0) }
    func decode(_ type: Int8.Type) throws -> Int8 { scalar(0) }
    func decode(_ type: Int16.Type) throws -> Int16 { scalar(0) }
    func decode(_ type: Int32.Type) throws -> Int32 { scalar(0) }
    func decode(_ type: Int64.Type) throws -> Int64 { scalar(0) }
    func decode(_ type: UInt.Type) throws -> UInt { scalar(0) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { scalar(0) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { scalar(0) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { scalar(0) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { scalar(0) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (kind, value) = SchemaProbe.placeholder(T.self)
        self.kind.note(kind)
        guard let value else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "no placeholder for \(T.self)"))
        }
        return value
    }
}
