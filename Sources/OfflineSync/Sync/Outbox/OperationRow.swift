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
        column(.sequence, .int),
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
    ], indexes: [
        // Both end with the operation's id, so the queue's reads in sequence order, which end
        // their keys with the id (``Outbox/newestFirst``), walk an index in either direction
        // where SQLite would otherwise sort each answer again in a temporary B-tree (most of
        // the "newest operation on this item" look-up every local write makes, in `perf`).
        IndexDefinition([CodingKeys.sequence.rawValue, CodingKeys.id.rawValue]),
        IndexDefinition([CodingKeys.table.rawValue, CodingKeys.itemId.rawValue, CodingKeys.sequence.rawValue,
                         CodingKeys.id.rawValue]),
    ], undeclaredFields: .reject)

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
    // The queue's rows are read and written by hand, column by column through
    // ``OperationRow/CodingKeys``, not through RecordEncoder/RecordDecoder: every app write
    // writes one and every pushed operation reads and rewrites one, and `make bench` measured
    // the Codable path at +27% on local writes to SQLite and +41% on push-10k (README,
    // Performance). `OutboxRowTests` checks that both paths give the same rows.

    /// Reads an `__operations` row; ``SyncError/Code/corrupted`` when its table, item id,
    /// kind or state is missing or unknown. Rows queued before `changedAt`, `transaction`,
    /// `sendId` and `changedFields` existed read with defaults.
    init(row record: Record) throws {
        func string(_ column: OperationRow.CodingKeys) throws -> String {
            guard let s = record[column.rawValue].stringValue else {
                throw SyncError(.corrupted, "row '\(record.id)' of \(OperationRow.table) is unreadable: column '\(column.rawValue)'")
            }
            return s
        }
        id = record.id
        sequence = record[OperationRow.name(.sequence)].intValue ?? 0
        table = try string(.table)
        let itemId = try string(.itemId)
        self.itemId = itemId
        guard let kind = OperationKind(rawValue: try string(.kind)), let state = OperationState(rawValue: try string(.state)) else {
            throw SyncError(.corrupted, "row '\(record.id)' of \(OperationRow.table) has an unknown kind or state")
        }
        self.kind = kind
        self.state = state
        item = record[OperationRow.name(.item)].objectValue.map { Record(id: itemId, fields: $0) }
        baseVersion = record[OperationRow.name(.baseVersion)].stringValue
        attempts = Int(record[OperationRow.name(.attempts)].intValue ?? 0)
        createdAt = record[OperationRow.name(.createdAt)].dateValue ?? Timestamp(millisecondsSince1970: 0)
        changedAt = record[OperationRow.name(.changedAt)].dateValue ?? createdAt
        transaction = record[OperationRow.name(.transaction)].stringValue ?? ""
        sendId = record[OperationRow.name(.sendId)].stringValue ?? record.id
        changedFields = (record[OperationRow.name(.changedFields)].arrayValue ?? []).compactMap(\.stringValue)
    }

    /// The `__operations` row, built with an exactly sized dictionary.
    func record() -> Record {
        var fields = [String: Value](minimumCapacity: 11 + (item == nil ? 0 : 1) + (baseVersion == nil ? 0 : 1))
        fields[OperationRow.name(.sequence)] = .int(sequence)
        fields[OperationRow.name(.table)] = .string(table)
        fields[OperationRow.name(.itemId)] = .string(itemId)
        fields[OperationRow.name(.kind)] = .string(kind.rawValue)
        fields[OperationRow.name(.state)] = .string(state.rawValue)
        fields[OperationRow.name(.attempts)] = .int(Int64(attempts))
        fields[OperationRow.name(.createdAt)] = .date(createdAt)
        fields[OperationRow.name(.changedAt)] = .date(changedAt)
        fields[OperationRow.name(.transaction)] = .string(transaction)
        fields[OperationRow.name(.sendId)] = .string(sendId)
        fields[OperationRow.name(.changedFields)] = .array(changedFields.map(Value.string))
        // The two optional columns are left out when absent, as a null field is.
        if let item { fields[OperationRow.name(.item)] = .object(item.fields) }
        if let baseVersion { fields[OperationRow.name(.baseVersion)] = .string(baseVersion) }
        return Record(id: id, nonNullFields: fields)
    }
}
