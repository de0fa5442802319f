import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
#if canImport(Glibc)
import Glibc
#endif

/// Pull-heavy load on PostgreSQL, read by the primary alone and then with hot standbys
/// (`serve --postgres-replica`): `pullers` devices of as many identities each pull their
/// whole table from the start, again and again, for `duration` seconds, while `writers`
/// push a row now and then (so pages must wait for the standbys to replay). Each run seeds a
/// schema of its own. Measures full pulls a second and rows a second, the time of one full
/// pull, and what served the reads (`offline_sync_replica_reads_total`).
struct ReplicaPulls {
    let postgres: String
    let replicas: [String]
    let directory: URL
    let secret: String
    let tokens: TokenAuthority
    let pullers: Int
    let rowsPerIdentity: Int
    let duration: Int

    static let table = "lt_pull_rows"

    /// The primary's CPU seconds so far (``ProcessCPU/postgres(_:)``).
    func primaryCPUSeconds() -> Double? { ProcessCPU.postgres(postgres) }

    func run() async throws -> LoadOutcome {
        let alone = try await measure(replicas: [], name: "pulls-postgres-primary")
        let beside = try await measure(replicas: replicas, name: "pulls-postgres-\(replicas.count)-replicas")
        let ratio = beside.pullsPerSecond / max(alone.pullsPerSecond, 1e-9)
        let cpuRatio = beside.primaryCPUPerPull.flatMap { with in alone.primaryCPUPerPull.map { with / max($0, 1e-9) } }
        say("pulls-postgres-replicas: \(String(format: "%.2f", ratio))× the full pulls a second of the primary alone; "
            + (cpuRatio.map { "the primary's CPU a full pull \(String(format: "%.2f", $0))× its CPU alone" } ?? "the primary's CPU not readable here"))
        var failures = alone.failures + beside.failures
        if beside.servedByReplica == 0 { failures.append("pulls-postgres-replicas: no read was served by a replica") }
        return LoadOutcome(json: ["name": "pulls-postgres-replicas", "pullers": pullers, "rowsPerIdentity": rowsPerIdentity,
                                  "replicas": replicas.count, "primaryAlone": alone.json, "withReplicas": beside.json,
                                  "ratioToPrimaryAlone": ratio, "primaryCPUPerPullRatio": cpuRatio as Any? ?? NSNull()], failures: failures)
    }

    /// What one run measured.
    struct Run {
        var json: [String: Any]
        var pullsPerSecond: Double
        /// The primary's CPU milliseconds per full pull, if it could be read.
        var primaryCPUPerPull: Double?
        var servedByReplica: Int
        var failures: [String]
    }

    /// Each device's rows, 500 a push, all devices at once.
    private func seed(_ remotes: [HTTPRemoteStore]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { seeding in
            for (index, remote) in remotes.enumerated() {
                seeding.addTask {
                    for start in stride(from: 0, to: rowsPerIdentity, by: 500) {
                        let operations = (start..<min(start + 500, rowsPerIdentity)).map { row in
                            PushOperation(id: "seed-\(index)-\(row)", table: Self.table, itemId: "r\(row)", kind: .insert,
                                          item: Record(id: "r\(row)", fields: ["n": .int(Int64(row)), "text": .string("row \(row) of \(index)")]),
                                          baseVersion: nil)
                        }
                        _ = try await remote.push(operations)
                    }
                }
            }
            try await seeding.waitForAll()
        }
    }

