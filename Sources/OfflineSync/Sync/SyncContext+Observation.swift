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

    /// Every operation in the queue: ``pending`` and ``failed``
    /// (``SyncContext/queuedOperationCount(table:)``).
    public var queued: Int { pending + failed }

    /// Whether nothing is queued, failed operations included.
    public var isEmpty: Bool { queued == 0 }
}

extension SyncContext {
    /// The outbox's pending and failed counts, now and after every change to them (a local
    /// write, a push that settles operations, a failure).
    public func observeOutbox() -> ObservedValue<OutboxStatus> {
        ObservedValue(observer: observer, tables: [OperationRow.table], interest: .anyRow) { txn in
            let failed = try txn.count(in: OperationRow.table, matching: OperationRow.failed)
            return OutboxStatus(pending: try Outbox.count(txn) - failed, failed: failed)
        }
    }
}

extension SyncTable {
    /// The local records matching `query`, now and after every commit that changes them —
    /// a local write, a pulled page, a conflict resolution, a purge (see ``ObservedValue``).
    /// An invalid table name or query is thrown by the first `next()`.
    public func observe(_ query: Query = .all) -> ObservedValue<[Record]> {
        observation(query) { $0 }
    }

    /// The local record with this id (`nil` while there is none), now and after every commit
    /// that writes or deletes it.
    public func observe(id: String) -> ObservedValue<Record?> {
        observation(id: id) { $0 }
    }

    /// An observation of the records matching `query`, shown as `value` makes them.
    func observation<Element>(_ query: Query, value: @escaping @Sendable ([Record]) throws -> Element) -> ObservedValue<Element> {
        let name = name
        return context.observer.observation(of: name, query, check: { try Names.validateAppTable(name) }, value: value)
    }

    /// An observation of one record, shown as `value` makes it.
    func observation<Element>(id: String, value: @escaping @Sendable (Record?) throws -> Element) -> ObservedValue<Element> {
        let name = name
        return context.observer.observation(of: name, id: id, check: { try Names.validateAppTable(name) }, value: value)
    }
}

/// One table's sync state, as ``SyncTable/observeSyncStatus()`` shows it (Amplify's
/// `isSynced`, with the counts behind it).
public struct TableSyncStatus: Sendable, Hashable {
    /// When a pull of the table last reached the end of the remote's changes; `nil` until the
    /// first complete pull, and again after a purge.
    public var lastPulledAt: Timestamp?
    /// The table's queued local changes that the next push sends.
    public var pending: Int
    /// The table's operations the remote rejected, waiting for the app.
    public var failed: Int

    /// A table's sync state.
    public init(lastPulledAt: Timestamp?, pending: Int, failed: Int) {
        self.lastPulledAt = lastPulledAt
        self.pending = pending
        self.failed = failed
    }

    /// Whether the local table holds the remote's data as of its last complete pull and
    /// every local change has reached the remote: pulled at least once since the last purge,
    /// nothing queued, nothing failed.
    public var isSynced: Bool { lastPulledAt != nil && pending == 0 && failed == 0 }
}

extension SyncTable {
    /// The table's sync state, now and after every change to it: a local write queues a
    /// change, a push settles it, a pull reaches its end, a purge forgets the pull.
    public func observeSyncStatus() -> ObservedValue<TableSyncStatus> {
        let name = name
        return ObservedValue(observer: context.observer, tables: [OperationRow.table, ConfigRow.table],
                             interest: .anyRow) { txn in
            try Names.validateAppTable(name)
            let onTable = OperationRow.field(.table) == .string(name)
            let queued = try txn.count(in: OperationRow.table, matching: onTable)
            let failed = try txn.count(in: OperationRow.table, matching: onTable && OperationRow.failed)
            let pulledAt = try ConfigRow.value(txn, table: name, key: ConfigRow.pulledAtKey)
                .flatMap(Int64.init).map(Timestamp.init(millisecondsSince1970:))
            return TableSyncStatus(lastPulledAt: pulledAt, pending: queued - failed, failed: failed)
        }
    }
}
