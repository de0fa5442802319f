import Foundation

/// The heart of offline sync: owns the operation queue of a local store and moves changes
/// between it and a remote.
///
/// Local writes (``SyncTable``, ``transaction(_:)``) never touch the network. ``push()``
/// sends the queue in order and in batches; ``pull(_:query:queryId:)`` brings remote
/// changes in page by page; ``purge(_:query:force:)`` forgets local data. Push, pull and
/// purge run one at a time; local writes may run beside them (a write during a push queues
/// behind the operation in flight and never loses its base version).
///
/// Use one context per local store.
public final class SyncContext: Sendable {
    /// The local store. Not public: a write to it would be neither queued nor observed, so
    /// apps write through tables and ``transaction(_:)`` and read through ``read(_:)``.
    package let store: any LocalStore
    /// The remote.
    public let remote: any RemoteStore
    /// The settings.
    public let options: SyncOptions
    /// The sync events: every subscriber has its own bounded buffer (``SyncEvents``).
    let broadcaster: SyncEventHub
    /// Push, pull, purge and sync runs take turns through it.
    let gate = SerialGate()
    let network = NetworkState()
    let lifecycle = LifecycleState()
    /// Every write of the context goes through it, so observations see each commit.
    package let observer: StoreObserver
    let statusState: SyncStatusState
    /// The deadline of each push, pull and sync call (``SyncOptions/progressTimeout``).
    let stallWatch: StallWatch
    /// Where pushes, pulls and failures are reported (``SyncOptions/metricsFactory``).
    let metrics: SyncMetrics
    /// Attachment downloads (one per hash) and uploads under way: ``close()`` ends them.
    let attachmentTransfers = AttachmentTransfers()
    let prefetchMisses = PrefetchMisses()
    /// The attachment files the app holds open (``withAttachmentFile(_:isolation:_:)``), which the
    /// cache does not remove.
    let attachmentPins = AttachmentPins()

    /// Opens a context: defines the system tables in `store` if needed.
    public init(store: any LocalStore, remote: any RemoteStore, options: SyncOptions = SyncOptions()) async throws {
        self.store = store
        self.remote = remote
        self.options = options
        self.broadcaster = SyncEventHub(limit: options.eventBufferLimit)
        self.observer = StoreObserver(store: store, externalChangeInterval: options.externalChangeInterval)
        self.stallWatch = StallWatch(timeout: options.progressTimeout)
        self.metrics = SyncMetrics(factory: options.metricsFactory)
        try await SystemTables.define(in: store)
        let (synced, marked) = try await store.read { txn in (try ConfigRow.pulledAtTimes(txn), !(try InFlight.read(txn).isEmpty)) }
        if marked {
            // A push was killed with batches in flight: they are attempted from now on.
            _ = try await observer.write { txn in try Outbox.writeInFlight(txn) }
        }
        self.statusState = SyncStatusState(SyncStatus(lastSyncedAt: synced))
        try await removeOrphanedAttachments()
    }

    /// What the context is doing now and how its last push, pull or sync went.
    public var status: SyncStatus { statusState.current }

    /// The status now, then after every change to it (newest only: a consumer that falls
    /// behind gets the latest status, not a backlog).
    public func observeStatus() -> AsyncStream<SyncStatus> { statusState.subscribe() }

    /// A new subscription to this context's events. Each call is an independent subscriber
    /// that sees every event emitted after the call, through a bounded buffer of its own
    /// (see ``SyncEvents`` for what a subscriber that falls behind gets).
    public func events() -> SyncEvents { broadcaster.subscribe() }

    /// Ends every event subscription (their loops finish after the buffered events). Later
    /// subscriptions end at once. Call it when the context is no longer used.
    public func finishEvents() { broadcaster.finish() }

    /// Stops background sync (``stop()``), ends the attachment downloads and uploads under way
    /// and waits until they have (a caller waiting for one, and any asked for afterwards, gets
    /// ``SyncError/Code/storeClosed``; a download cut off keeps its bytes for the next context,
    /// an upload goes on from the server's offset), ends the event subscriptions and closes the
    /// local store; observations then end with ``SyncError/Code/storeClosed``. Queued
    /// operations stay in the store for the next context opened on it.
    public func close() async throws {
        await stop()
        await attachmentTransfers.close()
        finishEvents()
        try await store.close()
    }

    /// Defines (or migrates) an app table. Names starting with `__` are reserved.
    public func defineTable(_ schema: TableSchema) async throws {
        try Names.validateAppTable(schema.name)
        try await store.defineTable(schema)
    }

    /// An untyped handle on an app table.
    public func table(_ name: String) -> SyncTable { SyncTable(context: self, name: name) }

