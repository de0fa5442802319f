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
        let table = try string(.table), itemId = try string(.itemId)
        guard let kind = OperationKind(rawValue: try string(.kind)), let state = OperationState(rawValue: try string(.state)) else {
            throw SyncError(.corrupted, "row '\(record.id)' of \(OperationRow.table) has an unknown kind or state")
        }
        let createdAt = record[OperationRow.name(.createdAt)].dateValue ?? Timestamp(millisecondsSince1970: 0)
        self.init(Values(
            id: record.id, sequence: record[OperationRow.name(.sequence)].intValue ?? 0, table: table,
            itemId: itemId, kind: kind, item: record[OperationRow.name(.item)].objectValue.map { Record(id: itemId, fields: $0) },
            baseVersion: record[OperationRow.name(.baseVersion)].stringValue, state: state,
            attempts: Int(record[OperationRow.name(.attempts)].intValue ?? 0), createdAt: createdAt,
            changedAt: record[OperationRow.name(.changedAt)].dateValue ?? createdAt,
            transaction: record[OperationRow.name(.transaction)].stringValue ?? "",
            sendId: record[OperationRow.name(.sendId)].stringValue ?? record.id,
            changedFields: (record[OperationRow.name(.changedFields)].arrayValue ?? []).compactMap(\.stringValue)))
    }

    /// The `__operations` row. Its dictionary is a copy of the template for the optional
    /// columns it has, each value set in place by index: inserting thirteen names into a new
    /// dictionary hashed each of them (3.8% of a local insert in `perf`, local-writes-sqlite).
    func record() -> Record {
        let template = RowTemplate.all[(item == nil ? 0 : 2) + (baseVersion == nil ? 0 : 1)]
        var fields = template.fields
        var position = 0
        // In the order of ``RowTemplate/columns``.
        func set(_ value: Value) {
            fields.values[template.indices[position]] = value
            position += 1
        }
        set(.int(sequence))
        set(.string(table))
        set(.string(itemId))
        set(.string(kind.rawValue))
        set(.string(state.rawValue))
        set(.int(Int64(attempts)))
        set(.date(createdAt))
        set(.date(changedAt))
        set(.string(transaction))
        set(.string(sendId))
        set(.array(changedFields.map(Value.string)))
        // The two optional columns are left out when absent, as a null field is.
        if let item { set(.object(item.fields)) }
        if let baseVersion { set(.string(baseVersion)) }
        return Record(id: id, nonNullFields: fields)
    }
}

/// The names of an `__operations` row, laid out once for each combination of its two
/// optional columns (item, base version), with where each name landed.
private struct RowTemplate: @unchecked Sendable {
    // @unchecked Sendable: immutable after `init`; `Dictionary.Index` is not marked Sendable,
    // but it is a plain value (a bucket position and the storage's age).

    /// The columns in the order ``QueuedOperation/record()`` sets them; the two optional ones last.
    static let columns: [OperationRow.CodingKeys] = [.sequence, .table, .itemId, .kind, .state, .attempts, .createdAt,
                                                     .changedAt, .transaction, .sendId, .changedFields, .item, .baseVersion]
    /// Indexed by `(item ? 2 : 0) + (baseVersion ? 1 : 0)`.
    static let all = [RowTemplate(item: false, baseVersion: false), RowTemplate(item: false, baseVersion: true),
                      RowTemplate(item: true, baseVersion: false), RowTemplate(item: true, baseVersion: true)]

    /// Every present column's name, mapped to null until a row sets it.
    let fields: [String: Value]
    /// Where each present column's name sits in `fields`, in ``columns`` order.
    let indices: [Dictionary<String, Value>.Index]

    init(item: Bool, baseVersion: Bool) {
        let present = Self.columns.filter { ($0 != .item || item) && ($0 != .baseVersion || baseVersion) }
        var fields = [String: Value](minimumCapacity: present.count)
        for column in present { fields[column.rawValue] = .null }
        self.fields = fields
        indices = present.map { fields.index(forKey: $0.rawValue)! }
    }
}
