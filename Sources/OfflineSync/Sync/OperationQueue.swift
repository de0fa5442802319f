import Foundation

/// The queue's rules, applied inside the local write transaction that changes the item, so
/// a record and its queue entry always commit together.
enum OperationQueue {
    /// The newest queued operation on an item, if any.
    static func latest(_ txn: any LocalReadTransaction, table: String, itemId: String) throws -> QueuedOperation? {
        let query = Query(Field("itemId") == .string(itemId) && Field("table") == .string(table),
                          order: [SortKey("sequence", ascending: false)], limit: 1)
        return try txn.records(in: SystemTables.operations, matching: query).first.map(QueuedOperation.init(record:))
    }

    /// Every queued operation on an item, oldest first.
    static func all(_ txn: any LocalReadTransaction, table: String, itemId: String) throws -> [QueuedOperation] {
        let query = Query(Field("itemId") == .string(itemId) && Field("table") == .string(table),
                          order: [SortKey("sequence")])
        return try txn.records(in: SystemTables.operations, matching: query).map(QueuedOperation.init(record:))
    }

    /// The next free sequence number.
    static func nextSequence(_ txn: any LocalReadTransaction) throws -> Int64 {
        let last = try txn.first(in: SystemTables.operations, matching: Query(order: [SortKey("sequence", ascending: false)]))
        return (last?["sequence"].intValue ?? 0) + 1
    }

    /// What queuing a change did.
    enum Effect {
        /// A new operation joined the queue.
        case appended(QueuedOperation)
        /// The change was folded into the item's pending operation.
        case collapsed(QueuedOperation)
        /// An insert and a delete cancelled out: nothing will be sent.
        case cancelled
    }

    /// Queues a change, collapsing it into the item's newest operation when that one is still
    /// pending (never sent). Pairs (first, second):
    /// insert+update → insert with the new item; insert+delete → both vanish;
    /// update+update → update with the new item; update+delete → delete;
    /// delete+insert → update with the new item; any other pair → `invalidOperationSequence`.
    /// An operation that was sent (attempted) or failed is never rewritten: the change queues behind it.
    @discardableResult
    static func enqueue(_ txn: any LocalWriteTransaction, table: String, itemId: String, kind: OperationKind,
                        item: Record?, baseVersion: String?, changedFields: [String], transaction: String,
                        sequence: () throws -> Int64, now: Timestamp) throws -> Effect {
        if var previous = try latest(txn, table: table, itemId: itemId), previous.state == .pending {
            let merged = Set(previous.changedFields).union(changedFields).sorted(by: Value.utf8Less)
            switch (previous.kind, kind) {
            case (.insert, .update):
                previous.item = item
                previous.changedFields = merged
            case (.insert, .delete):
                try txn.delete(id: previous.id, in: SystemTables.operations)
                return .cancelled
            case (.update, .update):
                previous.item = item
                previous.changedFields = merged
            case (.update, .delete):
                previous.kind = .delete
                previous.item = item
            case (.delete, .insert):
                // Every field of the deleted item and of the new one may differ from the base.
                let oldFields = previous.item.map { Array($0.fields.keys) } ?? []
                previous.kind = .update
                previous.item = item
                previous.changedFields = Set(changedFields).union(oldFields).sorted(by: Value.utf8Less)
            default:
                throw SyncError(.invalidOperationSequence,
                                "cannot queue \(kind.rawValue) after a pending \(previous.kind.rawValue) of item '\(itemId)' in table '\(table)'")
            }
            previous.changedAt = now
            previous.transaction = transaction
            try txn.upsert(previous.record, in: SystemTables.operations)
            return .collapsed(previous)
        }
        let operation = QueuedOperation(id: UUID.random().uuidString, sequence: try sequence(), table: table, itemId: itemId,
                                        kind: kind, item: item, baseVersion: baseVersion, transaction: transaction,
                                        changedFields: changedFields, now: now)
        try txn.upsert(operation.record, in: SystemTables.operations)
        return .appended(operation)
    }
}
