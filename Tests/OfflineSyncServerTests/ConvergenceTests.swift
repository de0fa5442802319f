import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncDatasets
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncServer
import OfflineSyncTestSupport
import Synchronization
import Testing

/// A network partition in front of a real remote: while cut, every call fails as an
/// unreachable network does (transient, nothing sent).
final class Partition: Sendable {
    private let cut = Mutex(false)
    var isCut: Bool { cut.withLock { $0 } }
    func set(cut value: Bool) { cut.withLock { $0 = value } }
    func check() throws { if isCut { throw SyncError(.transient, "network unreachable (partitioned)") } }
}

/// The HTTP remote behind a partition.
struct PartitionedRemote: RemoteStore {
    let base: HTTPRemoteStore
    let partition: Partition
    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        try partition.check()
        return try await base.push(operations)
    }
    func pull(_ request: PullRequest) async throws -> PullPage {
        try partition.check()
        return try await base.pull(request)
    }
}

/// The HTTP dataset remote behind a partition.
struct PartitionedDatasetRemote: DatasetRemote {
    let base: HTTPDatasetRemote
    let partition: Partition
    func listDatasets(nextToken: String?, maxResults: Int?) async throws -> RemoteDatasetList {
        try partition.check()
        return try await base.listDatasets(nextToken: nextToken, maxResults: maxResults)
    }
    func describeDataset(_ name: String) async throws -> RemoteDataset? {
        try partition.check()
        return try await base.describeDataset(name)
    }
    func listRecords(dataset: String, lastSyncCount: Int64, nextToken: String?, maxResults: Int?,
                     syncSessionToken: String?) async throws -> RemoteRecordsPage {
        try partition.check()
        return try await base.listRecords(dataset: dataset, lastSyncCount: lastSyncCount, nextToken: nextToken,
                                          maxResults: maxResults, syncSessionToken: syncSessionToken)
    }
    func updateRecords(dataset: String, patches: [RecordPatch], syncSessionToken: String,
                       deviceId: String?) async throws -> [RemoteDatasetRecord] {
        try partition.check()
        return try await base.updateRecords(dataset: dataset, patches: patches, syncSessionToken: syncSessionToken, deviceId: deviceId)
    }
    func deleteDataset(_ name: String) async throws -> RemoteDataset? {
        try partition.check()
        return try await base.deleteDataset(name)
    }
    func registerDevice(platform: PushPlatform, token: String) async throws -> String {
        try partition.check()
        return try await base.registerDevice(platform: platform, token: token)
    }
    func subscribe(dataset: String, deviceId: String) async throws {
        try partition.check()
        try await base.subscribe(dataset: dataset, deviceId: deviceId)
    }
    func unsubscribe(dataset: String, deviceId: String) async throws {
        try partition.check()
        try await base.unsubscribe(dataset: dataset, deviceId: deviceId)
    }
}

/// Applies a built-in policy and keeps every conflict it was asked about, so the test can
/// check what each one led to.
final class RecordingResolver: ConflictResolver {
    let policy: ConflictPolicy
    private let conflicts = Mutex<[SyncConflict]>([])
    init(_ policy: ConflictPolicy) { self.policy = policy }
    func resolve(_ conflict: SyncConflict) async -> ConflictResolution {
        conflicts.withLock { $0.append(conflict) }
        return await policy.resolve(conflict)
    }
    /// The conflicts since the last call.
    func take() -> [SyncConflict] { conflicts.withLock { list in defer { list.removeAll() }; return list } }

    /// What the server must hold for the item once the conflict is settled: the policy's
    /// rule, written out again independently of ``ConflictPolicy/resolve(_:)``. `nil` means
    /// the item must be deleted.
    static func expected(_ conflict: SyncConflict, under policy: ConflictPolicy) -> [String: Value]? {
        let server = conflict.serverRecord.deleted ? nil : conflict.serverRecord.fields
        let client = conflict.kind == .delete ? nil : conflict.clientRecord?.fields
        switch policy {
        case .serverWins: return server
        case .clientWins: return client
        case .lastWriterWins:
            guard let serverTime = conflict.serverRecord.updatedAt else { return client }
            return conflict.clientChangedAt > serverTime ? client : server
        case .fieldLevelMerge:
            if conflict.kind == .delete { return server }
            guard var merged = server else { return client }
            for field in conflict.changedFields { merged[field] = client?[field] ?? .null }
            return merged.filter { !$0.value.isNull }
        }
    }
}

