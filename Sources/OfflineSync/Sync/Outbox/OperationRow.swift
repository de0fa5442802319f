/// A row of `__operations`, the outbox (Azure's `MS_TableOperations`): one queued operation,
/// read and written only as ``QueuedOperation`` through ``Outbox``.
struct OperationRow: StoredRow {
    static let table = "__operations"
    enum CodingKeys: String, CodingKey {
        case id, sequence, table, itemId, kind, item, baseVersion, state, attempts, createdAt, changedAt, transaction, sendId,
             changedFields
    }

    var id: String
    var sequence: Int64?
    var table: String
    var itemId: String
    var kind: OperationKind
    /// The item's fields (its id is `itemId`).
    var item: [String: Value]?
    var baseVersion: String?
    var state: OperationState
    var attempts: Int?
    var createdAt: Timestamp?
    // The four columns below came after the first release: rows queued before them lack them
    // and read with the defaults of ``QueuedOperation/init(row:)``.
    var changedAt: Timestamp?
    var transaction: String?
    var sendId: String?
    var changedFields: [String]?

    static let schema = TableSchema(table, fields: [
        column(.sequence, .int, indexed: true),
        column(.table, .string),
        column(.itemId, .string),
        column(.kind, .string),
        column(.item, .object),
        column(.baseVersion, .string),
        column(.state, .string, indexed: true),
        column(.attempts, .int),
        column(.createdAt, .date),
        column(.changedAt, .date),
        column(.transaction, .string),
        column(.sendId, .string),
        column(.changedFields, .array),
    ], indexes: [IndexDefinition([CodingKeys.table.rawValue, CodingKeys.itemId.rawValue, CodingKeys.sequence.rawValue])],
       undeclaredFields: .reject)

    /// Operations that may still be sent (pending or attempted).
    static let sendable: QueryPredicate = field(.state) != .string(OperationState.failed.rawValue)
    /// Operations the remote rejected or the app must resolve.
    static let failed: QueryPredicate = field(.state) == .string(OperationState.failed.rawValue)

    init(_ operation: QueuedOperation) {
        id = operation.id
        sequence = operation.sequence
        table = operation.table
        itemId = operation.itemId
        kind = operation.kind
        item = operation.item?.fields
        baseVersion = operation.baseVersion
        state = operation.state
        attempts = operation.attempts
        createdAt = operation.createdAt
        changedAt = operation.changedAt
        transaction = operation.transaction
        sendId = operation.sendId
        changedFields = operation.changedFields
    }
}

extension QueuedOperation {
    /// Reads an `__operations` row; ``SyncError/Code/corrupted`` when its table, item id,
    /// kind or state is missing or unknown.
    init(row record: Record) throws {
        let row = try OperationRow(row: record)
        id = row.id
        sequence = row.sequence ?? 0
        table = row.table
        itemId = row.itemId
        kind = row.kind
        state = row.state
        item = row.item.map { Record(id: row.itemId, fields: $0) }
        baseVersion = row.baseVersion
        attempts = row.attempts ?? 0
        createdAt = row.createdAt ?? Timestamp(millisecondsSince1970: 0)
        changedAt = row.changedAt ?? createdAt
        transaction = row.transaction ?? ""
        sendId = row.sendId ?? row.id
        changedFields = row.changedFields ?? []
    }

    /// The `__operations` row.
    func record() throws -> Record { try OperationRow(self).record() }
}
