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
        for change in changes {
            let key = ExactString(CompositeKey.slashed(change.table, last: change.itemId))
            let latest = queuedItems.contains(key) ? try Outbox.latest(txn, table: change.table, itemId: change.itemId) : nil
            // A second change of the same item in this call folds into the first one's entry.
            queuedItems.insert(key)
            if change.kind != .delete, let item = change.item {
                try AttachmentRow.note(try Attachment.references(in: item), txn: txn, files: files, now: now)
            }
            try Outbox.enqueue(
                txn, table: change.table, itemId: change.itemId, kind: change.kind, item: change.item,
                baseVersion: change.baseVersion, changedFields: change.changedFields.sorted(by: Value.utf8Less),
                transaction: transaction, latest: latest,
                sequence: {
                    let sequence = try next ?? Outbox.nextSequence(txn)
                    next = sequence + 1
                    return sequence
                }, now: now)
        }
    }
}