/// Dataset conflicts, settled by the documented default (the newer change wins, the remote
/// one on a tie), and kept so the test can check what each one led to.
final class DatasetConflictRecorder: Sendable {
    private let conflicts = Mutex<[DatasetConflict]>([])
    var callbacks: DatasetSyncCallbacks {
        DatasetSyncCallbacks(onConflict: { [self] _, list in
            conflicts.withLock { $0 += list }
            return list.map { $0.resolveWithNewer() }
        })
    }
    /// The conflicts since the last call.
    func take() -> [DatasetConflict] { conflicts.withLock { list in defer { list.removeAll() }; return list } }

    /// The value the key must end with: the newer change's, written out independently of
    /// ``DatasetConflict/resolveWithNewer()``.
    static func expected(_ conflict: DatasetConflict) -> String? {
        let remoteTime = conflict.remote.deviceLastModifiedDate ?? conflict.remote.lastModifiedDate
        return conflict.local.lastModified > remoteTime ? conflict.local.value : conflict.remote.value
    }
}

@Suite("Convergence under partitions: seeded random clients through the HTTP server, per conflict policy")
struct ConvergenceTests {
    static let items = TableSchema("items", fields: [FieldDefinition("title", .string), FieldDefinition("n", .int),
                                                     FieldDefinition("tag", .string)])
    static let environment = ProcessInfo.processInfo.environment
    /// `OFFLINE_SYNC_CONVERGENCE_CLIENTS` (default 4), `…_ROUNDS` (default 10), `…_SEED` (default: random).
    static let clientCount = environment["OFFLINE_SYNC_CONVERGENCE_CLIENTS"].flatMap(Int.init) ?? 4
    static let rounds = environment["OFFLINE_SYNC_CONVERGENCE_ROUNDS"].flatMap(Int.init) ?? 10
    static let seed = environment["OFFLINE_SYNC_CONVERGENCE_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)

    struct Client {
        let context: SyncContext
        let datasets: DatasetManager
        let partition: Partition
        let store: SQLiteStore
        let resolver: RecordingResolver
        let datasetConflicts = DatasetConflictRecorder()
    }

    @Test("every client and the server end identical, rows and datasets, with no queued or failed operation",
          arguments: ConflictPolicy.allCases)
    func converge(policy: ConflictPolicy) async throws {
        let seed = Self.seed &+ UInt64(ConflictPolicy.allCases.firstIndex(of: policy)!)
        var random = SplitMix64(seed: seed)
        let replay = "replay with OFFLINE_SYNC_CONVERGENCE_SEED=\(Self.seed) OFFLINE_SYNC_CONVERGENCE_CLIENTS=\(Self.clientCount) OFFLINE_SYNC_CONVERGENCE_ROUNDS=\(Self.rounds) (policy \(policy.rawValue))"
        try await withTemporaryDirectory { directory in
            let live = try await LiveServer.start(in: directory)
            let checker = try await live.remote("convergence")
            var conflictsChecked = 0, datasetConflictsChecked = 0
            let pool = "us-east-1:00000000-0000-0000-0000-00000000c0de"
            /// Every conflict the client's last sync settled left the item on the server (and on
            /// the client) as the policy says. Clients act one at a time, so nothing else
            /// changed the item between the conflict and this check.
            func checkOutcomes(_ client: Client, _ index: Int) async throws {
                var latest: [String: SyncConflict] = [:]
                for conflict in client.resolver.take() { latest[conflict.itemId] = conflict }
                guard !latest.isEmpty else { return }
                var server: [String: Record] = [:]
                var cursor: String?
                while true {
                    let page = try await checker.pull(PullRequest(table: "items", cursor: cursor, limit: 1000))
                    for record in page.records { server[record.id] = record }
                    cursor = page.nextCursor
                    if page.remaining == 0 { break }
                }
                for (id, conflict) in latest {
                    conflictsChecked += 1
                    let want = RecordingResolver.expected(conflict, under: policy)
                    let have = server[id].flatMap { $0.deleted ? nil : $0.fields }
                    #expect(have == want, "client \(index): the \(conflict.kind) conflict on \(id) left \(have.map { "\($0)" } ?? "no record") on the server; \(policy.rawValue) wants \(want.map { "\($0)" } ?? "no record"); \(replay)")
                    let local = try await client.context.table("items").get(id)
                    #expect(local?.fields == have, "client \(index): after the conflict on \(id) the local copy differs from the server's; \(replay)")
                }
            }
            /// Every dataset conflict of the client's last synchronize left the key, on the client
            /// and on the server, with the newer change's value.
            func checkDatasetOutcomes(_ client: Client, _ index: Int) async throws {
                var latest: [String: DatasetConflict] = [:]
                for conflict in client.datasetConflicts.take() { latest[conflict.key] = conflict }
                guard !latest.isEmpty else { return }
                let server = try await HTTPDatasetRemote(checker, identityPoolId: pool, identityId: "convergence")
                    .listRecords(dataset: "shared", lastSyncCount: 0, nextToken: nil, maxResults: 1000, syncSessionToken: nil)
                    .records.reduce(into: [String: String]()) { values, record in values[record.key] = record.value }
                let local = try await client.datasets.openOrCreateDataset("shared").getAll()
                for (key, conflict) in latest {
                    datasetConflictsChecked += 1
                    let want = DatasetConflictRecorder.expected(conflict)
                    #expect(server[key] == want, "client \(index): the dataset conflict on \(key) left \(server[key] ?? "nothing") on the server; the newer change was \(want ?? "a removal"); \(replay)")
                    #expect(local[key] == want, "client \(index): the dataset conflict on \(key) left \(local[key] ?? "nothing") locally; the newer change was \(want ?? "a removal"); \(replay)")
                }
            }
            let identity = "convergence"
            var clients: [Client] = []
            for index in 0..<Self.clientCount {
                let http = try await live.remote(identity)
                let partition = Partition()
                let store = try await SQLiteStore(path: directory.appendingPathComponent("client-\(index).sqlite").path)
                let resolver = RecordingResolver(policy)
                let context = try await SyncContext(store: store, remote: PartitionedRemote(base: http, partition: partition),
                                                    options: SyncOptions(conflictResolver: resolver))
                try await context.defineTable(Self.items)
                let datasets = try await DatasetManager(store: store, identity: identity, remote: PartitionedDatasetRemote(
                    base: HTTPDatasetRemote(http, identityPoolId: pool, identityId: identity), partition: partition))
                _ = try await datasets.openOrCreateDataset("shared")
                clients.append(Client(context: context, datasets: datasets, partition: partition, store: store, resolver: resolver))
            }

            var counter = 0
            for round in 0..<Self.rounds {
                for (index, client) in clients.enumerated() {
                    if Double.random(in: 0..<1, using: &random) < 0.3 { client.partition.set(cut: !client.partition.isCut) }
                    let table = client.context.table("items")
                    let known = try await table.query().map(\.id)
                    for _ in 0..<Int.random(in: 1...4, using: &random) {
                        let roll = Double.random(in: 0..<1, using: &random)
                        if known.isEmpty || roll < 0.35 {
                            counter += 1
                            _ = try await table.insert(Record(id: "c\(index)-\(counter)", fields: [
                                "title": .string("new by \(index) in \(round)"), "n": .int(Int64(counter)), "tag": "a"]))
                        } else if roll < 0.85, let id = known.randomElement(using: &random), var record = try await table.get(id) {
                            // Edit one or two fields, so field-level merges have something to merge.
                            if Bool.random(using: &random) { record["title"] = .string("edit by \(index) in \(round)") }
                            record["n"] = .int(Int64.random(in: 0...1000, using: &random))
                            _ = try await table.update(record)
                        } else if let id = known.randomElement(using: &random), try await table.get(id) != nil {
                            try await table.delete(id: id)
                        }
                    }
                    let dataset = try await client.datasets.openOrCreateDataset("shared")
                    let key = "k\(Int.random(in: 0..<6, using: &random))"
                    if Double.random(in: 0..<1, using: &random) < 0.2 {
                        try await dataset.remove(key)
                    } else {
                        try await dataset.put(key, "v\(index)-\(round)")
                    }
                    if !client.partition.isCut {
                        try await client.context.sync(["items"])
                        try await checkOutcomes(client, index)
                        _ = try await dataset.synchronize(client.datasetConflicts.callbacks)
                        try await checkDatasetOutcomes(client, index)
                    }
                }
            }

            // The network heals; everyone syncs until nothing moves.
            for client in clients { client.partition.set(cut: false) }
            // One scripted conflict, so the policy is checked whatever the seed drew (some seeds
            // draw no conflicting pair): the second client edits a version the first replaced.
            if clients.count >= 2 {
                let (first, second) = (clients[0], clients[1])
                _ = try await first.context.table("items").insert(Record(id: "scripted", fields: [
                    "title": "scripted", "n": .int(0), "tag": "a"]))
                try await first.context.sync(["items"])
                try await checkOutcomes(first, 0)
                try await second.context.sync(["items"])
                try await checkOutcomes(second, 1)
                var newer = try #require(try await first.context.table("items").get("scripted"))
                newer["title"] = "edited by 0"
                _ = try await first.context.table("items").update(newer)
                try await first.context.sync(["items"])
                try await checkOutcomes(first, 0)
                var older = try #require(try await second.context.table("items").get("scripted"))
                older["n"] = .int(-1)
                _ = try await second.context.table("items").update(older)
                try await second.context.sync(["items"])
                try await checkOutcomes(second, 1)
            }
            for _ in 0..<3 {
                for (index, client) in clients.enumerated() {
                    try await client.context.sync(["items"])
                    try await checkOutcomes(client, index)
                    _ = try await client.datasets.openOrCreateDataset("shared").synchronize(client.datasetConflicts.callbacks)
                    try await checkDatasetOutcomes(client, index)
                }
            }
            let reader = try await live.remote(identity)
            var serverRows: [Record] = []
            var cursor: String?
            while true {
                let page = try await reader.pull(PullRequest(table: "items", cursor: cursor, limit: 1000))
                serverRows += page.records.filter { !$0.deleted }
                cursor = page.nextCursor
                if page.remaining == 0 { break }
            }
            serverRows.sort { $0.id < $1.id }
            let serverValues = try await HTTPDatasetRemote(reader, identityPoolId: pool, identityId: identity)
                .listRecords(dataset: "shared", lastSyncCount: 0, nextToken: nil, maxResults: 1000, syncSessionToken: nil)
                .records.reduce(into: [String: String]()) { values, record in values[record.key] = record.value }
            #expect(!serverRows.isEmpty, "\(replay)")
            #expect(conflictsChecked > 0 || Self.clientCount < 2, "no conflict arose, so no policy was checked; \(replay)")
            print("convergence (\(policy.rawValue)): \(Self.clientCount) clients, \(Self.rounds) rounds, \(conflictsChecked) conflicts checked against the policy, \(datasetConflictsChecked) dataset conflicts against the newer-wins rule, seed \(Self.seed)")
            for (index, client) in clients.enumerated() {
                let rows = try await client.context.table("items").query().sorted { $0.id < $1.id }
                #expect(rows == serverRows, "client \(index) diverged from the server; \(replay)")
                #expect(try await client.context.queuedOperationCount() == 0, "client \(index) has queued operations; \(replay)")
                #expect(try await client.context.operationErrors().isEmpty, "client \(index) has failed operations; \(replay)")
                let values = try await client.datasets.openOrCreateDataset("shared").getAll()
                #expect(values == serverValues, "client \(index)'s dataset diverged; \(replay)")
                try await client.store.close()
            }
            try await live.stop()
        }
    }
}
