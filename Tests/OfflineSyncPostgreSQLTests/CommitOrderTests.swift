import Foundation
import OfflineSync
@testable import OfflineSyncPostgreSQL
import OfflineSyncService
import OfflineSyncTestSupport
import Synchronization
import Testing

/// A push the test holds open after its writes, before its commit: the store's thread waits
/// on it (never Swift's pool) until the test releases it.
final class HeldWrite: Sendable {
    private let state = Mutex<(order: ChangeOrder?, waiters: [CheckedContinuation<ChangeOrder?, Never>], passed: Bool)>((nil, [], false))
    private let gate = DispatchSemaphore(value: 0)

    /// Called on the store's thread with the transaction's order: signals the test and waits
    /// for ``release()`` (once: a run again after a conflict passes straight through).
    func reached(_ order: ChangeOrder) {
        let (waiters, wait) = state.withLock { state -> ([CheckedContinuation<ChangeOrder?, Never>], Bool) in
            if state.passed { return ([], false) }
            state.passed = true
            state.order = order
            defer { state.waiters = [] }
            return (state.waiters, true)
        }
        for waiter in waiters { waiter.resume(returning: order) }
        // Bounded, so a failed test never leaves a connection held for good.
        if wait { _ = gate.wait(timeout: .now() + 120) }
    }

    /// The write failed before it reached the hold: whoever waits for it stops waiting.
    func failed() {
        let waiters = state.withLock { state -> [CheckedContinuation<ChangeOrder?, Never>] in
            state.passed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// Returns once the transaction has written and waits, with its order; `nil` when the
    /// write failed before it got there, or did not get there within 120 s (a push that never
    /// reached a concurrent write: the test fails instead of hanging the run).
    func arrived() async -> ChangeOrder? {
        let timer = Task { [weak self] in
            // Cancelled once the wait ended: nothing to end then.
            guard (try? await Task.sleep(for: .seconds(120))) != nil else { return }
            self?.expire()
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let known = state.withLock { state -> ChangeOrder?? in
                if let order = state.order { return .some(order) }
                if state.passed { return .some(nil) }
                state.waiters.append(continuation)
                return nil
            }
            if let known { continuation.resume(returning: known) }
        }
    }

    /// Ends every wait in ``arrived()`` under way with `nil`.
    private func expire() {
        let waiters = state.withLock { state -> [CheckedContinuation<ChangeOrder?, Never>] in
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// Why the write `task` pushes has not arrived, for a test's message: the push's error
    /// when it failed before its hold (it has ended), or that it did not get there within the
    /// wait — then the task is cancelled, not awaited (it may never end).
    func whyNotArrived<T: Sendable>(_ task: Task<T, any Error>) async -> String {
        guard state.withLock({ $0.passed && $0.order == nil }) else {
            task.cancel()
            return "it did not reach its hold within 120 s"
        }
        do {
            _ = try await task.value
            return "it ended without a concurrent write"
        } catch {
            return "it failed: \(error)"
        }
    }

    /// Whether the transaction has written and waits, or failed before it got there.
    var hasArrived: Bool { state.withLock { $0.order != nil || $0.passed } }

    /// Lets the transaction commit.
    func release() { gate.signal() }
}

/// A real PostgreSQLStore whose next concurrent writes the test holds open before their
/// commit (``HeldWrite``); everything else goes straight to the store.
final class HoldingStore: CommitOrderedStore {
    let inner: PostgreSQLStore
    private let holds = Mutex<[HeldWrite]>([])

    init(_ inner: PostgreSQLStore) { self.inner = inner }

    /// Holds the next concurrent write that begins (writes begin in the order of these calls).
    func holdNext() -> HeldWrite {
        let hold = HeldWrite()
        holds.withLock { $0.append(hold) }
        return hold
    }

    func concurrentWrite<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction, ChangeOrder) throws -> T) async throws -> T {
        let hold = holds.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        do {
            return try await inner.concurrentWrite { txn, order in
                let value = try body(txn, order)
                // Its buffered writes too, so the rows it writes are locked while it is held.
                if hold != nil { try (txn as? PGTransaction)?.flush() }
                hold?.reached(order)
                return value
            }
        } catch {
            hold?.failed()
            throw error
        }
    }

    func orderedWrite<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction, ChangeOrder) throws -> T) async throws -> T {
        try await inner.orderedWrite(body)
    }