    private func measure(replicas: [String], name: String) async throws -> Run {
        let extra = replicas.flatMap { ["--postgres-replica", $0] }
        return try await InstanceGroup.with(count: 1, postgres: postgres, directory: directory.appendingPathComponent(name), secret: secret,
                                            extraArguments: extra) { group in
            let base = group.current[0].baseURL
            var remotes: [HTTPRemoteStore] = []
            for index in 0..<pullers {
                let token = try await tokens.mint(identity: "\(name)-\(index)")
                remotes.append(HTTPRemoteStore(baseURL: base, configuration: .init(maxAttempts: 10), token: { token }))
            }
            try await seed(remotes)
            let before = try await group.replicaReads()
            let cpuBefore = primaryCPUSeconds()
            let latency = LatencyRecorder()
            let end = ContinuousClock.now + .seconds(duration)
            let begin = ContinuousClock.now
            let counts = try await withThrowingTaskGroup(of: (pulls: Int, rows: Int, short: Int).self) { pulling in
                for (index, remote) in remotes.enumerated() {
                    pulling.addTask {
                        var pulls = 0, rows = 0, short = 0, writes = 0
                        while ContinuousClock.now < end {
                            // A write now and then: the standbys have something to replay.
                            if pulls % 4 == 0 {
                                let id = "w\(writes)"
                                _ = try await remote.push([PushOperation(id: "op-\(index)-\(id)", table: Self.table, itemId: id, kind: .insert,
                                                                         item: Record(id: id, fields: ["n": .int(-1)]), baseVersion: nil)])
                                writes += 1
                            }
                            let started = ContinuousClock.now
                            var request = PullRequest(table: Self.table)
                            var received = 0
                            while true {
                                let page = try await remote.pull(request)
                                received += page.records.count
                                request.cursor = page.nextCursor
                                if page.remaining == 0 { break }
                            }
                            latency.record(ContinuousClock.now - started)
                            // Every seeded row, and every write this device made before the pull.
                            if received < rowsPerIdentity + writes { short += 1 }
                            pulls += 1
                            rows += received
                        }
                        return (pulls, rows, short)
                    }
                }
                var all: [(pulls: Int, rows: Int, short: Int)] = []
                for try await count in pulling { all.append(count) }
                return all
            }
            let elapsed = ContinuousClock.now - begin
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let after = try await group.replicaReads()
            let primaryCPU = cpuBefore.flatMap { before in primaryCPUSeconds().map { $0 - before } }
            let pulls = counts.reduce(0) { $0 + $1.pulls }, rows = counts.reduce(0) { $0 + $1.rows }, short = counts.reduce(0) { $0 + $1.short }
            let cpuPerPull = primaryCPU.map { $0 * 1000 / Double(max(pulls, 1)) }
            let servedByReplica = after.replica - before.replica, servedByPrimary = after.primary - before.primary
            say("\(name): \(pullers) devices, \(rowsPerIdentity) rows each: \(pulls) full pulls in \(String(format: "%.1f", seconds)) s = "
                + "\(String(format: "%.1f", Double(pulls) / seconds)) pulls/s, \(Int(Double(rows) / seconds)) rows/s; "
                + "reads served by a replica \(servedByReplica), by the primary \(servedByPrimary); "
                + (primaryCPU.map { "the primary's CPU \(String(format: "%.2f", $0)) s = \(String(format: "%.2f", $0 * 1000 / Double(max(pulls, 1)))) ms a full pull; " } ?? "")
                + "full pull \(latency.summary)")
            var failures: [String] = []
            if short > 0 { failures.append("\(name): \(short) pulls missed rows their device had written or seeded") }
            return Run(json: ["name": name, "replicas": replicas.count, "durationSeconds": seconds, "fullPulls": pulls, "rows": rows,
                              "pullsPerSecond": Double(pulls) / seconds, "rowsPerSecond": Double(rows) / seconds,
                              "readsServedByReplica": servedByReplica, "readsServedByPrimary": servedByPrimary, "shortPulls": short,
                              "primaryCPUSeconds": primaryCPU as Any? ?? NSNull(), "primaryCPUMillisecondsPerPull": cpuPerPull as Any? ?? NSNull(),
                              "fullPull": latency.json],
                       pullsPerSecond: Double(pulls) / seconds, primaryCPUPerPull: cpuPerPull,
                       servedByReplica: servedByReplica, failures: failures)
        }
    }
}
