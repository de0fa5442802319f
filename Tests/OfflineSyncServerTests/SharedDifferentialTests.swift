import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncLMDB
import OfflineSyncPostgreSQL
import OfflineSyncSQLite
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// The shared-lists differential test through real servers: even seeds against one server on
/// SQLite, odd seeds against two `offline-sync serve` processes sharing PostgreSQL (clients
/// alternate between them); clients keep SQLite files or LMDB environments, sit behind
/// partitions that cut and heal at random, and resolve by a conflict policy that changes
/// with the seed. After every sync a connected client holds exactly what the rules let its
/// identity read, computed from the server's stored rows by `sharedListsOracle`.
/// Serialized: each odd seed starts two server processes with their own PostgreSQL pools, and
/// hundreds at once would exhaust the database's connections.
@Suite("Shared data through live servers: SQLite and two PostgreSQL instances, SQLite and LMDB clients, partitions, every policy",
       .serialized)
struct SharedDifferentialTests {
    /// 20 seeds, or `OFFLINE_SYNC_SHARED_SEEDS` of them (for `make soak`).
    static let seedCount = Int(ProcessInfo.processInfo.environment["OFFLINE_SYNC_SHARED_SEEDS"] ?? "") ?? 20
    static let identities = ["ann", "ben", "cat", "dan"]

    /// The servers of one run, the way to reach them as an identity, and their stored rows.
    struct Servers {
        let remote: @Sendable (_ identity: String, _ index: Int) async throws -> HTTPRemoteStore
        let store: any LocalStore
        let stop: @Sendable () async throws -> Void
    }

    /// The group fan-out limit of a seed's server: 1 and 2 make lists of two or three
    /// members large (at 2, a list shrinking to one member turns small again, so groups
    /// cross the limit both ways); the default keeps every list small.
    static func fanoutLimit(seed: Int) -> Int { [2, 2, 1, 1, OfflineSyncService.defaultGroupFanoutLimit][seed % 5] }

    static func sqliteServer(_ directory: URL, fanoutLimit: Int) async throws -> Servers {
        let live = try await LiveServer.start(in: directory, rules: sharedListsRules(ownerReadsMembers: false),
                                              groupFanoutLimit: fanoutLimit)
        return Servers(remote: { identity, _ in try await live.remote(identity) }, store: live.store, stop: { try await live.stop() })
    }

    static func postgresServers(_ directory: URL, url: String, fanoutLimit: Int) async throws -> Servers {
        let storeURL = TestPostgres.storeURL(url)
        let rules = directory.appendingPathComponent("rules.yaml")
        try RemoteStoreConformance.sharedListsRules.write(to: rules, atomically: true, encoding: .utf8)
        let arguments = ["--rules", rules.path, "--group-fanout-limit", String(fanoutLimit)]
        let one = try await ServerProcess.start(data: directory.appendingPathComponent("one"), store: storeURL, extraArguments: arguments)
        let two = try await ServerProcess.start(data: directory.appendingPathComponent("two"), store: storeURL, extraArguments: arguments)
        var registry = StoreRegistry()
        registry.register(.postgres)
        let store = try await registry.open(storeURL)
        let authority = try await TokenAuthority(secret: testSecret)
        let bases = [one.baseURL, two.baseURL]
        return Servers(remote: { identity, index in
            let token = try await authority.mint(identity: identity)
            return HTTPRemoteStore(baseURL: bases[index % 2], token: { token })
        }, store: store, stop: {
            try await store.close()
            _ = one.stop()
            _ = two.stop()
        })
    }

    @Test("random shares, revocations, writes and partitions: after every sync a client holds exactly what the rules let it read",
          arguments: 0..<SharedDifferentialTests.seedCount)
    func differential(seed: Int) async throws {
        let onPostgres = seed % 2 == 1
        if onPostgres, !TestPostgres.shouldRun { return }
        try await withTemporaryDirectory { directory in
            let servers: Servers
            if onPostgres {
                guard let url = TestPostgres.url else { Issue.record("OFFLINE_SYNC_TEST_POSTGRES_URL is not set but CI is"); return }
                servers = try await Self.postgresServers(directory, url: url, fanoutLimit: Self.fanoutLimit(seed: seed))
            } else {
                servers = try await Self.sqliteServer(directory, fanoutLimit: Self.fanoutLimit(seed: seed))
            }
            do {
                try await run(seed: seed, servers: servers, in: directory)
                try await servers.stop()
            } catch {
                try? await servers.stop()
                throw error
            }
        }
    }

    func run(seed: Int, servers: Servers, in directory: URL) async throws {
        var random = SplitMix64(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 7)
        let policy = ConflictPolicy.allCases[(seed / 2) % ConflictPolicy.allCases.count]
        let context = "seed \(seed) (\(seed % 2 == 1 ? "two PostgreSQL instances" : "SQLite server"), \(policy.rawValue), "
            + "fan-out limit \(Self.fanoutLimit(seed: seed)))"
        var clients: [String: (context: SyncContext, store: any LocalStore, partition: Partition)] = [:]
        for (index, identity) in Self.identities.enumerated() {
            let store: any LocalStore = index % 2 == 0
                ? try await SQLiteStore(path: directory.appendingPathComponent("\(identity).sqlite").path)
                : try await LMDBStore(directory: directory.appendingPathComponent("\(identity)-env"))
            let partition = Partition()
            let remote = PartitionedRemote(base: try await servers.remote(identity, index), partition: partition)
            let sync = try await SyncContext(store: store, remote: remote, options: SyncOptions(conflictResolver: policy))
            for table in sharedListsTables { try await sync.defineTable(TableSchema(table)) }
            clients[identity] = (sync, store, partition)
        }
        var lists: [String] = []
        let trace = ProcessInfo.processInfo.environment["SHARED_TRACE"] == String(seed)
        for step in 0..<60 {
            let who = Self.identities[Int(random.next() % 4)], client = clients[who]!
            if random.next() % 8 == 0 { client.partition.set(cut: !client.partition.isCut) }
            if trace { print("step \(step): \(who) \(client.partition.isCut ? "offline" : "online")") }
            if try await sharedListsRandomStep(client.context, who: who, identities: Self.identities, step: step,
                                               lists: &lists, random: &random, trace: trace) { continue }
            if client.partition.isCut {
                // Offline: the sync fails as a lost network does, and the queue stays.
                let pending = try await client.context.queuedOperationCount()
                #expect(await syncErrorCode { try await sharedListsSync(client.context) } == .transient)
                #expect(try await client.context.queuedOperationCount() >= pending, "\(context), step \(step): a failed sync lost queued work")
                continue
            }
            try await sharedListsSync(client.context)
            let expected = try await sharedListsOracle(serverStore: servers.store, identity: who)
            let actual = try await sharedListsLocalView(client.context)
            #expect(actual == expected, "\(context), step \(step): \(who)'s tables differ from what the rules let it read")
        }
        for identity in Self.identities {
            let client = clients[identity]!
            client.partition.set(cut: false)
            try await sharedListsSync(client.context)
        }
        for identity in Self.identities {
            let client = clients[identity]!
            try await sharedListsSync(client.context)
            let expected = try await sharedListsOracle(serverStore: servers.store, identity: identity)
            let actual = try await sharedListsLocalView(client.context)
            #expect(actual == expected, "\(context), at the end: \(identity)'s tables differ from what the rules let it read")
            #expect(try await client.context.queuedOperationCount() == 0, "\(context): \(identity) still has queued work")
            try await client.store.close()
        }
    }
}