    var holdsRows: Bool { inner.holdsRows }

    func orderedRead<T: Sendable>(stamps: Bool, _ body: @escaping @Sendable (any LocalReadTransaction, ChangeHorizon) throws -> T) async throws -> T {
        try await inner.orderedRead(stamps: stamps, body)
    }

    func defineTable(_ schema: TableSchema) async throws { try await inner.defineTable(schema) }
    func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T { try await inner.read(body) }
    func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T { try await inner.write(body) }
    func write<T: Sendable>(confinedTo tables: Set<String>, _ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await inner.write(confinedTo: tables, body)
    }
    func close() async throws { try await inner.close() }
}

/// Pushes that commit out of the order they began in, on two service instances over one
/// PostgreSQL schema: a pull never passes a change that may still commit below it, every
/// change arrives, and two pushes of one row settle on that row (one applies, the other is a
/// conflict carrying it).
@Suite("Commit order: pushes that begin first and commit last, on two instances",
       .enabled(if: TestServer.shouldRun, TestServer.skipMessage), .serialized)
struct CommitOrderTests {
    static let table = "notes"

    /// Runs `body` with two instances (each its own store and pool of five connections: four
    /// pushes held open and a pull) on one schema, and closes their stores after it.
    static func withInstances(_ name: String, _ body: ([HoldingStore], [OfflineSyncService]) async throws -> Void) async throws {
        let directory = URL(fileURLWithPath: "/tmp/commit-order-\(name)-" + UUID().uuidString)
        let stores = [HoldingStore(try await makeStore(directory, poolSize: 5)), HoldingStore(try await makeStore(directory, poolSize: 5))]
        do {
            var services: [OfflineSyncService] = []
            for store in stores {
                let service = try await OfflineSyncService(store: store)
                // Pulls that find only held changes answer after 50 ms rather than 2 s.
                service.horizonWaitMilliseconds.store(50, ordering: .relaxed)
                // An instance defines a table on its first request (a write alone in the
                // schema, which would wait for a push the test holds open): define it now.
                _ = try await service.pull(identity: "setup", PullRequest(table: table))
                services.append(service)
            }
            try await body(stores, services)
        } catch {
            for store in stores { try? await store.close() }
            throw error
        }
        for store in stores { try await store.close() }
    }

    static func insert(_ id: String, _ text: String) -> PushOperation {
        PushOperation(id: "op-" + UUID().uuidString, table: table, itemId: id, kind: .insert, item: Record(id: id, fields: ["text": .string(text)]), baseVersion: nil)
    }

    @Test("a push that began later and committed first is not served until the earlier one ends; then both are, in order")
    func laterCommitWaitsForEarlier() async throws {
        guard TestServer.require() != nil else { return }
        try await Self.withInstances("pair") { stores, services in
            let me: Identity = "writer"
            let hold = stores[0].holdNext()
            defer { hold.release() }
            let earlier = Task { try await services[0].push(identity: me, [Self.insert("a", "began first")]) }
            guard let early = await hold.arrived() else {
                hold.release()
                Issue.record("the earlier push did not write: \(await hold.whyNotArrived(earlier))")
                return
            }
            let later = try await services[1].push(identity: me, [Self.insert("b", "began second")])
            guard case .applied = later.first?.outcome else {
                Issue.record("the later push: \(String(describing: later.first?.outcome))")
                hold.release()
                return
            }
            // Without the horizon this page would hold `b`, and its cursor would pass `a`'s
            // number, which commits below it a moment later. With it, the pull waits for the
            // earlier push, then answers busy (the client tries again).
            do {
                let during = try await services[1].pull(identity: me, PullRequest(table: Self.table))
                Issue.record("served while an earlier push was open: \(during.records.map(\.id)), remaining \(during.remaining)")
            } catch let error as SyncError {
                #expect(error.code == .busy, "\(error)")
            }
            hold.release()
            let first = try await earlier.value
            guard case .applied(let a) = first.first?.outcome else {
                Issue.record("the earlier push: \(String(describing: first.first?.outcome))")
                return
            }
            #expect(early.first > 0)
            guard case .applied(let b)? = later.first?.outcome else { return }
            // Both, each as its push returned it. (The earlier push may have run again after
            // the later one committed — PostgreSQL rolls back one of two writers whose reads
            // and writes cross — and then commits above it.)
            let after = try await services[0].pull(identity: me, PullRequest(table: Self.table))
            #expect(Set(after.records.map(\.id)) == ["a", "b"], "both: \(after.records.map(\.id))")
            #expect(after.records.first { $0.id == "a" }?.version == a.version)
            #expect(after.records.first { $0.id == "b" }?.version == b.version)
            #expect(after.remaining == 0)
            let again = try await services[1].pull(identity: me, PullRequest(table: Self.table, cursor: after.nextCursor))
            #expect(again.records.isEmpty && again.remaining == 0)
        }
    }

