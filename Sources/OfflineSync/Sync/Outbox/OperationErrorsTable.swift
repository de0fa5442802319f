/// `__operation_errors` (Azure's `MS_TableOperationErrors`): why an operation failed, one
/// row per failure, read and written only as ``OperationError``.
enum OperationErrorsTable {
    static let name = "__operation_errors"

    /// The columns; a column's raw value is its field name in the store.
    enum Column: String, CaseIterable {
        case operationId, table, itemId, kind, status, message, serverItem, clientItem, createdAt

        /// The column in a query.
        var field: Field { Field(rawValue) }
    }

    static let schema = TableSchema(name, fields: [
        FieldDefinition(Column.operationId.rawValue, .string, indexed: true),
        FieldDefinition(Column.table.rawValue, .string, indexed: true),
        FieldDefinition(Column.itemId.rawValue, .string),
        FieldDefinition(Column.kind.rawValue, .string),
        FieldDefinition(Column.status.rawValue, .int),
        FieldDefinition(Column.message.rawValue, .string),
        FieldDefinition(Column.serverItem.rawValue, .object),
        FieldDefinition(Column.clientItem.rawValue, .object),
        FieldDefinition(Column.createdAt.rawValue, .date),
    ], undeclaredFields: .reject)

    /// The keys of the object a server record is kept as (it keeps its system properties).
    enum ServerRecordKey: String {
        case id, fields, version, updatedAt, deleted
    }
}

extension OperationError {
    /// Reads an `__operation_errors` row (missing columns read as empty).
    init(record: Record) {
        id = record.id
        operationId = record[OperationErrorsTable.Column.operationId.rawValue].stringValue ?? ""
        table = record[OperationErrorsTable.Column.table.rawValue].stringValue ?? ""
        let itemId = record[OperationErrorsTable.Column.itemId.rawValue].stringValue ?? ""
        self.itemId = itemId
        kind = OperationKind(rawValue: record[OperationErrorsTable.Column.kind.rawValue].stringValue ?? "") ?? .update
        status = record[OperationErrorsTable.Column.status.rawValue].intValue.map { Int($0) }
        message = record[OperationErrorsTable.Column.message.rawValue].stringValue ?? ""
        serverRecord = record[OperationErrorsTable.Column.serverItem.rawValue].objectValue.flatMap { OperationError.decodeRecord($0) }
        clientRecord = record[OperationErrorsTable.Column.clientItem.rawValue].objectValue.map { Record(id: itemId, fields: $0) }
        createdAt = record[OperationErrorsTable.Column.createdAt.rawValue].dateValue ?? Timestamp(millisecondsSince1970: 0)
    }

    /// The `__operation_errors` row.
    var record: Record {
        Record(id: id, fields: [
            OperationErrorsTable.Column.operationId.rawValue: .string(operationId), OperationErrorsTable.Column.table.rawValue: .string(table),
            OperationErrorsTable.Column.itemId.rawValue: .string(itemId), OperationErrorsTable.Column.kind.rawValue: .string(kind.rawValue),
            OperationErrorsTable.Column.status.rawValue: status.map { .int(Int64($0)) } ?? .null, OperationErrorsTable.Column.message.rawValue: .string(message),
            OperationErrorsTable.Column.serverItem.rawValue: serverRecord.map(OperationError.encodeRecord) ?? .null,
            OperationErrorsTable.Column.clientItem.rawValue: clientRecord.map { .object($0.fields) } ?? .null,
            OperationErrorsTable.Column.createdAt.rawValue: .date(createdAt),
        ])
    }

    /// A server record with its system properties, as an object value.
    static func encodeRecord(_ record: Record) -> Value {
        .object([
            OperationErrorsTable.ServerRecordKey.id.rawValue: .string(record.id), OperationErrorsTable.ServerRecordKey.fields.rawValue: .object(record.fields),
            OperationErrorsTable.ServerRecordKey.version.rawValue: record.version.map(Value.string) ?? .null,
            OperationErrorsTable.ServerRecordKey.updatedAt.rawValue: record.updatedAt.map(Value.date) ?? .null, OperationErrorsTable.ServerRecordKey.deleted.rawValue: .bool(record.deleted),
        ])
    }

    static func decodeRecord(_ object: [String: Value]) -> Record? {
        guard let id = object[OperationErrorsTable.ServerRecordKey.id.rawValue]?.stringValue else { return nil }
        return Record(id: id, fields: object[OperationErrorsTable.ServerRecordKey.fields.rawValue]?.objectValue ?? [:], version: object[OperationErrorsTable.ServerRecordKey.version.rawValue]?.stringValue,
                      updatedAt: object[OperationErrorsTable.ServerRecordKey.updatedAt.rawValue]?.dateValue, deleted: object[OperationErrorsTable.ServerRecordKey.deleted.rawValue]?.boolValue ?? false)
    }
}
