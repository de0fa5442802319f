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
        /// The watcher is reading: any change to its tables may or may not be in what it reads.
        var reading = false
        /// The ids of the rows the last read returned (for ``Interest/matching(_:)``).
        var shown: Set<String> = []
        let wake: AsyncStream<Void>.Continuation
    }

    private struct State {
        var watchers: [UInt64: Watcher] = [:]
        var byTable: [String: Set<UInt64>] = [:]
        var nextId: UInt64 = 0
    }

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
        let (value, changes) = try await store.write { txn in
            let tracked = TrackedWriteTransaction(txn)
            return (try body(tracked), tracked.changes)
        }
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
                    guard var watcher = state.watchers[id], !watcher.dirty else { continue }
                    guard watcher.reading || Self.concerns(change, watcher) else { continue }
                    watcher.dirty = true
                    state.watchers[id] = watcher
                    watcher.wake.yield(())
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
        ObservedValue(observer: self, tables: [table], interest: .of(query), records: { txn in
            try check()
            return try txn.records(in: table, matching: query)
        }, value: value)
    }

    /// An observation of one record of `table`, shown as `value` makes it.
    func observation<Element>(of table: String, id: String, check: @escaping @Sendable () throws -> Void = {},
                              value: @escaping @Sendable (Record?) throws -> Element) -> ObservedValue<Element> {
        ObservedValue(observer: self, tables: [table], interest: .record(id), records: { txn in
            try check()
            return try txn.record(in: table, id: id).map { [$0] } ?? []
        }, value: { try value($0.first) })
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
    func register(tables: Set<String>, interest: Interest) -> (id: UInt64, wake: AsyncStream<Void>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            let id = state.nextId
            state.nextId += 1
            state.watchers[id] = Watcher(tables: tables, interest: interest, wake: continuation)
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
            state.watchers[id]?.dirty = false
            state.watchers[id]?.reading = true
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