    /// A deterministic generator for the schedules.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// One client's copy of an identity's rows, kept by pulling with its cursor alone.
    struct Reader {
        let identity: Identity
        var cursor: String?
        var rows: [String: Record] = [:]

        /// Pulls a page; a `busy` answer (only changes held behind an open push) is a page to
        /// ask for again, so it counts as one remaining.
        mutating func pull(_ service: OfflineSyncService) async throws -> Int {
            let page: PullPage
            do {
                page = try await service.pull(identity: identity, PullRequest(table: CommitOrderTests.table, cursor: cursor))
            } catch let error as SyncError where error.code == .busy {
                return 1
            }
            for record in page.records { rows[record.id] = record }
            cursor = page.nextCursor
            return page.remaining
        }
    }

    @Test("random schedules: pushes held open and released out of order on two instances; pulls between; every reader ends with exactly the rows", arguments: 0..<4)
    func randomSchedules(seed: UInt64) async throws {
        guard TestServer.require() != nil else { return }
        try await Self.withInstances("random-\(seed)") { stores, services in
            var random = Generator(state: seed &* 7919 &+ 17)
            let identities: [Identity] = ["ann", "bob"]
            var readers = identities.map { Reader(identity: $0) }
            // The versions the pushes' outcomes gave each identity's items.
            var versions: [Identity: [String: String]] = [:]
            var next = 0
            for round in 0..<10 {
                // Two to four pushes, each of fresh items or of items no other push of the round
                // touches (two pushes of one row would wait on each other's row lock, which the
                // last test covers).
                var scheduled: [(instance: Int, identity: Identity, operations: [PushOperation])] = []
                var touched = Set<String>()
                for _ in 0..<Int.random(in: 2...4, using: &random) {
                    let identity = identities.randomElement(using: &random)!
                    var operations: [PushOperation] = []
                    for _ in 0..<Int.random(in: 1...3, using: &random) {
                        let known = versions[identity, default: [:]].filter { !touched.contains(identity.text + "/" + $0.key) }
                        if let (item, version) = known.randomElement(using: &random), Bool.random(using: &random) {
                            touched.insert(identity.text + "/" + item)
                            operations.append(PushOperation(id: "op-\(round)-\(next)", table: Self.table, itemId: item, kind: .update,
                                                            item: Record(id: item, fields: ["text": .string("r\(round)")]), baseVersion: version))
                        } else {
                            let item = "item-\(next)"
                            touched.insert(identity.text + "/" + item)
                            operations.append(Self.insert(item, "r\(round)"))
                        }
                        next += 1
                    }
                    scheduled.append((Int.random(in: 0...1, using: &random), identity, operations))
                }
                // Begin them one after another, each held open after its writes.
                var running: [(hold: HeldWrite, task: Task<[PushResult], any Error>, identity: Identity)] = []
                for push in scheduled {
                    let hold = stores[push.instance].holdNext()
                    let service = services[push.instance]
                    let task = Task { try await service.push(identity: push.identity, push.operations) }
                    guard await hold.arrived() != nil else {
                        hold.release()
                        for started in running { started.hold.release() }
                        Issue.record("round \(round): a push did not write: \(await hold.whyNotArrived(task))")
                        return
                    }
                    running.append((hold, task, push.identity))
                }
                // Commit them in a random order, pulling from a random instance after each.
                for index in running.indices.shuffled(using: &random) {
                    running[index].hold.release()
                    let results = try await running[index].task.value
                    for result in results {
                        guard case .applied(let record) = result.outcome else {
                            Issue.record("round \(round): \(result.operationId) was not applied: \(result.outcome)")
                            continue
                        }
                        versions[running[index].identity, default: [:]][record.id] = record.version
                    }
                    for reader in readers.indices where Bool.random(using: &random) {
                        _ = try await readers[reader].pull(services[Int.random(in: 0...1, using: &random)])
                    }
                }
            }
            // Pull to the end; each reader then holds exactly its identity's rows, at the
            // versions the pushes returned.
            for reader in readers.indices {
                var pulls = 0
                while try await readers[reader].pull(services[pulls % 2]) > 0 {
                    pulls += 1
                    if pulls > 100 { Issue.record("\(readers[reader].identity) never caught up"); break }
                }
                let expected = versions[readers[reader].identity, default: [:]]
                let pulled = readers[reader].rows.mapValues(\.version)
                #expect(pulled == expected, "\(readers[reader].identity): missing \(Set(expected.keys).subtracting(pulled.keys).sorted()), stale \(expected.filter { pulled[$0.key] != nil && pulled[$0.key] != $0.value }.keys.sorted())")
                let stored = try await services[0].query(identity: readers[reader].identity, table: Self.table)
                #expect(Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0.version) }) == expected)
            }
        }
    }

