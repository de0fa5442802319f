import Synchronization

/// Watches a local store for its observations (``ObservedValue``): writes made through
/// ``write(_:)`` are recorded row by row and, once committed, wake the observations of the
/// tables they touched. A ``SyncContext`` has one (``SyncContext/observer``) and writes
/// through it — local writes, pulled pages, conflict resolutions, purges — so its
/// observations see everything the context commits.
///
/// Waking an observation is a flag and a non-blocking signal under one lock: a writer never
/// waits for an observer, and the query runs on the observer's task when it asks for its
/// next value, so a burst of commits costs one query per observer, not one per commit.
///
/// Commits made by another process on the same store (an app extension) are seen when the
/// adapter can tell (``LocalStore/externalChangeToken()``): while observations are live the
/// observer asks every `externalChangeInterval`, and each change makes every observation
/// read again, since the other process's rows are unknown.
public final class StoreObserver: Sendable {
    /// The store.
    public let store: any LocalStore

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

    private struct Watcher {
        var tables: Set<String>
        var interest: Interest
        /// A commit may have changed the watcher's value since its last read.
        var dirty = false
        /// The watcher is reading: any change to its tables may or may not be in what it reads,
        /// so each one is kept for a patch after the read.
        var reading = false
        /// The ids of the rows the last read or patch showed (for ``Interest/matching(_:)``).
        var shown: Set<String> = []
        /// The watcher is patching its last result: like `reading`, but the changes meanwhile
        /// are kept for the next patch.
        var patching = false
        /// The watcher's result can be patched (``ResultPatch``) rather than read.
        let patches: Bool
        /// The changes to its tables since the last read or patch, in commit order, while they
        /// can patch the result; `nil` once the watcher must read (until that read begins).
        var pending: [TableChange]?
        /// Rows listed by `pending`.
        var pendingRows = 0
        let wake: AsyncStream<Void>.Continuation

        /// Keeps `change` for the next patch, or gives patching up.
        mutating func keep(_ change: TableChange) {
            guard pending != nil else { return }
            pendingRows += change.ids?.count ?? 0
            if change.ordered, change.written != nil, pendingRows <= StoreObserver.patchLimit {
                pending?.append(change)
            } else {
                pending = nil
            }
        }
    }

    private struct State {
        var watchers: [UInt64: Watcher] = [:]
        var byTable: [String: Set<UInt64>] = [:]
        var nextId: UInt64 = 0
        /// Writes through ``StoreObserver/write(_:)`` started and not yet announced.
        var writesInFlight = 0
        /// Counts the times a write started while another was in flight.
        var overlaps: UInt64 = 0
    }

    /// Rows pending for one watcher past which it reads rather than patches.
    static let patchLimit = 10_000

    private let state = Mutex(State())
    private let external: ExternalChangePoller

    /// An observer of `store` that, while observations are live, asks the store every
    /// `externalChangeInterval` whether another process committed to it.
    public init(store: any LocalStore, externalChangeInterval: Duration = .milliseconds(100)) {
        self.store = store
        self.external = ExternalChangePoller(interval: externalChangeInterval)
    }

