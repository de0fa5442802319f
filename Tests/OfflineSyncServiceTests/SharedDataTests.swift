import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Shared lists under sync rules, in process: clients are real `SyncContext`s over their own
/// stores, the service is the one the server runs.
@Suite("Shared data: rules-enforced writes, move-in and move-out, against an independent oracle")
struct SharedDataTests {
    static let rules = sharedListsRules(ownerReadsMembers: false)
    static let tables = sharedListsTables

    /// A client of `identity`, with the three tables, on a store in memory or (given a
    /// directory) in a SQLite file.
    static func client(_ service: OfflineSyncService, _ identity: String, in directory: URL? = nil) async throws -> SyncContext {
        let store: any LocalStore
        if let directory {
            store = try await SQLiteStore(path: directory.appendingPathComponent("\(identity).sqlite").path)
        } else {
            store = InMemoryStore()
        }
        let context = try await SyncContext(store: store, remote: service.remote(for: try Identity(identity)))
        for table in tables { try await context.defineTable(TableSchema(table)) }
        return context
    }

    @discardableResult
    static func sync(_ context: SyncContext) async throws -> [PullSummary] { try await sharedListsSync(context) }

    @Test("alice shares a list with bob, bob edits a todo, alice removes bob: his copies go and his offline edit is refused")
    func shareAndRevoke() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: Self.rules)
        let alice = try await Self.client(service, "alice"), bob = try await Self.client(service, "bob")
        _ = try await alice.table("lists").insert(Record(id: "L1", fields: ["name": "groceries"]))
        _ = try await alice.table("list_members").insert(Record(id: "m-alice", fields: ["list_id": "L1", "user_id": "alice"]))
        _ = try await alice.table("list_members").insert(Record(id: "m-bob", fields: ["list_id": "L1", "user_id": "bob"]))
        _ = try await alice.table("todos").insert(Record(id: "t1", fields: ["list_id": "L1", "title": "milk"]))
        try await Self.sync(alice)

        try await Self.sync(bob)
        #expect(try await bob.table("todos").get("t1")?["title"] == "milk", "move-in: the list's todos arrive")
        #expect(try await bob.table("lists").get("L1") != nil)
        #expect(try await bob.table("list_members").count() == 2)
        _ = try await bob.table("todos").update(Record(id: "t1", fields: ["list_id": "L1", "title": "oat milk"]))
        try await Self.sync(bob)
        try await Self.sync(alice)
        #expect(try await alice.table("todos").get("t1")?["title"] == "oat milk")

        // Bob edits offline; alice removes him meanwhile.
        _ = try await bob.table("todos").update(Record(id: "t1", fields: ["list_id": "L1", "title": "soy milk"]))
        try await alice.table("list_members").delete(id: "m-bob")
        try await Self.sync(alice)
        _ = try await bob.push()
        let refused = try await bob.operationErrors()
        #expect(refused.count == 1)
        #expect(refused.first?.status == 403)
        #expect(refused.first?.serverRecord == nil, "a refusal carries no server copy")
        for error in refused { try await bob.resolve(error, with: .discard) }
        let summaries = try await Self.sync(bob)
        #expect(try await bob.table("todos").count() == 0, "move-out: the list's todos leave bob's device")
        #expect(try await bob.table("lists").count() == 0)
        #expect(try await bob.table("list_members").count() == 0)
        // The list and alice's membership left bob's view (move-out); his own membership row
        // was deleted, so it came as a deletion; his refused todo went with the discard.
        #expect(summaries.map(\.removedFromView) == [1, 1, 0])
        #expect(summaries.map(\.deleted) == [0, 1, 0])
        #expect(try await alice.table("todos").get("t1")?["title"] == "oat milk", "the refused edit changed nothing")
    }

    @Test("a membership table whose own rules are owner-only still moves rows in and out of its members' views")
    func ownerOnlyMembershipTable() async throws {
        let rules = SyncRules(
            memberships: ["crew": Membership(table: "crew", member: "user_id", group: "team_id")],
            tables: ["crew": .ownerOnly,
                     "docs": TableRules(read: [Grant(.member("crew", key: "team_id", roles: nil))],
                                        write: [Grant(.member("crew", key: "team_id", roles: nil))])])
        #expect(rules.sharedTables == ["crew", "docs"])
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: rules)
        let alice = service.remote(for: "alice"), bob = service.remote(for: "bob")
        func insert(_ id: String, _ table: String, _ fields: [String: Value]) -> PushOperation {
            PushOperation(id: "op-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
        }
        _ = try await alice.push([insert("c-alice", "crew", ["team_id": "T", "user_id": "alice"]),
                                  insert("d1", "docs", ["team_id": "T", "text": "plan"])])
        #expect(try await bob.pull(PullRequest(table: "docs")).records.isEmpty)
        _ = try await alice.push([insert("c-bob", "crew", ["team_id": "T", "user_id": "bob"])])
        let page = try await bob.pull(PullRequest(table: "docs"))
        #expect(page.records.map(\.id) == ["d1"], "move-in through a membership added after the row")
        _ = try await alice.push([PushOperation(id: "op-out", table: "crew", itemId: "c-bob", kind: .delete, item: nil, baseVersion: nil)])
        #expect(try await bob.pull(PullRequest(table: "docs", cursor: page.nextCursor)).removed == ["d1"])
    }

    @Test("a write the rules refuse on a row the caller may read is undone by the next pull")
    func compensatingWrite() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: Self.rules)
        let alice = try await Self.client(service, "alice"), bob = try await Self.client(service, "bob")
        _ = try await alice.table("lists").insert(Record(id: "L1", fields: ["name": "groceries"]))
        _ = try await alice.table("list_members").insert(Record(id: "m-bob", fields: ["list_id": "L1", "user_id": "bob"]))
        try await Self.sync(alice)
        try await Self.sync(bob)
        _ = try await bob.table("lists").update(Record(id: "L1", fields: ["name": "bob's now"]))
        try await Self.sync(bob)
        #expect(try await bob.table("lists").get("L1")?["name"] == "groceries")
    }

    /// Bob (a member) renames alice's list, which the rules let him read but not change,
    /// under `policy`; returns his context after a push and a pull.
    static func refusedRename(policy: ConflictPolicy) async throws -> SyncContext {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: Self.rules)
        let alice = try await Self.client(service, "alice")
        let bobStore = InMemoryStore()
        let bob = try await SyncContext(store: bobStore, remote: service.remote(for: "bob"),
                                        options: SyncOptions(conflictResolver: policy))
        for table in tables { try await bob.defineTable(TableSchema(table)) }
        _ = try await alice.table("lists").insert(Record(id: "L1", fields: ["name": "groceries"]))
        _ = try await alice.table("list_members").insert(Record(id: "m-bob", fields: ["list_id": "L1", "user_id": "bob"]))
        try await Self.sync(alice)
        for table in tables { _ = try await bob.pull(table, queryId: table) }
        _ = try await bob.table("lists").update(Record(id: "L1", fields: ["name": "bob's now"]))
        _ = try await bob.push()
        return bob
    }

    @Test("a refused write is compensated or kept for the app by the conflict policy, and recorded either way",
          arguments: ConflictPolicy.allCases)
    func refusalFollowsPolicy(policy: ConflictPolicy) async throws {
        let bob = try await Self.refusedRename(policy: policy)
        let errors = try await bob.operationErrors()
        #expect(errors.count == 1)
        #expect(errors.first?.code == .forbidden)
        #expect(errors.first?.clientRecord?["name"] == "bob's now", "the refused change stays inspectable")
        let pulled = try await bob.pull("lists", queryId: "lists")
        if policy == .clientWins {
            #expect(errors.first?.compensated == false)
            #expect(try await bob.queuedOperationCount() == 1, "kept for the app: the operation waits")
            #expect(try await bob.table("lists").get("L1")?["name"] == "bob's now", "the pull leaves a pending item alone")
            #expect(pulled.skippedPending == 1)
        } else {
            #expect(errors.first?.compensated == true)
            #expect(try await bob.queuedOperationCount() == 0, "compensated: nothing is left to send")
            #expect(try await bob.table("lists").get("L1")?["name"] == "groceries", "the server's state is back")
        }
        for error in errors { try await bob.resolve(error, with: .discard) }
        #expect(try await bob.operationErrors().isEmpty)
    }

    @Test("a compensated refusal is only dismissed: retrying it is a clear error")
    func compensatedRefusalCannotBeRetried() async throws {
        let bob = try await Self.refusedRename(policy: .serverWins)
        let error = try #require(try await bob.operationErrors().first)
        #expect(await syncErrorCode { try await bob.resolve(error, with: .retry) } == .notFound)
        #expect(try await bob.operationErrors().count == 1, "a refused resolve changes nothing")
    }

    @Test("a public table read directly: a refused edit by a reader without the writer role comes back with the next pull")
    func compensationOnDirectRead() async throws {
        let admin = Condition(claim: "roles", values: ["admin"])
        let rules = SyncRules(tables: ["catalog": TableRules(read: [Grant(.everyone)], write: [Grant(.everyone, when: [admin])])])
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: rules)
        let editor = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Claims(identity: "ed", roles: ["admin"])))
        let reader = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Claims(identity: "rita")))
        for context in [editor, reader] { try await context.defineTable(TableSchema("catalog")) }
        for index in 0..<5 { _ = try await editor.table("catalog").insert(Record(id: "p\(index)", fields: ["price": .int(10)])) }
        _ = try await editor.push()
        _ = try await reader.pull("catalog", queryId: "all")
        _ = try await reader.table("catalog").update(Record(id: "p2", fields: ["price": .int(1)]))
        _ = try await reader.push()
        #expect(try await reader.operationErrors().first?.compensated == true)
        #expect(try await reader.table("catalog").get("p2") == nil, "compensated: the local copy went")
        let summary = try await reader.pull("catalog", queryId: "all")
        #expect(summary.added == 1, "the delta pull brings the unchanged row back")
        #expect(try await reader.table("catalog").get("p2")?["price"] == .int(10))
        #expect(try await reader.table("catalog").count() == 5)
    }

    @Test("a store written without rules opens under rules with every owner-only row intact")
    func existingStoreOpensUnchanged() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("server.sqlite").path
            let before = try await SQLiteStore(path: path)
            let plain = try await OfflineSyncService(store: before)
            for identity in ["alice", "bob"] {
                let results = try await plain.push(identity: try Identity(identity), [PushOperation(
                    id: "op-\(identity)", table: "notes", itemId: "n1", kind: .insert,
                    item: Record(id: "n1", fields: ["text": .string("\(identity)'s note")]), baseVersion: nil)])
                #expect(results.count == 1)
            }
            try await before.close()

            let after = try await SQLiteStore(path: path)
            let shared = try await OfflineSyncService(store: after, rules: Self.rules)
            for identity in ["alice", "bob"] {
                let page = try await shared.pull(identity: try Identity(identity), PullRequest(table: "notes", cursor: nil, limit: 100))
                #expect(page.records.map(\.id) == ["n1"])
                #expect(page.records.first?["text"] == .string("\(identity)'s note"))
            }
            try await after.close()
        }
    }

    // MARK: The differential test

    /// 20 seeds, or `OFFLINE_SYNC_SHARED_SEEDS` of them (for long runs).
    static let seedCount = Int(ProcessInfo.processInfo.environment["OFFLINE_SYNC_SHARED_SEEDS"] ?? "") ?? 20

    static func oracle(_ service: OfflineSyncService, _ identity: String) async throws -> [String: [String: Record]] {
        try await sharedListsOracle(serverStore: service.store, identity: identity)
    }

    static func local(_ context: SyncContext) async throws -> [String: [String: Record]] {
        try await sharedListsLocalView(context)
    }

    @Test("random shares, revocations and writes: after every sync a client holds exactly what the rules let it read (odd seeds on SQLite files)",
          arguments: 0..<SharedDataTests.seedCount)
    func differential(seed: Int) async throws {
        try await withTemporaryDirectory { directory in
            try await differential(seed: seed, in: seed % 2 == 1 ? directory : nil)
        }
    }

    /// One seeded run; with a directory, the server and every client keep SQLite files there.
    func differential(seed: Int, in directory: URL?) async throws {
        var rng = SplitMix(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        let identities = ["ann", "ben", "cat", "dan"]
        let serverStore: any LocalStore
        if let directory {
            serverStore = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
        } else {
            serverStore = InMemoryStore()
        }
        let service = try await OfflineSyncService(store: serverStore, rules: Self.rules)
        var clients: [String: SyncContext] = [:]
        for identity in identities { clients[identity] = try await Self.client(service, identity, in: directory) }
        var lists: [String] = []
        let trace = ProcessInfo.processInfo.environment["SHARED_TRACE"] == String(seed)
        for step in 0..<60 {
            let who = identities[Int(rng.next() % 4)], client = clients[who]!
            if try await sharedListsRandomStep(client, who: who, identities: identities, step: step, lists: &lists,
                                               random: &rng, trace: trace) { continue }
            try await Self.sync(client)
            let expected = try await Self.oracle(service, who), actual = try await Self.local(client)
            #expect(actual == expected, "seed \(seed), step \(step): \(who)'s tables differ from what the rules let it read")
        }
        for identity in identities {
            try await Self.sync(clients[identity]!)
            try await Self.sync(clients[identity]!)
            let expected = try await Self.oracle(service, identity), actual = try await Self.local(clients[identity]!)
            #expect(actual == expected, "seed \(seed), at the end: \(identity)'s tables differ from what the rules let it read")
        }
        try await serverStore.close()
    }
}

/// A small seeded generator, so a failing seed replays.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
