import Foundation

/// A change an adapter captured outside the core's write path — the app wrote its own table
/// with SQL, and a trigger noted the row — to be queued as if the core had made it.
///
/// An adapter that captures (the GRDB adapter) queues its captured changes with
/// ``queue(_:in:files:)`` inside one of its write transactions, before the core reads the
/// queue, so the queue never misses a change that committed.
package struct CapturedChange: Sendable {
    /// The table.
    package var table: String
    /// The item's id.
    package var itemId: String
    /// What happened to the item since the core last knew it: inserted (the core never knew
    /// it), updated or deleted (the core knew it, at `baseVersion`).
    package var kind: OperationKind
    /// The item as it stands now (its fields, without system properties); `nil` for a delete.
    package var item: Record?
    /// The version the core last knew the item at; `nil` for an insert.
    package var baseVersion: String?
    /// The fields that changed (every field of the item for an insert).
    package var changedFields: [String]

    package init(table: String, itemId: String, kind: OperationKind, item: Record?, baseVersion: String?,
                 changedFields: [String]) {
        self.table = table
        self.itemId = itemId
        self.kind = kind
        self.item = item
        self.baseVersion = baseVersion
        self.changedFields = changedFields
    }

    /// Queues `changes` in order, as one local transaction would: each is folded into its
    /// item's pending operation by the queue's collapse rules (``Outbox/enqueue``), and the
    /// attachments an item references are noted as a local write notes them.
    package static func queue(_ changes: [CapturedChange], in txn: any LocalWriteTransaction,
                              files: (any AttachmentFileStore)?) throws {
        guard !changes.isEmpty else { return }
        let transaction = UUID.randomString()
        let now = Timestamp.now()
        var next: Int64?
        // The items that have queued operations, one query per table and page of ids: only
        // those need their newest operation read (most captured rows have none).
        var queuedItems = Set<ExactString>()
        for (table, ofTable) in Dictionary(grouping: changes, by: { ExactString($0.table) }) {
            guard try Outbox.hasOperations(txn, table: table.value) else { continue }
            for start in stride(from: 0, to: ofTable.count, by: 500) {
                let ids = ofTable[start..<min(start + 500, ofTable.count)].map(\.itemId)
                for id in try Outbox.itemsWithOperations(txn, table: table.value, among: ids) {
                    queuedItems.insert(ExactString(CompositeKey.slashed(table.value, last: id.value)))
                }
            }
        }
        func sequence() throws -> Int64 {
            let sequence = try next ?? Outbox.nextSequence(txn)
            next = sequence + 1
            return sequence
        }
        // New entries of items with nothing queued are written together, several rows to a
        // statement where the store can; they are written out before any read of the queue.
        var appended: [Record] = []
        func flush() throws {
            guard !appended.isEmpty else { return }
            try txn.upsert(appended, in: OperationRow.table)
            appended.removeAll(keepingCapacity: true)
        }
        for change in changes {
            let key = ExactString(CompositeKey.slashed(change.table, last: change.itemId))
            if change.kind != .delete, let item = change.item {
                try AttachmentRow.note(try Attachment.references(in: item), txn: txn, files: files, now: now)
            }
            let changedFields = change.changedFields.sorted(by: Value.utf8Less)
            // An item with nothing queued gets a new entry; one with queued operations (a
            // second change of an item in this call among them) goes through the collapse rules.
            if queuedItems.insert(key).inserted {
                appended.append(QueuedOperation(
                    id: UUID.randomString(), sequence: try sequence(), table: change.table, itemId: change.itemId,
                    kind: change.kind, item: change.item, baseVersion: change.baseVersion, transaction: transaction,
                    changedFields: changedFields, now: now).record())
                continue
            }
            try flush()
            try Outbox.enqueue(
                txn, table: change.table, itemId: change.itemId, kind: change.kind, item: change.item,
                baseVersion: change.baseVersion, changedFields: changedFields, transaction: transaction,
                latest: try Outbox.latest(txn, table: change.table, itemId: change.itemId), sequence: sequence, now: now)
        }
        try flush()
    }
}
