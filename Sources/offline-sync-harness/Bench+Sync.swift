import AsyncHTTPClient
import Foundation
import NIOCore
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncWire

/// What the sync workloads share: a server process on a loopback port over SQLite, tokens,
/// the seeded tables they pull from, and the records (about 200 bytes each).
enum SyncBench {
    static let identity = "bench"
    static let schema = TableSchema("items", fields: [
        FieldDefinition("title", .string), FieldDefinition("n", .int), FieldDefinition("done", .bool),
        FieldDefinition("note", .string),
    ])

    /// A record of about 200 bytes of field data.
    static func record(_ i: Int, version: Int = 0) -> Record {
        Record(id: String(format: "item-%07d", i), fields: [
            "title": .string("Item number \(i), version \(version)"), "n": .int(Int64(i)), "done": .bool(i % 3 == 0),
            "note": .string("A note of moderate length that makes this record about two hundred bytes long: \(i)."),
        ])
    }

    static func secret() -> String { (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max)) }.joined() }

    /// Starts `offline-sync serve` over `data/server.sqlite` (copied from `seed` when given),
    /// with the sync rules document `rules` when given.
    static func startServer(directory: URL, seed: URL? = nil, rules: String? = nil,
                            extraArguments: [String] = []) throws -> (ServerProcess, String) {
        let data = directory.appendingPathComponent("server")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        if let seed { try FileManager.default.copyItem(at: seed, to: data.appendingPathComponent("server.sqlite")) }
        var arguments = extraArguments
        if let rules {
            let file = directory.appendingPathComponent("rules.yaml")
            try Data(rules.utf8).write(to: file)
            arguments += ["--rules", file.path]
        }
        let secret = secret()
        return (try ServerProcess.start(data: data, secret: secret, extraArguments: arguments), secret)
    }

    /// A remote for `identity` (the bench's own by default) with a token granting `roles`.
    static func remote(_ server: ServerProcess, secret: String, identity: String = identity,
                       roles: Set<String> = []) async throws -> HTTPRemoteStore {
        let token = try await TokenAuthority(secret: Array(secret.utf8)).mint(identity: identity, roles: roles)
        return HTTPRemoteStore(baseURL: server.baseURL, token: { token })
    }

    /// A server database holding `count` records of `identity` in `items`, made once and kept
    /// in `bench-work/` (seeding is not what is measured).
    static func seed(count: Int) async throws -> URL {
        try await cachedSeed("seed-\(count)", describing: "\(count) records") { service in
            for start in stride(from: 0, to: count, by: 1000) {
                let operations = (start..<min(start + 1000, count)).map { i in
                    PushOperation(id: "seed-\(i)", table: "items", itemId: String(format: "item-%07d", i), kind: .insert,
                                  item: record(i), baseVersion: nil)
                }
                _ = try await service.push(identity: Identity(identity), operations)
            }
        }
    }

    /// The server database `bench-work/<name>.sqlite`, built once by `build` through a service
    /// under `rules` and kept (seeding is not what is measured). It is built under a partial
    /// name and renamed when complete, so an interrupted seeding starts over.
    ///
    /// A kept seed is opened by a service first, which gives its tables this version's
    /// storage (a service column added since it was made, say) once, in the kept file. Without
    /// that, each workload's server would migrate its own copy, at its start or, before
    /// services upgraded stored tables when they open, inside the timed first request: pull-1m
    /// and its floor each took about 7 s longer on a seed made before `__op`.
    static func cachedSeed(_ name: String, describing: String, rules: SyncRules = .ownerOnly,
                           build: (OfflineSyncService) async throws -> Void) async throws -> URL {
        let directory = URL(fileURLWithPath: "bench-work", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("\(name).sqlite")
        if FileManager.default.fileExists(atPath: file.path) {
            let store = try await SQLiteStore(path: file.path, options: .init(quickCheckOnOpen: false))
            _ = try await OfflineSyncService(store: store, rules: rules)
            try await store.close()
            return file
        }
        let partial = directory.appendingPathComponent("\(name).partial.sqlite")
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: partial.path + suffix) }
        FileHandle.standardError.write(Data("seeding \(describing) into \(file.path) (once)…\n".utf8))
        let store = try await SQLiteStore(path: partial.path)
        let service = try await OfflineSyncService(store: store, rules: rules)
        try await build(service)
        try await service.pruneOperationOutcomes(olderThan: Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 60_000))
        try await store.close()
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: partial.path + suffix) }
        try FileManager.default.moveItem(at: partial, to: file)
        return file
    }
}

