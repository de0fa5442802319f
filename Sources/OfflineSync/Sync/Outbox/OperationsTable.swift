/// `__operations`, the outbox (Azure's `MS_TableOperations`): one row per queued operation,
/// read and written only as ``QueuedOperation`` through ``Outbox``.
enum OperationsTable {
    static let name = "__operations"

    /// The columns; a column's raw value is its field name in the store.
    enum Column: String, CaseIterable {
        case sequence, table, itemId, kind, item, baseVersion, state, attempts, createdAt, changedAt, transaction, sendId,
             changedFields

        /// The column in a query.
        var field: Field { Field(rawValue) }
        /// The column as a sort key.
        func sorted(ascending: Bool = true) -> SortKey { SortKey(rawValue, ascending: ascending) }
    }

    static let schema = TableSchema(name, fields: [
        FieldDefinition(Column.sequence.rawValue, .int, indexed: true),
        FieldDefinition(Column.table.rawValue, .string),
        FieldDefinition(Column.itemId.rawValue, .string),
        FieldDefinition(Column.kind.rawValue, .string),
        FieldDefinition(Column.item.rawValue, .object),
        FieldDefinition(Column.baseVersion.rawValue, .string),
        FieldDefinition(Column.state.rawValue, .string, indexed: true),
        FieldDefinition(Column.attempts.rawValue, .int),
        FieldDefinition(Column.createdAt.rawValue, .date),
        FieldDefinition(Column.changedAt.rawValue, .date),
        FieldDefinition(Column.transaction.rawValue, .string),
        FieldDefinition(Column.sendId.rawValue, .string),
        FieldDefinition(Column.changedFields.rawValue, .array),
    ], indexes: [IndexDefinition([Column.table.rawValue, Column.itemId.rawValue, Column.sequence.rawValue])],
       undeclaredFields: .reject)

    /// Operations that may still be sent (pending or attempted).
    static let sendable: QueryPredicate = Column.state.field != .string(OperationState.failed.rawValue)
    /// Operations the remote rejected or the app must resolve.
    static let failed: QueryPredicate = Column.state.field == .string(OperationState.failed.rawValue)
}

extension QueuedOperation {
    /// Reads an `__operations` row; throws ``SyncError/Code/corrupted`` when a required
    /// column is missing or holds an unknown kind or state.
    init(record: Record) throws {
        func string(_ column: OperationsTable.Column) throws -> String {
            guard let s = record[column.rawValue].stringValue else {
                throw SyncError(.corrupted, "operation '\(record.id)' has no '\(column.rawValue)'")
            }
            return s
        }
        id = record.id
        sequence = record[OperationsTable.Column.sequence.rawValue].intValue ?? 0
        table = try string(.table)
        itemId = try string(.itemId)
        guard let kind = OperationKind(rawValue: try string(.kind)),
              let state = OperationState(rawValue: try string(.state)) else {
            throw SyncError(.corrupted, "operation '\(record.id)' has an unknown kind or state")
        }
        self.kind = kind
        self.state = state
        if let object = record[OperationsTable.Column.item.rawValue].objectValue { item = Record(id: itemId, fields: object) } else { item = nil }
        baseVersion = record[OperationsTable.Column.baseVersion.rawValue].stringValue
        attempts = Int(record[OperationsTable.Column.attempts.rawValue].intValue ?? 0)
        createdAt = record[OperationsTable.Column.createdAt.rawValue].dateValue ?? Timestamp(millisecondsSince1970: 0)
        changedAt = record[OperationsTable.Column.changedAt.rawValue].dateValue ?? createdAt
        transaction = record[OperationsTable.Column.transaction.rawValue].stringValue ?? ""
        sendId = record[OperationsTable.Column.sendId.rawValue].stringValue ?? record.id
        changedFields = (record[OperationsTable.Column.changedFields.rawValue].arrayValue ?? []).compactMap(\.stringValue)
    }

    /// The `__operations` row. Written by hand rather than through `RecordEncoder`: every
    /// local write of the app writes one, so it is built with an exactly sized dictionary.
    var record: Record {
        var fields = [String: Value](minimumCapacity: 11 + (item == nil ? 0 : 1) + (baseVersion == nil ? 0 : 1))
        fields[OperationsTable.Column.sequence.rawValue] = .int(sequence)
        fields[OperationsTable.Column.table.rawValue] = .string(table)
        fields[OperationsTable.Column.itemId.rawValue] = .string(itemId)
        fields[OperationsTable.Column.kind.rawValue] = .string(kind.rawValue)
        fields[OperationsTable.Column.state.rawValue] = .string(state.rawValue)
        fields[OperationsTable.Column.attempts.rawValue] = .int(Int64(attempts))
        fields[OperationsTable.Column.createdAt.rawValue] = .date(createdAt)
        fields[OperationsTable.Column.changedAt.rawValue] = .date(changedAt)
        fields[OperationsTable.Column.transaction.rawValue] = .string(transaction)
        fields[OperationsTable.Column.sendId.rawValue] = .string(sendId)
        fields[OperationsTable.Column.changedFields.rawValue] = .array(changedFields.map(Value.string))
        // The two optional fields are left out when absent, as a null field is.
        if let item { fields[OperationsTable.Column.item.rawValue] = .object(item.fields) }
        if let baseVersion { fields[OperationsTable.Column.baseVersion.rawValue] = .string(baseVersion) }
        return Record(id: id, nonNullFields: fields)
    }
}
