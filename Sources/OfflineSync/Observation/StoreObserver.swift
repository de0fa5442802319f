import Synchronization

/// Watches a local store for its observations (``ObservedValue``): writes made through
/// ``write(_:)`` are recorded row by row and, once committed, wake the observations of the
/// tables they touched. A ``SyncContext`` has one (``SyncContext/observer``) and writes
/// through it — local writes, pulled pages, conflict resolutions, purges — so its
/// observations see everything the context commits. Not public: an app that could write
/// through it could change rows that are never queued.
///
/// Waking an observation is a flag set under one lock and a non-blocking signal after it: a
/// writer never waits for an observer. The observations a commit concerns are found through
/// an index (`WatcherIndex`), not by asking each one, so a commit's cost to the writer does
/// not grow with the observations that it does not concern. The observer's task then brings
/// its value up to date when it asks for the next one: it patches the last result from the
/// rows the commits wrote (`ResultPatch`), or runs the query when it cannot, so a burst of
/// commits costs one patch or query per observer, not one per commit.
///
/// Commits made by another process on the same store (an app extension) are seen when the
/// adapter can tell (``LocalStore/externalChangeToken()``): while observations are live the
/// observer asks every `externalChangeInterval`, and each change makes every observation
/// read again, since the other process's rows are unknown.
package final class StoreObserver: Sendable {
    /// The store.
    package let store: any LocalStore

    /// What a watcher wants to hear about.
    enum Interest: Sendable {
        /// Any change to its tables (queries; the result decides whether anything shows).
        case anyRow
        /// A change to one record.
        case record(String)
        /// A change to a row the watcher last showed, or a write of a row that matches the
        /// predicate (a query without an offset: no other row can enter or leave its result).
        case matching(QueryPredicate)

        /// The interest of an observation of `query`: a query with an offset shifts when
        /// rows before it come or go, so any change counts.
        static func of(_ query: Query) -> Interest {
            query.offset == 0 ? .matching(query.predicate) : .anyRow
        }
    }

    /// The tables an observation watches.
    enum Tables: Sendable {
        /// Known before it reads (a query's, a record's).
        case fixed(Set<String>)
        /// Those its last read read (``SyncContext/observe(_:)``).
        case learned
    }

    private struct State {
        var watchers: [UInt64: ObservationWatcher] = [:]
        var byTable: [String: WatcherIndex] = [:]
        /// Watchers whose tables their reads tell: not indexed, looked at for every change.
        var learning: [UInt64: ObservationWatcher] = [:]
        var nextId: UInt64 = 0
        /// Counts announced changes (``ObservationWatcher/mark``).
        var marks: UInt64 = 0
        var order = WriteOrder()
    }

    /// Rows pending for one watcher past which it reads rather than patches.
    static let patchLimit = 10_000

    private let state = Mutex(State())
    private let external: ExternalChangePoller
    private let announceHook = Mutex<(@Sendable () async -> Void)?>(nil)

    /// Runs `hook` in every write between its commit and its announcement: a test pauses a
    /// write there to let another commit after it and announce first.
    package func beforeAnnouncing(_ hook: (@Sendable () async -> Void)?) {
        announceHook.withLock { $0 = hook }
    }

    /// An observer of `store` that, while observations are live, asks the store every
    /// `externalChangeInterval` whether another process committed to it.
    package init(store: any LocalStore, externalChangeInterval: Duration = .milliseconds(100)) {
        self.store = store
        self.external = ExternalChangePoller(interval: externalChangeInterval)
    }

    /// Runs `body` in a write transaction of the store (see `LocalStore.write(_:)`) and,
    /// after it commits, wakes the observations of the rows it wrote or deleted. A
    /// transaction that throws commits nothing and wakes nothing.
    package func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        let (ticket, observed) = state.withLock { ($0.order.start(), !$0.watchers.isEmpty) }
        let value: T
        let changes: [TableChange]
        do {
            (value, changes) = try await store.write { txn in
                let tracked = TrackedWriteTransaction(txn, listingRows: observed)
                return (try body(tracked), tracked.changes)
            }
        } catch {
            state.withLock { _ = $0.order.end(ticket) }
            throw error
        }
        if let hook = announceHook.withLock({ $0 }) { await hook() }
        announce(changes, ending: ticket)
        return value
    }

    /// Wakes the observations a change committed around this observer concerns (`ids: nil`
    /// when the rows are unknown): they read, since its place among this observer's own
    /// commits is unknown.
    package func announce(_ changes: [TableChange]) {
        announce(changes, ending: nil)
    }

    /// Hands `changes` to the watchers they concern and wakes those that had nothing to look
    /// at. For a write, whether it ran alone (``WriteOrder``) is decided under the same lock
    /// as the handing over, so no later write's changes reach a watcher first.
    private func announce(_ changes: [TableChange], ending ticket: WriteOrder.Ticket?) {
        // Woken after the lock is released: a wake may enter the kernel.
        var wakes: [AsyncStream<Void>.Continuation] = []
        state.withLock { state in
            let ordered = ticket.map { state.order.end($0) } ?? false
            var found: [ObservationWatcher] = []
            for var change in changes {
                change.ordered = ordered
                state.marks &+= 1
                found.removeAll(keepingCapacity: true)
                state.byTable[change.table]?.collect(change, mark: state.marks, into: &found)
                // While it reads, any table may be one it reads: a change anywhere counts.
                for watcher in state.learning.values where watcher.busy || watcher.tables.contains(change.table) {
                    found.append(watcher)
                }
                for watcher in found {
                    // A watcher that is due or looking keeps every change of its tables; a
                    // read may already include one: the patch applies it again harmlessly.
                    if watcher.keep(change) { wakes.append(watcher.wake) }
                    Self.setBusy(watcher, &state)
                }
            }
        }
        for wake in wakes { wake.yield(()) }
    }

    /// Wakes every observation: a commit was made elsewhere, to rows and tables unknown.
    private func announceEverything() {
        let tables = state.withLock { state in
            Set(state.byTable.keys).union(state.learning.values.flatMap(\.tables))
        }
        announce(tables.map { TableChange(table: $0, ids: nil) })
    }

    /// The records of `table` matching `query`, now and after every commit through this
    /// observer that changes them (see ``ObservedValue``). Errors (an unknown table, an
    /// invalid query) are thrown by the first `next()`.
    package func observe(_ table: String, _ query: Query = .all) -> ObservedValue<[Record]> {
        observation(of: table, query) { $0 }
    }

    /// The record of `table` with this id (`nil` while there is none), now and after every
    /// commit that writes or deletes it.
    package func observe(_ table: String, id: String) -> ObservedValue<Record?> {
        observation(of: table, id: id) { $0 }
    }

    /// An observation of the records of `table` matching `query`, shown as `value` makes
    /// them; `check` runs first in each read (a `SyncTable` refuses system tables there).
    func observation<Element>(of table: String, _ query: Query, check: @escaping @Sendable () throws -> Void = {},
                              value: @escaping @Sendable ([Record]) throws -> Element) -> ObservedValue<Element> {
        var patch: (@Sendable ([Record], [TableChange]) -> ResultPatch.Patched?)?
        if query.offset == 0 { patch = { @Sendable last, changes in ResultPatch.query(query, last: last, changes: changes) } }
        return ObservedValue(observer: self, tables: [table], interest: .of(query), records: { txn in
            try check()
            return try txn.records(in: table, matching: query)
        }, patch: patch, value: value)
    }

    /// An observation of one record of `table`, shown as `value` makes it.
    func observation<Element>(of table: String, id: String, check: @escaping @Sendable () throws -> Void = {},
                              value: @escaping @Sendable (Record?) throws -> Element) -> ObservedValue<Element> {
        ObservedValue(observer: self, tables: [table], interest: .record(id), records: { txn in
            try check()
            return try txn.record(in: table, id: id).map { [$0] } ?? []
        }, patch: { last, changes in ResultPatch.record(id: id, last: last, changes: changes) }, value: { try value($0.first) })
    }

    /// The number of live observations (each iterator of an ``ObservedValue`` is one until
    /// it ends or is dropped).
    package var observationCount: Int { state.withLock { $0.watchers.count } }

    // MARK: Watchers (one per observation iterator)

    /// Registers a watcher; its wake stream yields when a change concerns it and ends when
    /// it is dropped or its task is cancelled, which unregisters it.
    /// A watcher that `patches` keeps the changes it could patch its result with.
    func register(tables: Tables, interest: Interest, patches: Bool) -> (id: UInt64, wake: AsyncStream<Void>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            let id = state.nextId
            state.nextId += 1
            switch tables {
            case .fixed(let tables):
                let watcher = ObservationWatcher(id: id, tables: tables, interest: interest, patches: patches, wake: continuation)
                state.watchers[id] = watcher
                for table in tables { state.byTable[table, default: WatcherIndex()].add(watcher) }
            case .learned:
                let watcher = ObservationWatcher(id: id, tables: [], interest: interest, patches: false, learnsTables: true,
                                                 wake: continuation)
                state.watchers[id] = watcher
                state.learning[id] = watcher
            }
            return id
        }
        continuation.onTermination = { [weak self] _ in self?.unregister(id) }
        external.start(store: store, isNeeded: { [weak self] in self?.observationCount ?? 0 > 0 },
                       changed: { [weak self] in self?.announceEverything() })
        return (id, stream)
    }

    private func unregister(_ id: UInt64) {
        state.withLock { state in
            guard let watcher = state.watchers.removeValue(forKey: id) else { return }
            if state.learning.removeValue(forKey: id) != nil { return }
            for table in watcher.tables {
                state.byTable[table]?.remove(watcher)
                if state.byTable[table]?.isEmpty == true { state.byTable[table] = nil }
            }
        }
    }

    /// Waits until reads can see every commit another process made before the next poll's
    /// baseline (see `ExternalChangePoller`); immediate after the first time.
    func awaitExternalBaseline() async {
        await external.baseline(store)
    }

    /// Marks the start of a read: every change from now on may or may not be in it, and
    /// makes the watcher due again once the read ends.
    func beginRead(_ id: UInt64) {
        state.withLock { state in
            guard let watcher = state.watchers[id] else { return }
            watcher.beginRead()
            Self.setBusy(watcher, &state)
        }
    }

    /// The changes to patch the watcher's result with, when it is due and every change since
    /// its last look can patch; the watcher is then looking until `endPatch(_:_:rows:)` (or
    /// a read, if the patch cannot decide).
    func beginPatch(_ id: UInt64) -> [TableChange]? {
        state.withLock { state in
            guard let watcher = state.watchers[id], let changes = watcher.beginPatch() else { return nil }
            Self.setBusy(watcher, &state)
            return changes
        }
    }

    /// Ends a patch that left the result `rows`, whose ids changed as `shown` says.
    func endPatch(_ id: UInt64, _ shown: ResultPatch.ShownUpdate, rows: [Record]) {
        // A rebuilt result's ids are hashed before taking the lock.
        var rebuilt: Set<ExactString>?
        if case .rebuilt = shown { rebuilt = Set(rows.lazy.map { ExactString($0.id) }) }
        state.withLock { state in
            guard let watcher = state.watchers[id] else { return }
            watcher.endLook()
            if let rebuilt {
                Self.show(rebuilt, watcher, &state)
            } else if case .delta(let entered, let left) = shown, case .matching = watcher.interest {
                for id in left { watcher.shown.remove(id) }
                watcher.shown.formUnion(entered)
                for table in watcher.tables { state.byTable[table]?.show(watcher, entered: entered, left: left) }
            }
            Self.setBusy(watcher, &state)
        }
    }

    /// Marks the end of a read that returned the rows `shown` (`nil`: the read failed or
    /// its value is not rows) from `tables` (for a watcher that learns its tables).
    func endRead(_ id: UInt64, shown: Set<ExactString>?, tables: Set<String>? = nil) {
        state.withLock { state in
            guard let watcher = state.watchers[id] else { return }
            if let tables, state.learning[id] != nil { watcher.tables = tables }
            watcher.endLook()
            if let shown { Self.show(shown, watcher, &state) }
            Self.setBusy(watcher, &state)
        }
    }

    /// Notes that the watcher now shows the rows `shown` (kept for `.matching` interests, the
    /// only ones that look at the rows shown).
    private static func show(_ shown: Set<ExactString>, _ watcher: ObservationWatcher, _ state: inout State) {
        guard case .matching = watcher.interest else { return }
        let entered = shown.subtracting(watcher.shown), left = watcher.shown.subtracting(shown)
        watcher.shown = shown
        for table in watcher.tables { state.byTable[table]?.show(watcher, entered: entered, left: left) }
    }

    /// Files the watcher as busy or not in each of its tables' indexes.
    private static func setBusy(_ watcher: ObservationWatcher, _ state: inout State) {
        guard !watcher.learnsTables else { return }
        for table in watcher.tables { state.byTable[table]?.setBusy(watcher) }
    }

    /// A change was announced to the watcher since its last look.
    func isDue(_ id: UInt64) -> Bool {
        state.withLock { $0.watchers[id]?.isDue ?? false }
    }
}
