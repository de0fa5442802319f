import Foundation
import OfflineSync
@testable import OfflineSyncPostgreSQL
@testable import OfflineSyncService
import OfflineSyncTestSupport
import Synchronization
import Testing

/// Raised while the writers write; the readers read it.
private final class WritingFlag: Sendable {
    private let raised = Atomic(true)
    var isRaised: Bool { raised.load(ordering: .acquiring) }
    func lower() { raised.store(false, ordering: .releasing) }
}

/// Shared tables written by pushes that run at the same time, on two service instances over
/// one PostgreSQL schema: a write that began after a membership change and commits after the
/// member's pull passed that change still reaches the member, and members that pull while
/// lists, memberships and todos change from every side end with exactly what the rules let
/// them read.
@Suite("Shared tables under concurrent writers on two instances", .enabled(if: TestServer.shouldRun, TestServer.skipMessage), .serialized)
struct SharedConcurrencyTests {

    /// Two instances (each its own store and pool) on one schema with the shared-lists rules.
    static func withInstances(_ name: String, fanoutLimit: Int = OfflineSyncService.defaultGroupFanoutLimit, poolSize: Int = 5,
                              ownerReadsMembers: Bool = false, _ body: ([HoldingStore], [OfflineSyncService]) async throws -> Void) async throws {
        let directory = URL(fileURLWithPath: "/tmp/shared-concurrency-\(name)-" + UUID().uuidString)
        let stores = [HoldingStore(try await makeStore(directory, poolSize: poolSize)),
                      HoldingStore(try await makeStore(directory, poolSize: poolSize))]
        do {
            var services: [OfflineSyncService] = []
            for store in stores {
                let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: ownerReadsMembers),
                                                           groupFanoutLimit: fanoutLimit)
                service.horizonWaitMilliseconds.store(50, ordering: .relaxed)
                for table in sharedListsTables { _ = try await service.pull(identity: "setup", PullRequest(table: table)) }
                services.append(service)
            }
            try await body(stores, services)
        } catch {
            for store in stores { try? await store.close() }
            throw error
        }
        for store in stores { try await store.close() }
    }

    static func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-" + UUID().uuidString, table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    static func member(_ user: String, of list: String) -> PushOperation {
        insert("list_members", "m-\(list)-\(user)", ["list_id": .string(list), "user_id": .string(user)])
    }

    static func applied(_ results: [PushResult]) -> Bool {
        results.allSatisfy { if case .applied = $0.outcome { true } else { false } }
    }

    /// One identity's copy of a table, kept by pulling with its cursor alone, as a device does.
    struct Copy {
        var cursor: String?
        var rows: [String: Record] = [:]
        var limit = 7

        /// Pulls one page; `busy` (only changes held behind an open write) leaves it as it was.
        /// Returns whether more remain.
        mutating func pull(_ service: OfflineSyncService, _ identity: Identity, _ table: String) async throws -> Bool {
            let page: PullPage
            do {
                page = try await service.pull(identity: identity, PullRequest(table: table, cursor: cursor, limit: limit))
            } catch let error as SyncError where error.code == .busy {
                return true
            }
            if page.cursorReset { rows = [:] }
            for record in page.records {
                if record.deleted { rows[record.id] = nil } else { rows[record.id] = record }
            }
            for id in page.removed { rows[id] = nil }
            cursor = page.nextCursor
            return page.remaining > 0 || !page.records.isEmpty || !page.removed.isEmpty
        }
    }

    @Test("a todo that began after a member was added, and commits after the member's pull passed the addition, reaches the member")
    func writeBehindMembershipReachesTheMember() async throws {
        guard TestServer.require() != nil else { return }
        try await Self.withInstances("behind") { stores, services in
            let owner: Identity = "olga", bob: Identity = "bob"
            #expect(Self.applied(try await services[0].push(identity: owner, [
                Self.insert("lists", "L", ["name": "groceries"]), Self.member("olga", of: "L"),
                Self.insert("todos", "t0", ["list_id": "L", "title": "milk"])])))
            // Enough rows that the membership's and the todo's log entries lie on index pages
            // of their own: PostgreSQL's serializable checks lock pages, and on one small page
            // they would roll one of the two back whatever the service holds.
            for start in stride(from: 0, to: 2_000, by: 500) {
                #expect(Self.applied(try await services[0].push(identity: owner, (start..<start + 500).map {
                    Self.insert("todos", String(format: "a%04d", $0), ["list_id": "L", "title": "filler"])
                })))
            }
            var copy = Copy(limit: 500)
            var emptyPages = 0
            while try await copy.pull(services[1], bob, "todos"), emptyPages < 100 {
                emptyPages += 1
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(emptyPages < 100, "bob's first pull kept answering busy or pages")
            #expect(copy.rows.isEmpty)
            // The membership change writes the group's row and is held open before its commit.
            // Both holds are let go on every path out (a hold left waiting keeps its
            // connection, and the store's close waits behind it).
            let addition = stores[0].holdNext()
            defer { addition.release() }
            let adding = Task { try await services[0].push(identity: owner, [Self.member("bob", of: "L")]) }
            guard await addition.arrived() != nil else {
                addition.release()
                Issue.record("the membership push did not write: \(await addition.whyNotArrived(adding))")
                return
            }
            // A todo begins after it (a larger number) and is held open too, once its body ran.
            let writing = stores[1].holdNext()
            defer { writing.release() }
            let todo = Task { try await services[1].push(identity: owner, [Self.insert("todos", "t1", ["list_id": "L", "title": "bread"])]) }
            // It either waits for the membership's row (it holds the group's row it decides from)
            // or, were it not to, would have written already.
            try await waitForLockWaiterOrArrival(writing)
            addition.release()
            #expect(Self.applied(try await adding.value))
            guard await writing.arrived() != nil else {
                writing.release()
                Issue.record("the todo push did not write: \(await writing.whyNotArrived(todo))")
                return
            }
            // Bob pulls past the membership's event while the todo is still open.
            var pages = 0
            while copy.rows.count < 2_001, pages < 1_000 {
                _ = try await copy.pull(services[0], bob, "todos")
                pages += 1
            }
            #expect(copy.rows.count == 2_001, "bob's pulls while the todo is open gave \(copy.rows.count) todos")
            writing.release()
            #expect(Self.applied(try await todo.value))
            pages = 0
            while try await copy.pull(services[1], bob, "todos"), pages < 50 { pages += 1 }
            #expect(copy.rows.count == 2_002 && copy.rows["t0"] != nil && copy.rows["t1"] != nil,
                    "bob holds \(copy.rows.count) todos, t0: \(copy.rows["t0"] != nil), t1: \(copy.rows["t1"] != nil)")
        }
    }

    @Test("a batch into more small groups than one push holds beside others runs alone, whole, and its rows reach the members")
    func batchIntoManyGroupsRunsAlone() async throws {
        guard TestServer.require() != nil else { return }
        try await Self.withInstances("many-groups") { _, services in
            let owner: Identity = "olga"
            let lists = (0..<40).map { "M\($0)" }
            #expect(Self.applied(try await services[0].push(identity: owner, lists.flatMap { list in
                [Self.insert("lists", list, ["name": .string(list)]), Self.member("olga", of: list), Self.member("bob", of: list)]
            })))
            // Two holds a todo (each list's group row, and each list as an owner_of target is
            // not read here): 80 todos into 40 groups and 40 more groups' memberships.
            let more = (40..<80).map { "M\($0)" }
            let batch = lists.flatMap { list in
                [Self.insert("todos", "\(list)-a", ["list_id": .string(list), "title": "a"]),
                 Self.insert("todos", "\(list)-b", ["list_id": .string(list), "title": "b"])]
            } + more.flatMap { list in
                [Self.insert("lists", list, ["name": .string(list)]), Self.member("olga", of: list), Self.member("bob", of: list),
                 Self.insert("todos", "\(list)-a", ["list_id": .string(list), "title": "a"])]
            }
            #expect(PushTransaction.holdLimit < 80, "the batch must hold more rows than a push may")
            let results = try await services[1].push(identity: owner, batch)
            #expect(Self.applied(results), "\(results.filter { if case .applied = $0.outcome { false } else { true } }.prefix(3))")
            var copy = Copy(limit: 500)
            var pages = 0
            while try await copy.pull(services[0], "bob", "todos"), pages < 20 { pages += 1 }
            #expect(copy.rows.count == 120, "bob holds \(copy.rows.count) todos")
        }
    }

    /// Returns once a push waits to hold a row (behind the membership change's exclusive
    /// hold of the group's row), or `hold`'s write has arrived at its hold.
    func waitForLockWaiterOrArrival(_ hold: HeldWrite) async throws {
        guard let url = TestServer.url else { return }
        // libpq blocks: the watch runs on a thread of its own, never on Swift's pool (two
        // blocked pool threads on a two-core machine stop every task of the test run).
        let seen = try await Self.offPool { () throws -> Bool in
            let watcher = try PGConnection.connect(url, password: nil)
            defer { watcher.close() }
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                // A hold (PGTransaction.heldRecord) waiting behind the membership change's.
                let waiting = try watcher.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'advisory' AND classid = 1330858060 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
                if (waiting.int64(0, 0) ?? 0) > 0 || hold.hasArrived { return true }
                Thread.sleep(forTimeInterval: 0.002)
            }
            return false
        }
        if seen { return }
        Issue.record("the todo push neither waited on a lock nor wrote within 30 s")
    }

    /// Runs `work` on a dispatch queue's thread and returns what it returned.
    static func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// With `ownerReadsMembers` the owner reads membership rows through an `owner_of` grant
    /// (the target held by each membership write, a new list's first rows read by its insert).
    @Test("members pulling while lists, memberships and todos change on two instances end with exactly what the rules let them read",
          arguments: [(seed: 1, fanoutLimit: 2, ownerReadsMembers: false),
                      (seed: 2, fanoutLimit: OfflineSyncService.defaultGroupFanoutLimit, ownerReadsMembers: true),
                      (seed: 3, fanoutLimit: 1, ownerReadsMembers: true)])
    func membersConvergeUnderConcurrentWriters(seed: Int, fanoutLimit: Int, ownerReadsMembers: Bool) async throws {
        guard TestServer.require() != nil else { return }
        try await Self.withInstances("converge-\(seed)", fanoutLimit: fanoutLimit, poolSize: 8, ownerReadsMembers: ownerReadsMembers) { stores, services in
            let owner: Identity = "olga"
            let users = ["u0", "u1", "u2", "u3"]
            let lists = (0..<4).map { "L\($0)" }
            #expect(Self.applied(try await services[0].push(identity: owner, lists.flatMap { list in
                [Self.insert("lists", list, ["name": .string(list)]), Self.member("olga", of: list)]
            })))
            let writing = WritingFlag()
            // The readers stop also when a writer failed and the test throws.
            defer { writing.lower() }
            // Readers: each identity keeps a copy of every table, pulling from both instances.
            let readers = (users + ["olga"]).map { user in
                Task { () throws -> [String: Copy] in
                    var copies = Dictionary(uniqueKeysWithValues: sharedListsTables.map { ($0, Copy()) })
                    var round = 0
                    while writing.isRaised {
                        for table in sharedListsTables { _ = try await copies[table]!.pull(services[round % 2], try Identity(user), table) }
                        round += 1
                    }
                    return copies
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Memberships come and go from two sides at once, and new lists are made with a
                // member at once.
                for churner in 0..<2 {
                    group.addTask {
                        var random = CommitOrderTests.Generator(state: UInt64(seed * 10 + churner))
                        for step in 0..<60 {
                            let list = lists[Int(random.next() % UInt64(lists.count))], user = users[Int(random.next() % UInt64(users.count))]
                            let operation: PushOperation
                            if step % 15 == 14 {
                                let made = "N\(seed)-\(churner)-\(step)"
                                _ = try await services[step % 2].push(identity: owner, [
                                    Self.insert("lists", made, ["name": .string(made)]), Self.member("olga", of: made), Self.member(user, of: made),
                                    Self.insert("todos", "\(made)-t", ["list_id": .string(made), "title": "first"])])
                                continue
                            }
                            if random.next() % 2 == 0 {
                                operation = Self.member(user, of: list)
                            } else {
                                operation = PushOperation(id: "op-" + UUID().uuidString, table: "list_members", itemId: "m-\(list)-\(user)",
                                                          kind: .delete, item: nil, baseVersion: nil)
                            }
                            _ = try await services[(step + churner) % 2].push(identity: owner, [operation])
                        }
                    }
                }
                // Todos: the owner and the users insert, update and delete, batches of one to four.
                for writer in 0..<5 {
                    group.addTask {
                        var random = CommitOrderTests.Generator(state: UInt64(seed * 100 + writer))
                        let who = try Identity(writer == 0 ? "olga" : users[writer - 1])
                        for step in 0..<40 {
                            var operations: [PushOperation] = []
                            for index in 0..<Int(1 + random.next() % 4) {
                                let list = lists[Int(random.next() % UInt64(lists.count))]
                                let id = "t\(writer)-\(Int(random.next() % 12))"
                                switch random.next() % 4 {
                                case 0, 1:
                                    operations.append(Self.insert("todos", "t\(writer)-\(step)-\(index)", ["list_id": .string(list), "title": "new"]))
                                case 2:
                                    operations.append(PushOperation(id: "op-" + UUID().uuidString, table: "todos", itemId: id, kind: .update,
                                                                    item: Record(id: id, fields: ["list_id": .string(list), "title": "moved"]),
                                                                    baseVersion: nil))
                                default:
                                    operations.append(PushOperation(id: "op-" + UUID().uuidString, table: "todos", itemId: id, kind: .delete,
                                                                    item: nil, baseVersion: nil))
                                }
                            }
                            // Refusals (not a member now, no such row) are part of the run.
                            _ = try await services[(writer + step) % 2].push(identity: who, operations)
                        }
                    }
                }
                try await group.waitForAll()
            }
            writing.lower()
            for (user, reader) in zip(users + ["olga"], readers) {
                var copies = try await reader.value
                for table in sharedListsTables {
                    var pages = 0
                    while try await copies[table]!.pull(services[pages % 2], try Identity(user), table) {
                        pages += 1
                        if pages > 2_000 { Issue.record("\(user)'s pull of \(table) did not end"); break }
                    }
                }
                let oracle = try await sharedListsOracle(serverStore: stores[0].inner, identity: user, ownerReadsMembers: ownerReadsMembers)
                for table in sharedListsTables {
                    let held = copies[table]!.rows.mapValues { $0.version ?? "" }
                    let expected = (oracle[table] ?? [:]).mapValues { $0.version ?? "" }
                    #expect(held == expected, """
                        seed \(seed), \(user), \(table): missing \(Set(expected.keys).subtracting(held.keys).sorted()), \
                        not readable \(Set(held.keys).subtracting(expected.keys).sorted()), \
                        stale \(held.filter { expected[$0.key] != nil && expected[$0.key] != $0.value }.keys.sorted())
                        """)
                }
            }
        }
    }
}