    /// Runs `body` in one local transaction: the writes and their queue entries commit together.
    /// A write whose record reached the store but whose queue entry failed rolls the whole
    /// transaction back with that error, even if `body` caught it and returned.
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (SyncTransaction) throws -> T) async throws -> T {
        let (value, events, isEmpty) = try await observer.write { txn in
            let transaction = SyncTransaction(txn, files: self.store.attachmentFiles)
            defer { transaction.isOpen = false }
            let value = try body(transaction)
            if let torn = transaction.torn { throw torn }
            let isEmpty = transaction.events.isEmpty
                ? nil : try Outbox.isEmpty(txn)
            return (value, transaction.events, isEmpty)
        }
        for event in events { broadcaster.publish(event) }
        if let isEmpty { broadcaster.publish(.outboxStatus(isEmpty: isEmpty)) }
        return value
    }

    // MARK: Queue inspection

    /// Every operation in the queue, in queue order: those the next push sends and those
    /// the remote rejected (``OutboxStatus/queued``).
    public func queuedOperations() async throws -> [QueuedOperation] {
        try await store.read { txn in
            try Outbox.all(txn)
        }
    }

    /// The number of operations in the queue, failed ones included (``OutboxStatus/queued``),
    /// optionally for one table.
    public func queuedOperationCount(table: String? = nil) async throws -> Int {
        try await store.read { txn in
            try Outbox.count(txn, table: table)
        }
    }

    /// Every operation in the queue, failed ones included.
    @available(*, deprecated, renamed: "queuedOperations()",
               message: "it includes failed operations, which OutboxStatus.pending does not count")
    public func pendingOperations() async throws -> [QueuedOperation] { try await queuedOperations() }

    /// The number of operations in the queue, failed ones included.
    @available(*, deprecated, renamed: "queuedOperationCount(table:)",
               message: "it counts failed operations, which OutboxStatus.pending does not")
    public func pendingOperationCount(table: String? = nil) async throws -> Int { try await queuedOperationCount(table: table) }

    /// Operations the remote rejected and conflicts left for the app, oldest first.
    public func operationErrors() async throws -> [OperationError] {
        try await store.read { txn in
            try Outbox.errors(txn)
        }
    }

    /// The stored pull cursor of a query id, if any.
    public func cursor(table: String, queryId: String) async throws -> String? {
        try await store.read { txn in
            try ConfigRow.value(txn, table: table, key: ConfigRow.cursorKey(queryId))
        }
    }

    // MARK: Purge

    /// Removes local records matching the query and forgets the table's pull cursors (and
    /// that it was pulled: ``TableSyncStatus/isSynced`` turns false), so the next pull brings
    /// them back. Refuses with ``SyncError/Code/pendingOperations`` while the
    /// table has queued operations, unless `force` is set, in which case those operations (and
    /// their errors) are dropped as well.
    public func purge(_ table: String, query: Query = .all, force: Bool = false) async throws {
        try Names.validateAppTable(table)
        try await gate.run {
            let isEmpty = try await self.observer.write { txn -> Bool in
                let pending = try Outbox.count(txn, table: table)
                if pending > 0 && !force {
                    throw SyncError(.pendingOperations, "table '\(table)' has \(pending) queued operations; push them or purge with force")
                }
                try Outbox.removeAll(of: table, txn)
                for row in try txn.records(in: ConfigRow.table, matching: Query(ConfigRow.cursors(of: table))) {
                    try txn.delete(id: row.id, in: ConfigRow.table)
                }
                // The marks of a sweep a pull left unfinished: the next one starts over.
                if try txn.tables().contains(where: { $0.name == Self.sweepMarks }) {
                    let marks = try txn.records(in: Self.sweepMarks, matching: Query(Field("table") == .string(table)))
                    if !marks.isEmpty { _ = try txn.delete(ids: marks.map(\.id), in: Self.sweepMarks) }
                }
                try ConfigRow.setValue(txn, table: table, key: ConfigRow.pulledAtKey,
                                       keyType: ConfigRow.KeyType.pulledAt.rawValue, value: nil)
                while true {
                    let rows = try txn.records(in: table, matching: Query(query.predicate, limit: 1000))
                    if rows.isEmpty { break }
                    for row in rows { try txn.delete(id: row.id, in: table) }
                }
                return try Outbox.isEmpty(txn)
            }
            if force { self.broadcaster.publish(.outboxStatus(isEmpty: isEmpty)) }
            self.statusState.update { $0.lastSyncedAt[table] = nil }
        }
    }

    // MARK: Sync run

    /// A full sync run with Amplify's event sequence: `syncQueriesStarted`, one `modelSynced`
    /// per table, `syncQueriesReady`, then the outbox is drained, `outboxStatus`, and `ready`.
    /// Each table is pulled incrementally under the query id `queryId`.
    ///
    /// A table whose pull the remote refuses (``SyncFailure/Kind/rejected``: the sync rules deny
    /// it, a 403, another 4xx but 401) does not stop the run: the other tables are pulled and
    /// the outbox pushed, the refusal is kept in ``SyncStatus/tableErrors``, and the run then
    /// throws the first such refusal, naming its table. A failure of any other kind (the remote
    /// does not answer, refuses the credentials, the store fails) ends the run at once.
    public func sync(_ tables: [String], queryId: String = "default") async throws {
        for table in tables { try Names.validateAppTable(table) }
        try await tracked {
            self.broadcaster.publish(.syncQueriesStarted(tables: tables))
            var refused: [(table: String, error: SyncError)] = []
            for table in tables {
                do {
                    _ = try await self.pullLocked(table, query: .all, queryId: queryId)
                } catch let error as SyncError where SyncFailure.kind(of: error) == .rejected && !Task.isCancelled {
                    refused.append((table, error))
                }
            }
            self.broadcaster.publish(.syncQueriesReady)
            _ = try await self.pushLocked()
            let isEmpty = try await self.store.read { try Outbox.isEmpty($0) }
            self.broadcaster.publish(.outboxStatus(isEmpty: isEmpty))
            self.broadcaster.publish(.ready)
            if let first = refused.first {
                let others = refused.count > 1 ? " (and \(refused.count - 1) more refused tables)" : ""
                throw SyncError(first.error.code, "table '\(first.table)': \(first.error.message)\(others)", underlying: first.error)
            }
        }
    }

    /// The network monitor's word (for a started context): reported as
    /// ``SyncEvent/networkStatus(active:)``. Down, the remote is not connected; up says
    /// nothing about the remote, which is ``SyncStatus/connected`` only once it answers.
    func networkChanged(_ online: Bool) {
        if network.set(online) { broadcaster.publish(.networkStatus(active: online)) }
        if !online { statusState.update { $0.connected = false } }
    }

    /// The remote answered (a refusal is an answer): it is connected, and the running call's
    /// deadline starts again.
    func remoteAnswered() {
        stallWatch.heard()
        reachable(true)
    }

    /// What a failed remote call says about the network: the remote did not answer only
    /// when the failure is transient (a refusal, 401 included, is an answer).
    func remoteFailed(_ error: any Error) {
        guard let error = error as? SyncError, error.code != .cancelled else { return }
        if error.code == .transient { reachable(false) } else { remoteAnswered() }
    }

    private func reachable(_ active: Bool) {
        if network.set(active) { broadcaster.publish(.networkStatus(active: active)) }
        statusState.update { $0.connected = active }
    }

    /// Runs a public push, pull or sync through the gate, keeping ``SyncStatus/lastError``:
    /// set by a failure, cleared by a success. Its turn at the gate ends when the remote has
    /// answered nothing for ``SyncOptions/progressTimeout`` (``StallWatch``). A call whose task is cancelled throws
    /// `CancellationError`; what it had committed (whole pages, whole settled batches) stays,
    /// and operations sent but not answered stay queued, marked attempted.
    func tracked<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        do {
            let value = try await gate.run { try await self.stallWatch.run(body) }
            statusState.update { $0.lastError = nil }
            return value
        } catch {
            // A failed push or pull left its flag set (``flagged(_:_:)``): cleared here in the
            // same update as the error, so no observer sees "idle, no error" in between.
            let cancelled = Task.isCancelled
            let failure = SyncFailure(error, willRetry: false)
            statusState.update { status in
                status.uploading = false
                status.downloading = false
                if !cancelled, failure.kind != .cancelled { status.lastError = failure }
            }
            // A call the stall watch cancelled saw only its cancellation: the remote did not answer.
            if !cancelled, failure.kind == .transient { remoteFailed(error) }
            // A cancelled call ends with CancellationError, whatever the remote made of it.
            if cancelled { throw CancellationError() }
            throw error
        }
    }

    /// Runs `body` with the status flag at `flag` set, and clears it when `body` returns; a
    /// failure leaves it for ``tracked(_:)`` to clear with the error.
    func flagged<T: Sendable>(_ flag: WritableKeyPath<SyncStatus, Bool> & Sendable, _ body: () async throws -> T) async throws -> T {
        statusState.update { $0[keyPath: flag] = true }
        let value = try await body()
        statusState.update { $0[keyPath: flag] = false }
        return value
    }
}