/// `push-10k`: 10,000 queued operations pushed in batches by a `SyncContext` over HTTP, against
/// the same operations sent one request per operation through the `/tables` API (Azure's way).
enum Push10k: BenchWorkload {
    static let name = "push-10k"
    static let baseline = "one-request-per-op"
    static let count = 10_000
    static var fixedRecords: Int? { count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await pushQueued(count, directory: directory)
    }

    /// Queues `count` inserts (100 per transaction) in a fresh SQLite client, then measures
    /// one `push()` of them all to a fresh server.
    static func pushQueued(_ count: Int, directory: URL) async throws -> Double {
        let (server, secret) = try SyncBench.startServer(directory: directory)
        defer { _ = server.stop() }
        let store = try await SQLiteStore(path: directory.appendingPathComponent("client.sqlite").path)
        let context = try await SyncContext(store: store, remote: try await SyncBench.remote(server, secret: secret),
                                            options: SyncOptions(pushBatchSize: 1000))
        try await context.defineTable(SyncBench.schema)
        for start in stride(from: 0, to: count, by: 100) {
            try await context.transaction { tx in
                for i in start..<start + 100 { try tx.insert(SyncBench.record(i), into: "items") }
            }
        }
        var summary: PushSummary?
        let seconds = try await LocalWrites.measure { summary = try await context.push() }
        guard summary?.applied == count, try await context.queuedOperationCount() == 0 else {
            throw SyncError(.storageFailure, "the push applied \(summary?.applied ?? 0) of \(count)")
        }
        try await context.close()
        return seconds
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let (server, secret) = try SyncBench.startServer(directory: directory)
        defer { _ = server.stop() }
        let token = try await TokenAuthority(secret: Array(secret.utf8)).mint(identity: SyncBench.identity)
        let bodies = (0..<count).map { i -> [UInt8] in
            let record = SyncBench.record(i)
            var members: [(key: String, value: JSON)] = [("id", .string(record.id))]
            for (name, value) in record.fields.sorted(by: { $0.key < $1.key }) {
                switch value {
                case .string(let text): members.append((name, .string(text)))
                case .int(let n): members.append((name, .number(String(n))))
                case .bool(let b): members.append((name, .bool(b)))
                default: continue
                }
            }
            return JSON.object(members).encoded
        }
        return try await LocalWrites.measure {
            for body in bodies {
                var request = HTTPClientRequest(url: server.baseURL + "/tables/items")
                request.method = .POST
                request.headers.add(name: "Authorization", value: "Bearer \(token)")
                request.headers.add(name: "Content-Type", value: "application/json")
                request.headers.add(name: "ZUMO-API-VERSION", value: "3.0.0")
                request.body = .bytes(ByteBuffer(bytes: body))
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                _ = try await response.body.collect(upTo: 1 << 20)
                guard response.status.code == 201 else { throw SyncError(.storageFailure, "POST answered \(response.status.code)") }
            }
        }
    }
}

/// A workload measured at two sizes in the same run — its own against a smaller baseline
/// size of itself — so the ratio says how its cost grows with the size.
protocol ScaledWorkload: BenchWorkload {
    /// The records of our side.
    static var size: Int { get }
    /// The records of the baseline side.
    static var baselineSize: Int { get }
    /// Runs the workload on `count` records in `directory`; returns the measured seconds.
    static func run(_ count: Int, directory: URL) async throws -> Double
}

extension ScaledWorkload {
    static var fixedRecords: Int? { size }
    static var baselineRecords: Int? { baselineSize }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(size, directory: directory)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(baselineSize, directory: directory)
    }
}

/// `push-100k`: ten times push-10k's queue, against push-10k itself: the push's cost per
/// operation must not grow with the queue's length (goal: at most 11× push-10k's time).
enum Push100k: ScaledWorkload {
    static let name = "push-100k"
    static let baseline = "push-10k"
    static let size = 100_000
    static let baselineSize = Push10k.count

    static func run(_ count: Int, directory: URL) async throws -> Double {
        try await Push10k.pushQueued(count, directory: directory)
    }
}

/// `pull-1m`: the first pull of 1,000,000 records into a SQLite store through a `SyncContext`,
/// against the same pages fetched and decoded with nothing stored (the transfer's floor), both
/// over the page stream.
enum Pull1m: BenchWorkload {
    static let name = "pull-1m"
    static let baseline = "fetch-and-decode-only"
    static let count = 1_000_000
    static var fixedRecords: Int? { count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await firstPull(count, directory: directory)
    }

