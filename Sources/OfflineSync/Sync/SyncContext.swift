import Foundation

/// Settings of a ``SyncContext``.
public struct SyncOptions: Sendable {
    /// Decides conflicts the remote reports. Default: ``ConflictPolicy/serverWins``.
    public var conflictResolver: any ConflictResolver
    /// The most operations sent in one push request (a larger local transaction is still
    /// sent whole, up to ten times this).
    public var pushBatchSize: Int
    /// The most records asked for per pull page.
    public var pullPageSize: Int
    /// After this many sends, a still-conflicting operation is left for the app.
    public var maxConflictRetries: Int

    /// Creates options.
    public init(conflictResolver: any ConflictResolver = ConflictPolicy.serverWins, pushBatchSize: Int = 500,
                pullPageSize: Int = 500, maxConflictRetries: Int = 5) {
        self.conflictResolver = conflictResolver
        self.pushBatchSize = max(1, pushBatchSize)
        self.pullPageSize = max(1, pullPageSize)
        self.maxConflictRetries = max(1, maxConflictRetries)
    }
}

/// What a ``SyncContext/push()`` did.
public struct PushSummary: Sendable, Hashable {
    /// Requests sent.
    public var batches = 0
    /// Operations sent (resends included).
    public var sent = 0
    /// Operations the remote applied.
    public var applied = 0
    /// Conflicts settled by the resolver.
    public var conflictsResolved = 0
    /// Operations that moved to `__operation_errors`.
    public var failed = 0
}