    /// Runs `body` in a write transaction of the store (see `LocalStore.write(_:)`) and,
    /// after it commits, wakes the observations of the rows it wrote or deleted. A
    /// transaction that throws commits nothing and wakes nothing.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        let ticket = state.withLock { state in
            state.writesInFlight += 1
            if state.writesInFlight > 1 { state.overlaps &+= 1 }
            return state.overlaps
        }
        let value: T
        var changes: [TableChange]
        do {
            (value, changes) = try await store.write { txn in
                let tracked = TrackedWriteTransaction(txn)
                return (try body(tracked), tracked.changes)
            }
        } catch {
            state.withLock { $0.writesInFlight -= 1 }
            throw error
        }
        // Alone from start to announcement: no other write's announcement can overtake it.
        let ordered = state.withLock { state in
            defer { state.writesInFlight -= 1 }
            return state.writesInFlight == 1 && state.overlaps == ticket
        }
        for index in changes.indices { changes[index].ordered = ordered }
        announce(changes)
        return value
    }

    /// Wakes the observations a committed change concerns. ``write(_:)`` calls it; call it
    /// yourself for a commit made around this observer (`ids: nil` when the rows are unknown).
    public func announce(_ changes: [TableChange]) {
        state.withLock { state in
            for change in changes {
                guard let ids = state.byTable[change.table] else { continue }
                for id in ids {
                    guard var watcher = state.watchers[id] else { continue }
                    if watcher.reading || watcher.dirty || watcher.patching || Self.concerns(change, watcher) {
                        // Once the watcher is reading or due to look, every change counts for
                        // the patch (`shown` no longer tells which rows it will show). A read
                        // may already include the change: the patch applies it again harmlessly.
                        watcher.keep(change)
                    } else {
                        continue
                    }
                    let wakes = !watcher.dirty
                    watcher.dirty = true
                    state.watchers[id] = watcher
                    if wakes { watcher.wake.yield(()) }
                }
            }
        }
    }

    /// Wakes every observation: a commit was made elsewhere, to rows and tables unknown.
    private func announceEverything() {
        let tables = state.withLock { Array($0.byTable.keys) }
        announce(tables.map { TableChange(table: $0, ids: nil) })
    }

    /// The records of `table` matching `query`, now and after every commit through this
    /// observer that changes them (see ``ObservedValue``). Errors (an unknown table, an
    /// invalid query) are thrown by the first `next()`.
    public func observe(_ table: String, _ query: Query = .all) -> ObservedValue<[Record]> {
        observation(of: table, query) { $0 }
    }

    /// The record of `table` with this id (`nil` while there is none), now and after every
    /// commit that writes or deletes it.
    public func observe(_ table: String, id: String) -> ObservedValue<Record?> {
        observation(of: table, id: id) { $0 }
    }

    /// An observation of the records of `table` matching `query`, shown as `value` makes
    /// them; `check` runs first in each read (a `SyncTable` refuses system tables there).
    func observation<Element>(of table: String, _ query: Query, check: @escaping @Sendable () throws -> Void = {},
                              value: @escaping @Sendable ([Record]) throws -> Element) -> ObservedValue<Element> {
        var patch: (@Sendable ([Record], [TableChange]) -> [Record]?)?
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
    public var observationCount: Int { state.withLock { $0.watchers.count } }

    /// Whether a change can alter what the watcher shows. Runs under the lock on the
    /// writer's task, so it only looks at rows the change lists: a pulled page costs each
    /// query observation at most one predicate test per row, until the first that counts.
    private static func concerns(_ change: TableChange, _ watcher: Watcher) -> Bool {
        guard let ids = change.ids else { return true }
        switch watcher.interest {
        case .anyRow: return !ids.isEmpty
        case .record(let id): return ids.contains(id)
        case .matching(let predicate):
            guard let written = change.written else { return !ids.isEmpty }
            for id in ids {
                if watcher.shown.contains(id) { return true }
                if let record = written[id], QueryEvaluator.matches(record, predicate) { return true }
            }
            return false
        }
    }

    // MARK: Watchers (one per observation iterator)

    /// Registers a watcher; its wake stream yields when a change concerns it and ends when
    /// it is dropped or its task is cancelled, which unregisters it.
    /// A watcher that `patches` keeps the changes it could patch its result with.
    func register(tables: Set<String>, interest: Interest, patches: Bool) -> (id: UInt64, wake: AsyncStream<Void>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            let id = state.nextId
            state.nextId += 1
            state.watchers[id] = Watcher(tables: tables, interest: interest, patches: patches, pending: patches ? [] : nil, wake: continuation)
            for table in tables { state.byTable[table, default: []].insert(id) }
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
            for table in watcher.tables {
                state.byTable[table]?.remove(id)
                if state.byTable[table]?.isEmpty == true { state.byTable[table] = nil }
            }
        }
    }

    /// Marks the start of a read: the watcher is clean, and every change until
    /// `endRead(_:)` makes it dirty again (the read may or may not include it).
    func beginRead(_ id: UInt64) {
        state.withLock { state in
            guard var watcher = state.watchers[id] else { return }
            watcher.dirty = false
            watcher.reading = true
            watcher.patching = false
            watcher.pending = watcher.patches ? [] : nil
            watcher.pendingRows = 0
            state.watchers[id] = watcher
        }
    }

    /// The changes to patch the watcher's result with, when it is due to look and every change
    /// since its last look can patch; the watcher is then clean and patching until
    /// `endPatch(_:shown:)` (or a read, if the patch cannot decide).
    func beginPatch(_ id: UInt64) -> [TableChange]? {
        state.withLock { state in
            guard var watcher = state.watchers[id], watcher.dirty, let pending = watcher.pending, !pending.isEmpty else { return nil }
            watcher.dirty = false
            watcher.patching = true
            watcher.pending = []
            watcher.pendingRows = 0
            state.watchers[id] = watcher
            return pending
        }
    }

    /// Ends a patch that showed the rows `shown`.
    func endPatch(_ id: UInt64, shown: Set<String>) {
        state.withLock { state in
            state.watchers[id]?.patching = false
            state.watchers[id]?.shown = shown
        }
    }

    /// Marks the end of a read that returned the rows `shown` (`nil`: the read failed or
    /// its value is not rows).
    func endRead(_ id: UInt64, shown: Set<String>?) {
        state.withLock { state in
            state.watchers[id]?.reading = false
            if let shown { state.watchers[id]?.shown = shown }
        }
    }

    func isDirty(_ id: UInt64) -> Bool {
        state.withLock { $0.watchers[id]?.dirty ?? false }
    }
}
