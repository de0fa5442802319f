/// The outbox's counts, as ``SyncContext/observeOutbox()`` shows them.
public struct OutboxStatus: Sendable, Hashable {
    /// Queued operations that the next push sends.
    public var pending: Int
    /// Operations the remote rejected; they wait for the app (``SyncContext/operationErrors()``).
    public var failed: Int

    /// Counts of the outbox.
    public init(pending: Int, failed: Int) {
        self.pending = pending
        self.failed = failed
    }

    /// Whether nothing is queued, failed operations included.
    public var isEmpty: Bool { pending == 0 && failed == 0 }
}

extension SyncContext {
    /// The outbox's pending and failed counts, now and after every change to them (a local
    /// write, a push that settles operations, a failure).
    public func observeOutbox() -> Observation<OutboxStatus> {
        Observation(observer: observer, tables: [OperationRow.table], interest: .anyRow) { txn in
            let failed = try txn.count(in: OperationRow.table, matching: OperationRow.failed)
            return OutboxStatus(pending: try Outbox.count(txn) - failed, failed: failed)
        }
    }
}

extension SyncTable {
    /// The local records matching `query`, now and after every commit that changes them —
    /// a local write, a pulled page, a conflict resolution, a purge (see ``Observation``).
    /// An invalid table name or query is thrown by the first `next()`.
    public func observe(_ query: Query = .all) -> Observation<[Record]> {
        let name = name
        return Observation(observer: context.observer, tables: [name], interest: .anyRow) { txn in
            try Names.validateAppTable(name)
            return try txn.records(in: name, matching: query)
        }
    }

    /// The local record with this id (`nil` while there is none), now and after every commit
    /// that writes or deletes it.
    public func observe(id: String) -> Observation<Record?> {
        let name = name
        return Observation(observer: context.observer, tables: [name], interest: .record(id)) { txn in
            try Names.validateAppTable(name)
            return try txn.record(in: name, id: id)
        }
    }
}