    @Test("two instances update one row from the same version at once: one applies, the other is a conflict carrying it, 20 times")
    func oneRowSettlesConflicts() async throws {
        guard TestServer.require() != nil else { return }
        try await Self.withInstances("conflicts") { _, services in
            let me: Identity = "editor"
            for round in 0..<20 {
                let item = "row-\(round)"
                guard case .applied(let created)? = try await services[0].push(identity: me, [Self.insert(item, "v0")]).first?.outcome else {
                    Issue.record("creating \(item)")
                    return
                }
                let results = try await withThrowingTaskGroup(of: PushResult?.self) { group -> [PushResult] in
                    for instance in 0..<2 {
                        group.addTask {
                            try await services[instance].push(identity: me, [PushOperation(
                                id: "edit-\(round)-\(instance)", table: Self.table, itemId: item, kind: .update,
                                item: Record(id: item, fields: ["text": .string("by \(instance)")]), baseVersion: created.version)]).first
                        }
                    }
                    return try await group.reduce(into: []) { if let result = $1 { $0.append(result) } }
                }
                let applied = results.compactMap { result -> Record? in
                    if case .applied(let record) = result.outcome { return record } else { return nil }
                }
                let conflicts = results.compactMap { result -> Record? in
                    if case .conflict(let server) = result.outcome { return server } else { return nil }
                }
                #expect(applied.count == 1 && conflicts.count == 1, "round \(round): \(results.map(\.outcome))")
                if let winner = applied.first, let carried = conflicts.first {
                    #expect(carried.version == winner.version && carried["text"] == winner["text"], "round \(round): the conflict carries the applied row")
                    let stored = try await services[1].record(identity: me, table: Self.table, id: item)
                    #expect(stored?.version == winner.version && stored?["text"] == winner["text"], "round \(round): no lost update")
                }
            }
        }
    }

