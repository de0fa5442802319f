import Dispatch
import Foundation
import OfflineSync
import OfflineSyncSQLite
import Synchronization

/// Figures a workload reports besides its time (latency percentiles, counts); the worker
/// prints them with the seconds and `bench-results.json` keeps them per side.
final class BenchMetrics: Sendable {
    static let shared = BenchMetrics()
    private let values = Mutex<[String: Double]>([:])

    func set(_ name: String, _ value: Double) { values.withLock { $0[name] = value } }
    var all: [String: Double] { values.withLock { $0 } }
}

/// A value the bench's tasks share, under a lock.
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

/// Nearest-rank percentile of sorted samples.
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))]
}

/// `observe-latency`: a writer commits 1,000 single-row updates (each with its queue row,
/// through a `SyncTable`) to a 100,000-row SQLite table while 100 observations of different
/// indexed queries (`group == g`, 100 rows each) are live; every update changes a row one of
/// them shows. The time is the writer's; the baseline is the same writer with no
/// observation. Metrics: commit-to-delivery latency per update (from the moment its write
/// transaction's commit to the first result that includes it), p50/p99/max, in
/// milliseconds; and each update's own time (`write…Ms`, both sides), which holds SQLite's
/// checkpoints.
enum ObserveLatency: BenchWorkload {
    static let name = "observe-latency"
    static let baseline = "same-writer-unobserved"
    static var fixedRecords: Int? { writes }
    static let rows = 100_000, groups = 1_000, observed = 100, writes = 1_000
    static let schema = TableSchema("items", fields: [
        FieldDefinition("group", .int, indexed: true), FieldDefinition("n", .int), FieldDefinition("title", .string),
    ])

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, observers: observed)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, observers: 0)
    }

    static func row(_ n: Int, write: Int) -> Record {
        Record(id: "item-\(n)", fields: ["group": .int(Int64(n % groups)), "n": .int(Int64(n)), "title": .string("w\(write)")])
    }

    /// The rows the writer updates, in order: each in one of the observed groups.
    static func targets() -> [Int] {
        var rng = SystemRandomNumberGenerator()
        return (0..<writes).map { _ in Int.random(in: 0..<observed, using: &rng) + groups * Int.random(in: 0..<(rows / groups), using: &rng) }
    }

    static func run(directory: URL, observers: Int) async throws -> Double {
        let store = CommitStamps(try await SQLiteStore(path: directory.appendingPathComponent("client.sqlite").path))
        let context = try await SyncContext(store: store, remote: UnusedRemote())
        try await context.defineTable(schema)
        for start in stride(from: 0, to: rows, by: 10_000) {
            try await store.write { txn in for n in start..<(start + 10_000) { try txn.upsert(row(n, write: -1), in: "items") } }
        }
        let targets = targets()
        let committed = Shared([UInt64](repeating: 0, count: writes))
        var durations: [Double] = []
        // When each write was first shown; latencies are taken once every commit is stamped,
        // since a read may show a commit before its write call has returned.
        let shownAt = Shared([UInt64](repeating: 0, count: writes))
        let shownCount = Shared(0)
        let (allDelivered, signal) = AsyncStream.makeStream(of: Void.self)
        let (ready, readySignal) = AsyncStream.makeStream(of: Void.self)
        let table = context.table("items")
        let watchers = (0..<observers).map { group in
            // The writes that concern this observation, in order.
            let mine = targets.indices.filter { targets[$0] % groups == group }
            return Task {
                var delivered = 0
                var first = true
                for try await result in table.observe(Query(Field("group") == .int(Int64(group)))) {
                    let now = DispatchTime.now().uptimeNanoseconds
                    if first { first = false; readySignal.yield(()); continue }
                    // Writes are sequential: write k is in a result whose row of k shows write k
                    // or a later one. Only the rows of the writes still awaited are looked at,
                    // so the consumer's own work stays small next to the observation's.
                    func includes(_ write: Int) -> Bool {
                        let id = "item-\(targets[write])"
                        guard let row = result.first(where: { $0.id == id }), case .string(let title) = row["title"],
                              let shown = Int(title.dropFirst()) else { return false }
                        return shown >= write
                    }
                    var seen = 0
                    while delivered < mine.count, includes(mine[delivered]) {
                        let write = mine[delivered]
                        shownAt.withLock { $0[write] = now }
                        delivered += 1
                        seen += 1
                    }
                    let total = shownCount.withLock { $0 += seen; return $0 }
                    if total == writes { signal.yield(()) }
                    if delivered == mine.count { break }
                }
            }
        }
        await waitForReady(ready, observers)
        let seconds = try await LocalWrites.measure {
            for (k, n) in targets.enumerated() {
                let start = DispatchTime.now().uptimeNanoseconds
                store.stampNextCommit { time in committed.withLock { $0[k] = time } }
                _ = try await table.update(row(n, write: k))
                durations.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            }
        }
        if observers > 0 {
            try await withTimeout(seconds: 60, "observe-latency: not every write was delivered") {
                for await _ in allDelivered { return }
            }
            for watcher in watchers { _ = try await watcher.value }
            let stamps = committed.withLock { $0 }, shown = shownAt.withLock { $0 }
            let sorted = zip(shown, stamps).map { shown, committed in shown > committed ? Double(shown - committed) / 1e6 : 0 }.sorted()
            BenchMetrics.shared.set("p50Ms", percentile(sorted, 50))
            BenchMetrics.shared.set("p99Ms", percentile(sorted, 99))
            BenchMetrics.shared.set("maxMs", sorted.last ?? .nan)
            BenchMetrics.shared.set("deliveredWrites", Double(sorted.count))
        }
        BenchMetrics.shared.set("writesPerSecond", Double(writes) / seconds)
        durations.sort()
        BenchMetrics.shared.set("writeP50Ms", percentile(durations, 50))
        BenchMetrics.shared.set("writeP99Ms", percentile(durations, 99))
        try await store.close()
        return seconds
    }
}