/// What a ``SyncContext/pull(_:query:queryId:)`` did.
public struct PullSummary: Sendable, Hashable {
    /// The table.
    public var table: String
    /// Pages received.
    public var pages = 0
    /// Records received (tombstones included), whether or not they changed anything.
    public var received = 0
    /// New local records.
    public var added = 0
    /// Local records that changed (a record received unchanged is not counted).
    public var updated = 0
    /// Removed local records.
    public var deleted = 0
    /// Remote changes not applied because the item has a local operation queued.
    public var skippedPending = 0
    /// Whether the pull started from the beginning.
    public var isFullSync = true
}

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
    /// The local store.
    public let store: any LocalStore
    /// The remote.
    public let remote: any RemoteStore
    /// The settings.
    public let options: SyncOptions
    /// The sync events: every subscriber keeps its own unbounded buffer, so a slow one misses nothing.
    let broadcaster = Broadcaster<SingleTopic, SyncEvent>(bufferingPolicy: .unbounded)
    private let gate = SerialGate()
    let network = NetworkState()
    let lifecycle = LifecycleState()

    /// Opens a context: defines the system tables in `store` if needed.
    public init(store: any LocalStore, remote: any RemoteStore, options: SyncOptions = SyncOptions()) async throws {
        self.store = store
        self.remote = remote
        self.options = options
        try await SystemTables.define(in: store)
    }

    /// A new subscription to this context's events. Each call is an independent subscriber
    /// that sees every event emitted after the call.
    public func events() -> AsyncStream<SyncEvent> { broadcaster.subscribe() }

    /// Ends every event subscription (their loops finish after the buffered events). Later
    /// subscriptions end at once. Call it when the context is no longer used.
    public func finishEvents() { broadcaster.finish() }

    /// Defines (or migrates) an app table. Names starting with `__` are reserved.
    public func defineTable(_ schema: TableSchema) async throws {
        try Names.validateAppTable(schema.name)
        try await store.defineTable(schema)
    }

    /// An untyped handle on an app table.
    public func table(_ name: String) -> SyncTable { SyncTable(context: self, name: name) }

    /// Runs `body` in one local transaction: the writes and their queue entries commit together.
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (SyncTransaction) throws -> T) async throws -> T {
        let (value, events, isEmpty) = try await store.write { txn in
            let transaction = SyncTransaction(txn)
            defer { transaction.isOpen = false }
            let value = try body(transaction)
            let isEmpty = transaction.events.isEmpty
                ? nil : try txn.first(in: SystemTables.operations, matching: .all) == nil
            return (value, transaction.events, isEmpty)
        }
        for event in events { broadcaster.publish(event) }
        if let isEmpty { broadcaster.publish(.outboxStatus(isEmpty: isEmpty)) }
        return value
    }

    // MARK: Queue inspection

    /// Every queued operation, in queue order.
    public func pendingOperations() async throws -> [QueuedOperation] {
        try await store.read { txn in
            try txn.records(in: SystemTables.operations, matching: Query(order: [SortKey("sequence")]))
                .map(QueuedOperation.init(record:))
        }
    }

    /// The number of queued operations (failed ones included), optionally for one table.
    public func pendingOperationCount(table: String? = nil) async throws -> Int {
        try await store.read { txn in
            try txn.count(in: SystemTables.operations, matching: table.map { Field("table") == .string($0) } ?? .all)
        }
    }

    /// Operations the remote rejected and conflicts left for the app, oldest first.
    public func operationErrors() async throws -> [OperationError] {
        try await store.read { txn in
            try txn.records(in: SystemTables.operationErrors, matching: Query(order: [SortKey("createdAt")]))
                .map(OperationError.init(record:))
        }
    }

    /// The stored pull cursor of a query id, if any.
    public func cursor(table: String, queryId: String) async throws -> String? {
        try await store.read { txn in
            try SystemTables.configValue(txn, table: table, key: SyncContext.cursorKey(queryId))
        }
    }

    static func cursorKey(_ queryId: String) -> String { "cursor:" + queryId }

    // MARK: Push

    /// Sends every pushable operation, in queue order across tables, in batches, until the
    /// queue holds only failed operations (and those waiting behind them).
    ///
    /// If the remote cannot be reached, throws and leaves every operation in the queue, in
    /// order, unchanged except that the ones sent are marked attempted (the remote may have
    /// applied them; they are resent with the same ids and never rewritten).
    @discardableResult
    public func push() async throws -> PushSummary {
        try await gate.run { try await self.pushLocked() }
    }

    func pushLocked() async throws -> PushSummary {
        var summary = PushSummary()
        var done = 0
        let batchSize = options.pushBatchSize
        let remote = self.remote
        func send(_ batch: [QueuedOperation]) -> (batch: [QueuedOperation], answer: Task<[PushResult], any Error>) {
            let operations = batch.map(\.pushOperation)
            return (batch, Task { try await remote.push(operations) })
        }
        // Two batches overlap: while the remote applies one, the next is chosen and marked
        // attempted (it never holds an operation on an item of the batch in flight, so it never
        // depends on its outcome); once the answer comes, the next is sent, and the answered
        // batch is settled in the same local transaction that chooses the one after. Batches
        // are still sent, and applied, one after the other in queue order.
        var inFlight: (batch: [QueuedOperation], answer: Task<[PushResult], any Error>)?
        var prepared: [QueuedOperation]?
        defer { inFlight?.answer.cancel() }
        while true {
            if inFlight == nil {
                let batch = try await markAttempted(SyncContext.selectBatch(limit: batchSize, excluding: []))
                if batch.isEmpty { break }
                inFlight = send(batch)
            }
            guard let (batch, answer) = inFlight else { break }
            if prepared == nil {
                prepared = try await markAttempted(SyncContext.selectBatch(limit: batchSize, excluding: batch))
            }
            let results: [PushResult]
            do {
                results = try await answer.value
                networkReachable(true)
            } catch {
                inFlight = nil
                networkReachable(false)
                throw error
            }
            let next = prepared ?? []
            prepared = nil
            inFlight = next.isEmpty ? nil : send(next)
            summary.batches += 1
            summary.sent += batch.count

            var outcomes: [String: PushOutcome] = [:]
            for result in results where outcomes[result.operationId] == nil { outcomes[result.operationId] = result.outcome }
            var decisions: [String: ConflictResolution] = [:]
            for operation in batch {
                guard case .conflict(let server)? = outcomes[operation.sendId] else { continue }
                if operation.attempts > options.maxConflictRetries {
                    decisions[operation.id] = .leaveForApp
                    continue
                }
                let conflict = SyncConflict(
                    table: operation.table, itemId: operation.itemId, kind: operation.kind,
                    clientRecord: operation.item, serverRecord: server, baseVersion: operation.baseVersion,
                    clientChangedAt: operation.changedAt, changedFields: operation.changedFields,
                    attempts: operation.attempts)
                decisions[operation.id] = await options.conflictResolver.resolve(conflict)
            }
            let answered = outcomes, decided = decisions
            let (settled, following, remaining, isEmpty) = try await store.write { txn in
                let settled = try SyncContext.settle(batch, outcomes: answered, decisions: decided, txn: txn)
                let following = next.isEmpty ? nil : try SyncContext.markAttempted(
                    try SyncContext.selectBatch(txn, limit: batchSize, excluding: next), txn: txn)
                return (settled, following,
                        try txn.count(in: SystemTables.operations, matching: Field("state") != "failed"),
                        try txn.first(in: SystemTables.operations, matching: .all) == nil)
            }
            prepared = following
            summary.applied += settled.applied
            summary.failed += settled.failed
            summary.conflictsResolved += settled.resolved
            for event in settled.events { broadcaster.publish(event) }
            done += settled.settled
            broadcaster.publish(.pushProgress(done: done, total: done + remaining))
            broadcaster.publish(.outboxStatus(isEmpty: isEmpty))
            let missing = batch.count - batch.filter { outcomes[$0.sendId] != nil }.count
            if missing > 0 {
                throw SyncError(.transient, "the remote answered \(batch.count - missing) of \(batch.count) operations; the rest stay queued")
            }
        }
        return summary
    }

    /// Chooses a batch with `select` and marks its operations attempted, in one transaction.
    private func markAttempted(_ select: @escaping @Sendable (any LocalReadTransaction) throws -> [QueuedOperation]) async throws -> [QueuedOperation] {
        try await store.write { txn in try SyncContext.markAttempted(try select(txn), txn: txn) }
    }

    /// Marks `batch` attempted in `txn` (it may be applied from now on) and returns it so.
    static func markAttempted(_ batch: [QueuedOperation], txn: any LocalWriteTransaction) throws -> [QueuedOperation] {
        var batch = batch
        for index in batch.indices {
            batch[index].state = .attempted
            batch[index].attempts += 1
            try txn.upsert(batch[index].record, in: SystemTables.operations)
        }
        return batch
    }

    /// `selectBatch(txn, limit:excluding:)` as a function of the transaction.
    static func selectBatch(limit: Int, excluding inFlight: [QueuedOperation]) -> @Sendable (any LocalReadTransaction) throws -> [QueuedOperation] {
        { txn in try selectBatch(txn, limit: limit, excluding: inFlight) }
    }

    /// The next batch: the longest run of sendable operations in queue order with at most
    /// one operation per item (a second one waits for the first's outcome, so it is sent on
    /// the new version), skipping items blocked by a failed operation, cut at `limit` unless
    /// that would split a local transaction. Operations of `inFlight` (a batch sent and not
    /// yet answered) are skipped, and the batch ends before the first operation on one of
    /// their items.
    static func selectBatch(_ txn: any LocalReadTransaction, limit: Int, excluding inFlight: [QueuedOperation] = []) throws -> [QueuedOperation] {
        func key(_ op: QueuedOperation) -> String { CompositeKey.slashed(op.table, last: op.itemId) }
        let blocked = Set(try txn.records(in: SystemTables.operations, matching: Query(Field("state") == "failed"))
            .map { key(try QueuedOperation(record: $0)) })
        let sent = Set(inFlight.map(\.id))
        let busyItems = Set(inFlight.map(key))
        var batch: [QueuedOperation] = []
        var items = Set<String>()
        var offset = 0
        let pageSize = max(limit, 100)
        scan: while true {
            // The batch in flight is left out by the store, so its rows are neither read nor decoded.
            let wanted: QueryPredicate = sent.isEmpty
                ? Field("state") != "failed"
                : Field("state") != "failed" && .not(.isIn(SystemField.id, sent.map { .string($0) }))
            let rows = try txn.records(in: SystemTables.operations, matching: Query(
                wanted, order: [SortKey("sequence")], limit: pageSize, offset: offset))
            if rows.isEmpty { break }
            offset += rows.count
            for row in rows {
                let operation = try QueuedOperation(record: row)
                let itemKey = key(operation)
                if blocked.contains(itemKey) { continue }
                if items.contains(itemKey) || busyItems.contains(itemKey) { break scan }
                if let last = batch.last, batch.count >= limit,
                   last.transaction != operation.transaction || batch.count >= limit * 10 { break scan }
                batch.append(operation)
                items.insert(itemKey)
            }
        }
        return batch
    }

    struct Settled: Sendable {
        var events: [SyncEvent] = []
        var applied = 0
        var failed = 0
        var resolved = 0
        var settled = 0
    }

    /// Applies a batch's outcomes in one local transaction.
    static func settle(_ batch: [QueuedOperation], outcomes: [String: PushOutcome],
                       decisions: [String: ConflictResolution], txn: any LocalWriteTransaction) throws -> Settled {
        var result = Settled()
        let now = Timestamp.now()
        for operation in batch {
            guard let outcome = outcomes[operation.sendId] else { continue }
            result.settled += 1
            switch outcome {
            case .applied(let server):
                try txn.delete(id: operation.id, in: SystemTables.operations)
                try adoptServerVersion(server, for: operation, txn: txn)
                result.applied += 1
                result.events.append(.outboxMutationProcessed(table: operation.table, record: server, kind: operation.kind))
            case .conflict(let server):
                let decision = decisions[operation.id] ?? .leaveForApp
                switch decision {
                case .leaveForApp:
                    result.events.append(try fail(operation, status: 409, message: "conflict: the remote holds another version",
                                                  server: server, now: now, txn: txn))
                    result.failed += 1
                    continue
                case .takeServer:
                    try txn.delete(id: operation.id, in: SystemTables.operations)
                    // A newer local edit keeps its old base: it meets the server's record as a
                    // conflict of its own instead of silently overwriting the change that won.
                    if try OperationQueue.latest(txn, table: operation.table, itemId: operation.itemId) == nil {
                        try adoptServerVersion(server, for: operation, txn: txn)
                    }
                case .discardClient:
                    try txn.delete(id: operation.id, in: SystemTables.operations)
                    if try OperationQueue.latest(txn, table: operation.table, itemId: operation.itemId) == nil {
                        try txn.delete(id: operation.itemId, in: operation.table)
                    }
                case .keepClient:
                    try resend(operation, item: operation.item, server: server, txn: txn)
                case .merged(let merged):
                    try resend(operation, item: Record(id: operation.itemId, fields: merged.fields), server: server, txn: txn)
                }
                result.resolved += 1
                result.events.append(.conflictResolved(table: operation.table, itemId: operation.itemId,
                                                       resolution: describe(decision)))
            case .rejected(let reason, let status):
                result.events.append(try fail(operation, status: status, message: reason, server: nil, now: now, txn: txn))
                result.failed += 1
            }
        }
        return result
    }

    static func describe(_ resolution: ConflictResolution) -> String {
        switch resolution {
        case .takeServer: return "takeServer"
        case .keepClient: return "keepClient"
        case .merged: return "merged"
        case .discardClient: return "discardClient"
        case .leaveForApp: return "leaveForApp"
        }
    }

    /// After the remote settled an item: the next queued operation on it (if any) is rebased
    /// on the remote's version and the local copy keeps its pending fields; otherwise the
    /// local copy becomes the remote's record (or goes, for a tombstone).
    static func adoptServerVersion(_ server: Record, for operation: QueuedOperation,
                                   txn: any LocalWriteTransaction) throws {
        if var next = try OperationQueue.all(txn, table: operation.table, itemId: operation.itemId).first {
            if next.kind != .insert && next.state == .pending {
                next.baseVersion = server.deleted ? nil : server.version
                if server.deleted && next.kind == .update { next.kind = .insert }
                try txn.upsert(next.record, in: SystemTables.operations)
            }
            if var local = try txn.record(in: operation.table, id: operation.itemId), !server.deleted {
                local.version = server.version
                local.updatedAt = server.updatedAt
                try txn.upsert(local, in: operation.table)
            }
        } else {
            if server.deleted {
                try txn.delete(id: operation.itemId, in: operation.table)
            } else {
                try txn.upsert(Record(id: operation.itemId, fields: server.fields, version: server.version,
                                      updatedAt: server.updatedAt), in: operation.table)
            }
        }
    }

    /// Requeues an operation with a fresh send id on the remote's current version.
    static func resend(_ operation: QueuedOperation, item: Record?, server: Record, txn: any LocalWriteTransaction) throws {
        var again = operation
        again.sendId = UUID.random().uuidString
        again.state = .pending
        again.item = item.map { Record(id: operation.itemId, fields: $0.fields) } ?? operation.item
        if server.deleted {
            if operation.kind == .delete {
                // Already gone remotely: nothing left to send.
                try txn.delete(id: operation.id, in: SystemTables.operations)
                return
            }
            again.kind = .insert
            again.baseVersion = nil
        } else {
            if again.kind == .insert { again.kind = .update }
            again.baseVersion = server.version
        }
        try txn.upsert(again.record, in: SystemTables.operations)
        let isLatest = try OperationQueue.latest(txn, table: operation.table, itemId: operation.itemId)?.id == operation.id
        if var local = try txn.record(in: operation.table, id: operation.itemId) {
            local.version = server.deleted ? nil : server.version
            local.updatedAt = server.updatedAt
            if isLatest, let fields = again.item?.fields, again.kind != .delete { local.fields = fields }
            try txn.upsert(local, in: operation.table)
        }
    }

    /// Marks an operation failed and records why.
    static func fail(_ operation: QueuedOperation, status: Int?, message: String, server: Record?, now: Timestamp,
                     txn: any LocalWriteTransaction) throws -> SyncEvent {
        var failed = operation
        failed.state = .failed
        try txn.upsert(failed.record, in: SystemTables.operations)
        let error = OperationError(operation: failed, status: status, message: message, serverRecord: server, now: now)
        try txn.upsert(error.record, in: SystemTables.operationErrors)
        return .outboxMutationFailed(table: operation.table, record: operation.item, kind: operation.kind, error: error)
    }

    /// Settles an entry of ``operationErrors()``.
    public func resolve(_ error: OperationError, with resolution: OperationErrorResolution) async throws {
        try await gate.run {
            let isEmpty = try await self.store.write { txn -> Bool in
                guard let row = try txn.record(in: SystemTables.operations, id: error.operationId) else {
                    throw SyncError(.notFound, "operation '\(error.operationId)' is no longer queued")
                }
                let operation = try QueuedOperation(record: row)
                for stale in try txn.records(in: SystemTables.operationErrors,
                                             matching: Query(Field("operationId") == .string(operation.id))) {
                    try txn.delete(id: stale.id, in: SystemTables.operationErrors)
                }
                switch resolution {
                case .retry, .retryWith:
                    var item = operation.item
                    if case .retryWith(let record) = resolution { item = record }
                    if let server = error.serverRecord {
                        try SyncContext.resend(operation, item: item, server: server, txn: txn)
                    } else {
                        var again = operation
                        again.state = .pending
                        again.sendId = UUID.random().uuidString
                        again.item = item.map { Record(id: operation.itemId, fields: $0.fields) }
                        try txn.upsert(again.record, in: SystemTables.operations)
                    }
                case .takeServer, .discard:
                    try txn.delete(id: operation.id, in: SystemTables.operations)
                    let hasLater = try OperationQueue.latest(txn, table: operation.table, itemId: operation.itemId) != nil
                    if case .takeServer = resolution, let server = error.serverRecord {
                        if !hasLater { try SyncContext.adoptServerVersion(server, for: operation, txn: txn) }
                    } else if !hasLater {
                        try txn.delete(id: operation.itemId, in: operation.table)
                    }
                }
                return try txn.first(in: SystemTables.operations, matching: .all) == nil
            }
            self.broadcaster.publish(.outboxStatus(isEmpty: isEmpty))
        }
    }

    // MARK: Pull

    /// Brings the remote's changes to a table into the local store, page by page.
    ///
    /// If the table has queued operations they are pushed first (implicit push). Each page
    /// and its cursor are applied in one local transaction, so an interrupted pull resumes
    /// where it stopped. A record with a queued local operation is never overwritten.
    /// With a `queryId` the pull is incremental: it continues from the cursor stored under
    /// that id in `__config`. Without one it pulls everything.
    @discardableResult
    public func pull(_ table: String, query: Query = .all, queryId: String? = nil) async throws -> PullSummary {
        try Names.validateAppTable(table)
        return try await gate.run { try await self.pullLocked(table, query: query, queryId: queryId) }
    }

    func pullLocked(_ table: String, query: Query, queryId: String?) async throws -> PullSummary {
        if try await pendingOperationCount(table: table) > 0 {
            _ = try await pushLocked()
        }
        var cursor: String? = nil
        if let queryId { cursor = try await self.cursor(table: table, queryId: queryId) }
        var summary = PullSummary(table: table, isFullSync: cursor == nil)
        var done = 0
        let remote = self.remote
        let predicate = query.predicate, pageSize = options.pullPageSize
        func fetch(after cursor: String?) -> Task<PullPage, any Error> {
            Task { try await remote.pull(PullRequest(table: table, predicate: predicate, cursor: cursor, limit: pageSize)) }
        }
        // The next page is fetched while this one is applied: at most two pages are held.
        var next = fetch(after: cursor)
        defer { next.cancel() }
        while true {
            let page: PullPage
            do {
                page = try await next.value
                networkReachable(true)
            } catch {
                networkReachable(false)
                throw error
            }
            let more = page.remaining > 0 && !page.records.isEmpty
            if more { next = fetch(after: page.nextCursor) }
            if page.cursorReset { summary.isFullSync = true }
            let counts = try await store.write { txn in
                try SyncContext.applyPage(page, table: table, queryId: queryId, txn: txn)
            }
            summary.pages += 1
            summary.received += page.records.count
            summary.added += counts.added
            summary.updated += counts.updated
            summary.deleted += counts.deleted
            summary.skippedPending += counts.skippedPending
            done += page.records.count
            broadcaster.publish(.pullProgress(table: table, done: done, total: done + page.remaining))
            if !more { break }
        }
        broadcaster.publish(.modelSynced(ModelSyncedEvent(
            table: table, isFullSync: summary.isFullSync, isDeltaSync: !summary.isFullSync, added: summary.added,
            updated: summary.updated, deleted: summary.deleted, skippedPending: summary.skippedPending)))
        return summary
    }

    static func applyPage(_ page: PullPage, table: String, queryId: String?,
                          txn: any LocalWriteTransaction) throws -> PullSummary {
        var counts = PullSummary(table: table)
        let ids = page.records.map { Value.string($0.id) }
        var withOperations = Set<String>()
        if !ids.isEmpty {
            for row in try txn.records(in: SystemTables.operations,
                                       matching: Query(Field("table") == .string(table) && Field("itemId").isIn(ids))) {
                if let itemId = row["itemId"].stringValue { withOperations.insert(itemId) }
            }
        }
        for record in page.records {
            if withOperations.contains(record.id) { counts.skippedPending += 1; continue }
            let existing = try txn.record(in: table, id: record.id)
            if record.deleted {
                if existing != nil { try txn.delete(id: record.id, in: table); counts.deleted += 1 }
            } else {
                let incoming = Record(id: record.id, fields: record.fields, version: record.version,
                                      updatedAt: record.updatedAt)
                if existing == incoming { continue } // already up to date: no write, not an update
                try txn.upsert(incoming, in: table)
                if existing != nil { counts.updated += 1 } else { counts.added += 1 }
            }
        }
        if let queryId {
            try SystemTables.setConfigValue(txn, table: table, key: cursorKey(queryId), keyType: "cursor",
                                            value: page.nextCursor)
        }
        return counts
    }

    // MARK: Purge

    /// Removes local records matching the query and forgets the table's pull cursors, so the
    /// next pull brings them back. Refuses with ``SyncError/Code/pendingOperations`` while the
    /// table has queued operations, unless `force` is set, in which case those operations (and
    /// their errors) are dropped as well.
    public func purge(_ table: String, query: Query = .all, force: Bool = false) async throws {
        try Names.validateAppTable(table)
        try await gate.run {
            let isEmpty = try await self.store.write { txn -> Bool in
                let onTable = Field("table") == .string(table)
                let pending = try txn.count(in: SystemTables.operations, matching: onTable)
                if pending > 0 && !force {
                    throw SyncError(.pendingOperations, "table '\(table)' has \(pending) queued operations; push them or purge with force")
                }
                for system in [SystemTables.operations, SystemTables.operationErrors] {
                    for row in try txn.records(in: system, matching: Query(onTable)) {
                        try txn.delete(id: row.id, in: system)
                    }
                }
                for row in try txn.records(in: SystemTables.config,
                                           matching: Query(onTable && Field("keyType") == "cursor")) {
                    try txn.delete(id: row.id, in: SystemTables.config)
                }
                while true {
                    let rows = try txn.records(in: table, matching: Query(query.predicate, limit: 1000))
                    if rows.isEmpty { break }
                    for row in rows { try txn.delete(id: row.id, in: table) }
                }
                return try txn.first(in: SystemTables.operations, matching: .all) == nil
            }
            if force { self.broadcaster.publish(.outboxStatus(isEmpty: isEmpty)) }
        }
    }

    // MARK: Sync run

    /// A full sync run with Amplify's event sequence: `syncQueriesStarted`, one `modelSynced`
    /// per table, `syncQueriesReady`, then the outbox is drained, `outboxStatus`, and `ready`.
    /// Each table is pulled incrementally under the query id `queryId`.
    public func sync(_ tables: [String], queryId: String = "default") async throws {
        for table in tables { try Names.validateAppTable(table) }
        try await gate.run {
            self.broadcaster.publish(.syncQueriesStarted(tables: tables))
            for table in tables { _ = try await self.pullLocked(table, query: .all, queryId: queryId) }
            self.broadcaster.publish(.syncQueriesReady)
            _ = try await self.pushLocked()
            let isEmpty = try await self.store.read { try $0.first(in: SystemTables.operations, matching: .all) == nil }
            self.broadcaster.publish(.outboxStatus(isEmpty: isEmpty))
            self.broadcaster.publish(.ready)
        }
    }

    func networkReachable(_ active: Bool) {
        if network.set(active) { broadcaster.publish(.networkStatus(active: active)) }
    }
}
