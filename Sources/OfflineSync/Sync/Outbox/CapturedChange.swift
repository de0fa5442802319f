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
    /// Why the adapter could not read the item (a column holding what its field's type
    /// cannot read): the change is queued as a failed operation with this reason, without
    /// an item, and holds its item's queue until it is withdrawn (``withdrawRefusal(_:in:)``).
    package var refusal: SyncError?

    package init(table: String, itemId: String, kind: OperationKind, item: Record?, baseVersion: String?,
                 changedFields: [String], refusal: SyncError? = nil) {
        self.table = table
        self.itemId = itemId
        self.kind = kind
        self.item = item
        self.baseVersion = baseVersion
        self.changedFields = changedFields
        self.refusal = refusal
    }

    /// A change ``queue(_:in:files:)`` queued as a failed operation instead: one with a
    /// ``refusal``, or one whose item references an attachment that cannot be recorded (a
    /// malformed reference, a size that is not the file's).
    package struct Refused: Sendable {
        /// The table.
        package var table: String
        /// The item's id.
        package var itemId: String
        /// The failed operation, which ``withdrawRefusal(_:in:)`` takes back.
        package var operationId: String
    }

    /// Queues `changes` in order, as one local transaction would: each is folded into its
    /// item's pending operation by the queue's collapse rules (``Outbox/enqueue``), and the
    /// attachments an item references are noted as a local write notes them.
    ///
    /// One change that cannot be queued as it is does not stop the others: a change with a
    /// ``refusal``, or whose item references an attachment that cannot be recorded
    /// (``SyncError/Code/invalidValue``), becomes a failed operation on its item, reported in
    /// `operationErrors()` with the reason's code, and the rest are queued. Returns those.
    /// A refused item's well-formed references are noted all the same, so their files stay.
    @discardableResult
    package static func queue(_ changes: [CapturedChange], in txn: any LocalWriteTransaction,
                              files: (any AttachmentFileStore)?) throws -> [Refused] {
        guard !changes.isEmpty else { return [] }
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
        // A refused change is a failed operation without an item, behind what its item has
        // queued: the item's earlier writes wait with it, every other item goes on.
        var refused: [Refused] = []
        func refuse(_ change: CapturedChange, _ reason: SyncError, key: ExactString) throws {
            try flush()
            let operation = QueuedOperation(
                id: UUID.randomString(), sequence: try sequence(), table: change.table, itemId: change.itemId,
                kind: change.kind, item: nil, baseVersion: change.baseVersion, transaction: transaction,
                changedFields: [], now: now)
            _ = try Outbox.fail(operation, status: nil, message: "the app's write of this row was not queued: \(reason.message)",
                                code: reason.code, server: nil, now: now, txn)
            queuedItems.insert(key)
            refused.append(Refused(table: change.table, itemId: change.itemId, operationId: operation.id))
        }
        // Every well-formed reference an item holds is noted, whether or not its change is
        // refused: a file staged for the row has no other note of it, and the sweep when a
        // context opens would take it for an orphan and delete the only copy. Returns why
        // the rest cannot be noted (a malformed reference first, then a size that is not the
        // file's), if any. A refused change without an item (a row the adapter could not
        // read) notes nothing: the sweep keeps every file no row names while such a refusal
        // is queued (``Outbox/hasUnreadWrite(_:)``).
        func noteReferences(of item: Record) throws -> SyncError? {
            let (references, malformed) = Attachment.scan(item.fields)
            var reason = malformed.first
            do {
                try AttachmentRow.note(references, txn: txn, files: files, now: now)
            } catch let error as SyncError where error.code == .invalidValue {
                reason = reason ?? error
            }
            return reason
        }
        for change in changes {
            let key = ExactString(CompositeKey.slashed(change.table, last: change.itemId))
            if let reason = change.refusal {
                if change.kind != .delete, let item = change.item { _ = try noteReferences(of: item) }
                try refuse(change, reason, key: key)
                continue
            }
            if change.kind != .delete, let item = change.item, let reason = try noteReferences(of: item) {
                try refuse(change, reason, key: key)
                continue
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
            let latest = try Outbox.latest(txn, table: change.table, itemId: change.itemId)
            // A row the adapter never knew whose insert is still pending (a refused insert the
            // app retried) is inserted once: the new capture folds into that insert.
            let kind: OperationKind = change.kind == .insert && latest?.kind == .insert && latest?.state == .pending
                ? .update : change.kind
            try Outbox.enqueue(
                txn, table: change.table, itemId: change.itemId, kind: kind, item: change.item,
                baseVersion: change.baseVersion, changedFields: changedFields, transaction: transaction,
                latest: latest, sequence: sequence, now: now)
        }
        try flush()
        return refused
    }

    /// Takes back a refusal (``Refused/operationId``): its failed operation and the failure
    /// recorded for it go, so the item's queue goes on. An operation the app resolved since
    /// (retried or discarded) is left as it is. Returns whether the refusal is over: `true`
    /// when its operation went now, or had gone already (discarded, or sent after a retry);
    /// `false` while the app's retry of it is still queued (it may fail again, and then be
    /// taken back).
    @discardableResult
    package static func withdrawRefusal(_ operationId: String, in txn: any LocalWriteTransaction) throws -> Bool {
        guard let operation = try Outbox.operation(txn, id: operationId) else { return true }
        guard operation.state == .failed else { return false }
        try Outbox.removeErrors(of: operationId, txn)
        try Outbox.remove(operation, txn)
        return true
    }
}