/// `observe-burst`: the first pull of 100,000 records (100 pages) into SQLite with 10 live
/// observations of the pulled table (queries on `n` ranges and `done`), against the same
/// pull with none. Metrics: results delivered, in all and to the busiest observation.
enum ObserveBurst: BenchWorkload {
    static let name = "observe-burst"
    static let baseline = "same-pull-unobserved"
    static let count = 100_000
    static var fixedRecords: Int? { count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, observers: 10)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, observers: 0)
    }

    static func run(directory: URL, observers: Int) async throws -> Double {
        let seed = try await SyncBench.seed(count: count)
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: seed)
        defer { _ = server.stop() }
        let store = try await SQLiteStore(path: directory.appendingPathComponent("client.sqlite").path)
        let context = try await SyncContext(store: store, remote: try await SyncBench.remote(server, secret: secret),
                                            options: SyncOptions(pullPageSize: 1000))
        try await context.defineTable(SyncBench.schema)
        let table = context.table("items")
        let queries = (0..<observers).map { (i: Int) -> Query in
            if i % 2 == 1 { return Query(Field("done") == .bool(true), order: [SortKey("n", ascending: false)], limit: 20) }
            let low = Int64(i * 10_000)
            return Query(Field("n") >= .int(low) && Field("n") < .int(low + 500))
        }
        let (ready, readySignal) = AsyncStream.makeStream(of: Void.self)
        let delivered = Shared([Int](repeating: 0, count: observers))
        let watchers = queries.enumerated().map { i, query in
            Task {
                var first = true
                for try await _ in table.observe(query) {
                    if first { first = false; readySignal.yield(()); continue }
                    delivered.withLock { $0[i] += 1 }
                }
            }
        }
        await waitForReady(ready, observers)
        var summary: PullSummary?
        let seconds = try await LocalWrites.measure { summary = try await context.pull("items", queryId: "all") }
        guard summary?.received == count else { throw SyncError(.storageFailure, "observe-burst received \(summary?.received ?? 0) of \(count)") }
        // Let each observation show the final state, then stop them.
        for (i, query) in queries.enumerated() {
            let expected = try await table.query(query)
            var check = table.observe(query).makeAsyncIterator()
            guard try await check.next() == expected else { throw SyncError(.storageFailure, "observation \(i) disagrees with its query") }
        }
        for watcher in watchers { watcher.cancel() }
        for watcher in watchers { _ = await watcher.result }
        let counts = delivered.withLock { $0 }
        BenchMetrics.shared.set("resultsDelivered", Double(counts.reduce(0, +)))
        BenchMetrics.shared.set("mostToOneObserver", Double(counts.max() ?? 0))
        BenchMetrics.shared.set("pages", Double(summary?.pages ?? 0))
        try await store.close()
        return seconds
    }
}

/// Waits until `count` observations have shown their first value (their signals on `ready`).
func waitForReady(_ ready: AsyncStream<Void>, _ count: Int) async {
    guard count > 0 else { return }
    var seen = 0
    for await _ in ready {
        seen += 1
        if seen == count { return }
    }
}

/// Runs `body`, throwing `storageFailure` with `message` if it takes longer than `seconds`.
func withTimeout(seconds: Double, _ message: String, _ body: @escaping @Sendable () async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask { try await body(); return true }
        group.addTask { try await Task.sleep(for: .seconds(seconds)); return false }
        let finished = try await group.next()!
        group.cancelAll()
        if !finished { throw SyncError(.storageFailure, message) }
    }
}

/// A store that notes when the commit of a chosen write returns, before the observer that
/// wrote through it announces the commit: the start of a commit-to-delivery latency.
final class CommitStamps: LocalStore {
    let inner: any LocalStore
    private let next = Mutex<(@Sendable (UInt64) -> Void)?>(nil)

    init(_ inner: any LocalStore) { self.inner = inner }

    /// Calls `stamp` with the uptime, in nanoseconds, at which the next write commits.
    func stampNextCommit(_ stamp: @escaping @Sendable (UInt64) -> Void) { next.withLock { $0 = stamp } }

    func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        let value = try await inner.write(body)
        let now = DispatchTime.now().uptimeNanoseconds
        next.withLock { stamp in stamp?(now); stamp = nil }
        return value
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try await inner.read(body)
    }

    func defineTable(_ schema: TableSchema) async throws { try await inner.defineTable(schema) }
    func externalChangeToken() async throws -> UInt64? { try await inner.externalChangeToken() }
    func close() async throws { try await inner.close() }
}