    /// Times a context's first pull of `count` seeded records into a new SQLite store.
    static func firstPull(_ count: Int, directory: URL) async throws -> Double {
        try await firstPull(count, directory: directory) {
            let store = try await SQLiteStore(path: directory.appendingPathComponent("client.sqlite").path)
            return (store, { try await store.read { try $0.count(in: "items", matching: .all) } })
        }
    }

    /// The first pull of `count` seeded rows into the store `makeStore` opens, measured;
    /// `makeStore` also gives how to count the rows that store holds afterwards.
    static func firstPull(_ count: Int, directory: URL,
                          makeStore: () async throws -> (any LocalStore, () async throws -> Int)) async throws -> Double {
        let seed = try await SyncBench.seed(count: count)
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: seed)
        defer { _ = server.stop() }
        let (store, storedRows) = try await makeStore()
        let context = try await SyncContext(store: store, remote: try await SyncBench.remote(server, secret: secret),
                                            options: SyncOptions(pullPageSize: 1000))
        try await context.defineTable(SyncBench.schema)
        var summary: PullSummary?
        let seconds = try await LocalWrites.measure { summary = try await context.pull("items", queryId: "all") }
        let stored = try await storedRows()
        guard summary?.received == count, stored == count else {
            throw SyncError(.storageFailure, "the first pull received \(summary?.received ?? 0), stored \(stored) of \(count)")
        }
        try await context.close()
        return seconds
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let seed = try await SyncBench.seed(count: count)
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: seed)
        defer { _ = server.stop() }
        let remote = try await SyncBench.remote(server, secret: secret)
        var received = 0
        let seconds = try await LocalWrites.measure {
            let stream = remote.openPull(PullRequest(table: "items", limit: 1000))
            while let page = try await stream.next() { received += page.records.count }
        }
        guard received == count else { throw SyncError(.storageFailure, "fetched \(received) of \(count)") }
        return seconds
    }
}

/// `pull-10m` (`make bench-scale`): the first pull of 10,000,000 records against pull-1m in
/// the same run. The pull streams, so the client's peak memory must not grow with the table
/// (goal: at most 1.1× pull-1m's) and its time at most tenfold plus a tenth (B-tree depth).
enum Pull10m: ScaledWorkload {
    static let name = "pull-10m"
    static let baseline = "pull-1m"
    static let size = 10_000_000
    static let baselineSize = Pull1m.count

    static func run(_ count: Int, directory: URL) async throws -> Double {
        try await Pull1m.firstPull(count, directory: directory)
    }
}

/// `pull-delta`: an incremental pull of 100 changed records from a 1,000,000-row table,
/// against the same from a 10,000-row table (best of 5 rounds each), on a server with sync
/// rules.
enum PullDelta: BenchWorkload {
    static let name = "pull-delta"
    static let baseline = "same-delta-from-10k-rows"
    static var fixedRecords: Int? { 100 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, rows: 1_000_000)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, rows: 10_000)
    }

    static func run(directory: URL, rows: Int) async throws -> Double {
        let seed = try await SyncBench.seed(count: rows)
        // The rules engine is on: `items` is owner-only by the document's default, beside
        // the shared tables of the sharing workloads.
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: seed, rules: SharedBench.rules)
        defer { _ = server.stop() }
        let remote = try await SyncBench.remote(server, secret: secret)
        let store = try await SQLiteStore(path: directory.appendingPathComponent("client.sqlite").path)
        let context = try await SyncContext(store: store, remote: remote, options: SyncOptions(pullPageSize: 1000))
        try await context.defineTable(SyncBench.schema)
        _ = try await context.pull("items", queryId: "all")   // the first, full pull: not measured
        var best = Double.infinity
        for round in 1...5 {
            // Another device changes 100 records spread over the table.
            let changed = (0..<100).map { $0 * (rows / 100) + round }
            _ = try await remote.push(changed.map { i in
                PushOperation(id: "delta-\(round)-\(i)", table: "items", itemId: String(format: "item-%07d", i), kind: .update,
                              item: SyncBench.record(i, version: round), baseVersion: nil)
            })
            var summary: PullSummary?
            let seconds = try await LocalWrites.measure { summary = try await context.pull("items", queryId: "all") }
            guard summary?.received == 100, summary?.updated == 100 else {
                throw SyncError(.storageFailure, "the delta pull received \(summary?.received ?? 0) records, updated \(summary?.updated ?? 0)")
            }
            best = min(best, seconds)
        }
        try await store.close()
        return best
    }
}