    @Test("a push that writes a shared table and an owner-only one numbers its owner-only rows by the commit order: a reader past earlier pushes gets them")
    func mixedPushKeepsTheOrder() async throws {
        guard TestServer.require() != nil else { return }
        let directory = URL(fileURLWithPath: "/tmp/commit-order-mixed-" + UUID().uuidString)
        let store = try await makeStore(directory, poolSize: 3)
        do {
            let rules = SyncRules(tables: ["board": TableRules(read: [Grant(.everyone)], write: [Grant(.everyone)])])
            let service = try await OfflineSyncService(store: store, rules: rules)
            let me: Identity = "mixer"
            let first = try await service.push(identity: me, [Self.insert("n1", "alone")])
            #expect(first.allSatisfy { if case .applied = $0.outcome { true } else { false } })
            let page = try await service.pull(identity: me, PullRequest(table: Self.table))
            #expect(page.records.map(\.id) == ["n1"])
            let mixed = try await service.push(identity: me, [
                PushOperation(id: "op-board", table: "board", itemId: "b1", kind: .insert,
                              item: Record(id: "b1", fields: ["text": "shared"]), baseVersion: nil),
                Self.insert("n2", "beside a shared row")])
            #expect(mixed.allSatisfy { if case .applied = $0.outcome { true } else { false } }, "\(mixed.map(\.outcome))")
            // A counter's number would lie below the cursor the first pull gave.
            let next = try await service.pull(identity: me, PullRequest(table: Self.table, cursor: page.nextCursor))
            #expect(next.records.map(\.id) == ["n2"], "\(next.records.map(\.id))")
            let board = try await service.pull(identity: me, PullRequest(table: "board"))
            #expect(board.records.map(\.id) == ["b1"])
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    @Test("a keyset page after a row stamped X serves the rest of X even when a writer that read its clock earlier registers in between and lowers the stamp horizon")
    func continuationKeepsTheMillisecond() async throws {
        guard let url = TestServer.require() else { return }
        try await Self.withInstances("stamp-floor") { _, services in
            let me: Identity = "pager"
            // One push: five rows with one stamp.
            let pushed = try await services[0].push(identity: me, (1...5).map { Self.insert("s\($0)", "tie") })
            #expect(pushed.allSatisfy { if case .applied = $0.outcome { true } else { false } })
            let order = [SortKey(SystemField.updatedAt), SortKey(SystemField.id)]
            // A read serves only stamps below its clock's millisecond: wait for it to pass theirs.
            let written = try await services[0].query(identity: me, table: Self.table, order: [SortKey(SystemField.id)])
            let newest = try #require(written.compactMap(\.updatedAt).max())
            let deadline = ContinuousClock.now + .seconds(5)
            while Timestamp.now() <= newest, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
            // A writer of another test's schema in the same database, stamped below these rows
            // and still running, holds the stamp horizon back (Docs/PostgreSQLAdapter.md) until
            // it ends: read again until the page holds both rows, for at most 10 s.
            var first = try await services[0].query(identity: me, table: Self.table, order: order, limit: 2)
            let settled = ContinuousClock.now + .seconds(10)
            while first.count < 2, ContinuousClock.now < settled {
                try await Task.sleep(for: .milliseconds(5))
                first = try await services[0].query(identity: me, table: Self.table, order: order, limit: 2)
            }
            #expect(first.map(\.id) == ["s1", "s2"])
            guard let last = first.last, let stamp = last.updatedAt else {
                Issue.record("no first page")
                return
            }
            // A writer that read its clock 10 ms before that stamp and takes its stamp lock only now.
            let stalled = try PGConnection.connect(url, password: nil)
            defer { stalled.close() }
            let key = PostgreSQLStore.stampLockBase + stamp.millisecondsSince1970 - 10 - PostgreSQLStore.stampLockEpoch
            _ = try stalled.execute("BEGIN")
            _ = try stalled.execute("SELECT pg_advisory_xact_lock_shared(\(key))")
            let after: QueryPredicate = .or([.compare(SystemField.updatedAt, .greater, .date(stamp)),
                                             .and([.compare(SystemField.updatedAt, .equal, .date(stamp)),
                                                   .compare(SystemField.id, .greater, .string(last.id))])])
            // Its horizon alone is below the stamp: the page would end before the rest of it.
            let lowered = try await services[1].query(identity: me, table: Self.table, predicate: after, order: order, limit: 10)
            #expect(lowered.isEmpty, "the stalled writer's lock did not lower the horizon: \(lowered.map(\.id))")
            let next = try await services[1].queryPage(claims: Claims(identity: me), table: Self.table, predicate: after, order: order,
                                                       offset: 0, limit: 10, includeDeleted: false,
                                                       stampsBelow: Timestamp(millisecondsSince1970: stamp.millisecondsSince1970 + 1))
            #expect(next.records.map(\.id) == ["s3", "s4", "s5"])
            #expect(next.stampBound == Timestamp(millisecondsSince1970: stamp.millisecondsSince1970 + 1))
            _ = try stalled.execute("ROLLBACK")
        }
    }
}
