import OfflineSync
extension ValueCodec {
    private static let schemaFormat: Int64 = 1

    /// Encodes a table schema as a ``ValueCodec`` object, for stores that keep schemas in
    /// their own catalog (the SQLite catalog, LMDB's meta database, encrypted-file frames).
    /// Object keys are sorted by the codec, so equal schemas encode to equal bytes.
    public static func encode(_ schema: TableSchema) -> [UInt8] {
        let fields: [Value] = schema.fields.map {
            .object(["name": .string($0.name), "type": .string($0.type.rawValue), "indexed": .bool($0.indexed)])
        }
        let indexes: [Value] = schema.indexes.map { .array($0.fields.map(Value.string)) }
        return encode(.object([
            "format": .int(schemaFormat),
            "name": .string(schema.name),
            "fields": .array(fields),
            "indexes": .array(indexes),
            "undeclaredFields": .string(schema.undeclaredFields.rawValue),
        ]))
    }

    /// Decodes a schema produced by ``encode(_:)-(TableSchema)``. Throws
    /// `SyncError/Code/corrupted` for anything else.
    public static func decodeSchema(_ bytes: [UInt8]) throws -> TableSchema {
        try bytes.withUnsafeBytes { try decodeSchema($0) }
    }

    /// Decodes a schema from raw memory (for adapters that hand out borrowed buffers).
    public static func decodeSchema(_ buffer: UnsafeRawBufferPointer) throws -> TableSchema {
        let bad = SyncError(.corrupted, "a stored table schema is malformed")
        guard case .object(let object) = try decode(buffer),
              object["format"] == .int(schemaFormat),
              case .string(let name)? = object["name"],
              case .array(let fieldValues)? = object["fields"],
              case .array(let indexValues)? = object["indexes"],
              case .string(let policyName)? = object["undeclaredFields"],
              let policy = UndeclaredFieldPolicy(rawValue: policyName)
        else { throw bad }
        var fields: [FieldDefinition] = []
        for value in fieldValues {
            guard case .object(let field) = value,
                  case .string(let fieldName)? = field["name"],
                  case .string(let typeName)? = field["type"],
                  let type = FieldType(rawValue: typeName),
                  case .bool(let indexed)? = field["indexed"]
            else { throw bad }
            fields.append(FieldDefinition(fieldName, type, indexed: indexed))
        }
        var indexes: [IndexDefinition] = []
        for value in indexValues {
            guard case .array(let names) = value else { throw bad }
            indexes.append(IndexDefinition(try names.map { name in
                guard case .string(let fieldName) = name else { throw bad }
                return fieldName
            }))
        }
        return TableSchema(name, fields: fields, indexes: indexes, undeclaredFields: policy)
    }
}
