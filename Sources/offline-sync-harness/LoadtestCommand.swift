import ArgumentParser
import Foundation
import Histogram
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncServer
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `offline-sync-harness loadtest`: drives a live `offline-sync serve` on loopback with real
/// HTTP and WebSocket connections and measures what a user of the server feels — how fast a
/// write reaches other devices, how many writes per second it takes — with HdrHistogram
/// percentiles, written to `loadtest-results.json`.
///
/// With `--check` it is also a test: it exits non-zero on a missed notification, a lost or
/// duplicated operation, or a notice that reached an identity that may not read the row —
/// never on a time (`make test` runs a short form).
struct LoadtestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Drive a live server with many clients over loopback and measure latency percentiles (writes loadtest-results.json).")

    @Option(help: "Writes, one row each (propagation).") var writes = 1_000
    @Option(help: "Writes per second (propagation).") var rate = 10
    @Option(help: "Change-channel clients that all receive each write (fan-out).") var clients = 1_000
    @Option(help: "Writes at one per second (fan-out).") var fanoutWrites = 30
    @Option(help: "Rows the written table holds before the writes begin (propagation).") var tableRows = 1_000_000
    @Option(help: "Seconds the writers push (writers).") var duration = 20
    @Option(help: "Clients pushing batches as fast as they are answered (writers).") var writers = 200
    @Option(help: "Rows per pushed batch (writers).") var batch = 100
    @Option(help: "Tables the writers share out between them (writers-postgres-tables).") var writerTables = 4
    @Option(help: "Change channels that are opened and never read (slow consumers).") var deafChannels = 100
    @Option(help: "Writes while the channels that never read are open, one notice each (slow consumers).") var slowWrites = 10_000
    @Option(help: "Writes per second (slow consumers).") var slowRate = 250
    @Option(help: "Change channels that read, beside those that never do (slow consumers).") var slowReceivers = 5
    @Option(help: "The server's change-channel write timeout and ping interval, in seconds (serve --channel-write-seconds, --channel-ping-seconds).")
    var channelSeconds = 10
    @Option(help: "Members of the one list whose devices hear each write, one run per size (fan-out through the rules), comma-separated.")
    var groupSizes = "1000,10000"
    @Option(help: "Writes to each of the list and the public table, one a second (fan-out through the rules).") var groupWrites = 30
    @Option(help: "The CPU the fan-out-through-the-rules server is pinned to (taskset); the generator takes the others.")
    var serverCPU = 0
    @Option(help: "Writes from one instance to a device on the other, at --rate (propagation across two instances).")
    var crossWrites = 1_000
    @Option(help: "Writes at --cross-rate, counted for missed notifications rather than timed (across two instances).")
    var countedWrites = 100_000
    @Option(help: "Writes per second of the counted writes (across two instances).") var countedRate = 1_000
    @Option(help: "A PostgreSQL server (postgres:// URL) for the workloads over two instances; each run uses a schema of its own and drops it.")
    var postgres: String?
    @Option(name: .customLong("postgres-replica"), help: "A hot standby of --postgres (repeatable; pulls-postgres-replicas).")
    var postgresReplicas: [String] = []
    @Option(help: "Devices pulling their whole table again and again (pulls-postgres-replicas).") var pullers = 20
    @Option(help: "Rows each puller's table holds (pulls-postgres-replicas).") var pullRows = 5_000
    @Option(help: "Devices each pushing one row at a time, through one instance and then more (one-row-clients-postgres).")
    var oneRowClients = 1_000
    @Option(help: "The instance counts the one-row clients push through, one run each, comma-separated; the first is the base of the ratios (one-row-clients-postgres).")
    var clientInstances = "1,2,4"
    @Option(help: "Milliseconds each way between the devices and the instances (propagation-delayed).") var deviceDelayMs = 20
    @Option(help: "Milliseconds each way between the instances and PostgreSQL (propagation-delayed).") var databaseDelayMs = 2
    @Option(help: "Writes at --rate from one instance to a device on the other, through the delays (propagation-delayed).") var delayedWrites = 300
    @Option(help: "Only these workloads (comma-separated): \(Self.workloads.joined(separator: ", ")).") var only: String?
    @Option(help: "Where to write the results.") var output = "loadtest-results.json"
    @Flag(help: "Exit non-zero on a missed notification, a lost or duplicated operation, or a notice to an identity that may not read the row.")
    var check = false

    static let workloads = ["propagation", "fan-out", "fan-out-group", "writers", "slow-consumers", "writers-postgres",
                            "writers-postgres-tables", "writers-postgres-shared", "two-instances", "rolling-restart", "pulls-postgres-replicas",
                            "one-row-clients-postgres", "fan-out-postgres", "propagation-delayed"]
    /// The workloads that need `--postgres` (the default set leaves them out without it).
    static let scaleOut: Set = ["writers-postgres", "writers-postgres-tables", "writers-postgres-shared", "two-instances", "rolling-restart", "pulls-postgres-replicas",
                                "one-row-clients-postgres", "fan-out-postgres", "propagation-delayed"]

    func validate() throws {
        guard clients > 0, writes > 0, rate > 0, fanoutWrites > 0, duration > 0, writers > 0, batch > 0, tableRows >= 0, writerTables > 0,
              deafChannels > 0, slowWrites > 0, slowRate > 0, slowReceivers > 0, channelSeconds > 0 else {
            throw ValidationError("clients, writes, rates, duration, writers, batch, writer tables, channels and channel seconds must be positive")
        }
        guard deafChannels <= 10_000, slowReceivers <= 1_000, slowWrites / slowRate <= 3_600, slowRate <= 10_000, channelSeconds <= 600 else {
            throw ValidationError("slow consumers are bounded: at most 10,000 channels that never read, 1,000 that do, an hour of writes, 10 minutes' channel timeout")
        }
        guard clients <= 20_000, writers <= 5_000, writerTables <= writers, duration <= 3_600, writes / rate <= 3_600, fanoutWrites <= 3_600, rate <= 10_000,
              batch <= 5_000, tableRows <= 10_000_000 else {
            throw ValidationError("a load test is bounded: at most 20,000 clients, 5,000 writers, 10,000 writes/s, an hour of each, batches of 5,000 and 10,000,000 rows")
        }
        let counts = clientInstances.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !counts.isEmpty, counts.allSatisfy({ ($0 ?? 0) >= 1 && ($0 ?? 0) <= 16 }) else {
            throw ValidationError("--client-instances are from 1 to 16 instances each")
        }
        if let only, !Set(only.split(separator: ",").map(String.init)).isSubset(of: Self.workloads) {
            throw ValidationError("unknown workload; known: \(Self.workloads.joined(separator: ", "))")
        }
        let sizes = groupSizes.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !sizes.isEmpty, sizes.allSatisfy({ ($0 ?? 0) > 0 && ($0 ?? 0) <= 20_000 }), groupWrites > 0, groupWrites <= 3_600, serverCPU >= 0 else {
            throw ValidationError("--group-sizes are from 1 to 20,000 members; --group-writes from 1 to 3,600; --server-cpu a CPU number")
        }
        if postgres == nil, let only, !Set(only.split(separator: ",").map(String.init)).isDisjoint(with: Self.scaleOut) {
            throw ValidationError("\(Self.scaleOut.sorted().joined(separator: " and ")) need --postgres")
        }
        guard pullers > 0, pullers <= 1_000, pullRows > 0, pullRows <= 1_000_000, oneRowClients > 0, oneRowClients <= 10_000 else {
            throw ValidationError("--pullers is from 1 to 1,000, --pull-rows from 1 to 1,000,000 and --one-row-clients from 1 to 10,000")
        }
        if postgresReplicas.isEmpty, let only, only.split(separator: ",").contains("pulls-postgres-replicas") {
            throw ValidationError("pulls-postgres-replicas needs --postgres-replica")
        }
        guard deviceDelayMs >= 0, deviceDelayMs <= 1_000, databaseDelayMs >= 0, databaseDelayMs <= 1_000, delayedWrites > 0,
              delayedWrites / rate <= 3_600 else {
            throw ValidationError("the delays are from 0 to 1,000 ms, and the delayed writes take at most an hour at --rate")
        }
        guard crossWrites > 0, countedWrites >= 0, countedRate > 0, crossWrites / rate <= 3_600, countedWrites / countedRate <= 3_600,
              countedRate <= 10_000 else {
            throw ValidationError("the writes across two instances are bounded: positive, at most 10,000/s and an hour each")
        }
    }

    func run() async throws {
        let descriptors = raiseDescriptorLimit()
        let selected = only.map { Set($0.split(separator: ",").map(String.init)) }
            ?? Set(Self.workloads).subtracting(postgres == nil ? Self.scaleOut : []).subtracting(postgresReplicas.isEmpty ? ["pulls-postgres-replicas"] : [])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-sync-loadtest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let secret = (0..<48).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement()! }.map(String.init).joined()
        let adminKey = UUID().uuidString
        let server = try ServerProcess.start(data: directory, secret: secret,
                                             extraArguments: ["--channel-write-seconds", String(channelSeconds), "--channel-ping-seconds", String(channelSeconds)],
                                             environment: ["OFFLINE_SYNC_ADMIN_KEY": adminKey])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let tokens = try await TokenAuthority(secret: Array(secret.utf8))
        say("loadtest: server \(server.baseURL) (SQLite), file descriptors \(descriptors)")

        var results: [[String: Any]] = []
        var failures: [String] = []
        if selected.contains("propagation") {
            // The goal's shape: one writing device, one receiving device, a large table.
            let outcome = try await Propagation(name: "propagation", identity: "loadtest-alice", base: server.baseURL, tokens: tokens,
                                                clients: 1, writes: writes, rate: rate, tableRows: tableRows).run()
            results.append(outcome.json)
            failures += outcome.failures
        }
        if selected.contains("fan-out") {
            // Every write reaches every one of `clients` devices, one write a second.
            let outcome = try await Propagation(name: "fan-out", identity: "loadtest-team", base: server.baseURL, tokens: tokens,
                                                clients: clients, writes: fanoutWrites, rate: 1, tableRows: 0,
                                                serverMemory: { [pid = server.process.processIdentifier] in ServerProcess.residentBytes(of: pid) },
                                                serverCPU: { [pid = server.process.processIdentifier] in ProcessCPU.seconds(of: pid) }).run()
            results.append(outcome.json)
            failures += outcome.failures
        }
        if selected.contains("fan-out-group") {
            for outcome in try await groupFanOut(directory: directory, secret: secret, tokens: tokens) {
                results.append(outcome.json)
                failures += outcome.failures
            }
        }
        if selected.contains("writers") {
            let serverStore = directory.appendingPathComponent("server.sqlite").path
            let outcome = try await ConcurrentWriters(base: server.baseURL, tokens: tokens, writers: writers, batch: batch, duration: duration,
                                                      baseline: { [batch] in
                let (ddl, columns, rows) = try RawTable.dump(path: serverStore, table: ConcurrentWriters.table)
                let sample = Array(rows.prefix(ConcurrentWriters.baselineRows))
                return (sample.count, try RawTable.insert(sample, columns: columns, ddl: ddl, table: ConcurrentWriters.table,
                                                          into: directory.appendingPathComponent("raw-writers.sqlite").path, batch: batch))
            }).run()
            results.append(outcome.json)
            failures += outcome.failures
        }
        if selected.contains("slow-consumers") {
            let outcome = try await slowConsumers(server: server, adminKey: adminKey, tokens: tokens)
            results.append(outcome.json)
            failures += outcome.failures
        }
        if let postgres, !selected.isDisjoint(with: Self.scaleOut) {
            let (json, found) = try await scaleOut(selected, postgres: postgres, directory: directory, secret: secret, tokens: tokens)
            results += json
            failures += found
        }
        let shutdown = await stopBounded(server)
        let document: [String: Any] = [
            "machine": machineDescription(), "store": "sqlite", "server": "offline-sync serve (debug or release as built)",
            "workloads": results, "serverShutdownSeconds": shutdown.map { $0 as Any } ?? NSNull(),
        ]
        let data = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: output))
        say("loadtest: wrote \(output)")
        if !failures.isEmpty {
            failures.forEach { say("loadtest: FAILED: \($0)") }
            if check { throw ExitCode(1) }
        } else if check {
            say("loadtest: check passed: no missed notification, no lost or duplicated operation, no notice to another identity")
        }
    }

    /// Fan-out through the rules, one run per group size; each run after the first carries
    /// its p99 over the first's.
    private func groupFanOut(directory: URL, secret: String, tokens: TokenAuthority) async throws -> [LoadOutcome] {
        var outcomes: [LoadOutcome] = []
        for size in groupSizes.split(separator: ",").compactMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) {
            outcomes.append(try await GroupFanOut(members: size, writes: groupWrites, directory: directory, secret: secret, tokens: tokens,
                                                  serverCPU: serverCPU).run())
        }
        let p99s = outcomes.map { ($0.json["writeToNotice"] as? [String: Any])?["p99Ms"] as? Double }
        for index in outcomes.indices.dropFirst() {
            guard let smallest = p99s[0], let this = p99s[index], smallest > 0 else { continue }
            outcomes[index].json["p99OverSmallest"] = this / smallest
            say("\(outcomes[index].json["name"] ?? ""): p99 \(String(format: "%.2f", this / smallest))× the p99 of the smallest group")
        }
        return outcomes
    }

    /// A few devices that read hear every write: first alone (the baseline), then beside
    /// ``deafChannels`` that never read. One outcome: the second run's, with the first's
    /// latency and the ratio of their p99s.
    private func slowConsumers(server: ServerProcess, adminKey: String, tokens: TokenAuthority) async throws -> LoadOutcome {
        let port = URL(string: server.baseURL)?.port ?? 0
        var outcomes: [LoadOutcome] = []
        for deaf in [0, deafChannels] {
            outcomes.append(try await Propagation(
                name: deaf == 0 ? "slow-consumers-baseline" : "slow-consumers", identity: "loadtest-slow-\(deaf)", base: server.baseURL,
                tokens: tokens, clients: slowReceivers, writes: slowWrites, rate: slowRate, tableRows: 0,
                serverMemory: { [pid = server.process.processIdentifier] in ServerProcess.residentBytes(of: pid) },
                deafChannels: deaf, openChannels: { await LoopbackSocket.openChannels(port: port, adminKey: adminKey) }).run())
        }
        let p99 = outcomes.map { ($0.json["writeToNotice"] as? [String: Any])?["p99Ms"] as? Double }
        var json = outcomes[1].json
        json["channelTimeoutSeconds"] = channelSeconds
        json["baselineWriteToNotice"] = outcomes[0].json["writeToNotice"]
        if let alone = p99[0], let beside = p99[1], alone > 0 {
            json["p99OverBaseline"] = beside / alone
            say("slow-consumers: the reading devices' p99 to notice is \(String(format: "%.2f", beside / alone))× their p99 without the channels that never read")
        }
        return LoadOutcome(json: json, failures: outcomes.flatMap(\.failures))
    }

    /// The workloads on PostgreSQL: a write through one of two instances reaching a device
    /// on the other (timed, then counted), the concurrent writers on one instance against
    /// libpq's inserts of the same rows, and a rolling restart of one of two instances under
    /// the concurrent writers.
    private func scaleOut(_ selected: Set<String>, postgres: String, directory: URL, secret: String,
                          tokens: TokenAuthority) async throws -> ([[String: Any]], [String]) {
        var results: [[String: Any]] = []
        var failures: [String] = []
        if selected.contains("two-instances") {
            let outcomes = try await InstanceGroup.with(count: 2, postgres: postgres, directory: directory.appendingPathComponent("two-instances"),
                                                        secret: secret) { group in
                say("two-instances: \(group.current.map(\.baseURL).joined(separator: " and ")) over PostgreSQL")
                let (one, two) = (group.current[0].baseURL, group.current[1].baseURL)
                var outcomes = [try await Propagation(name: "propagation-two-instances", identity: "loadtest-across", base: one, tokens: tokens,
                                                      clients: 1, writes: crossWrites, rate: rate, tableRows: tableRows,
                                                      receiverBase: two).run()]
                if countedWrites > 0 {
                    outcomes.append(try await Propagation(name: "notifications-two-instances", identity: "loadtest-counted", base: one,
                                                          tokens: tokens, clients: 1, writes: countedWrites, rate: countedRate, tableRows: 0,
                                                          receiverBase: two).run())
                }
                return outcomes
            }
            results += outcomes.map(\.json)
            failures += outcomes.flatMap(\.failures)
        }
        // The same writers into one table, then shared out between several: pushes of one
        // table commit one after another (its change sequence is in commit order), pushes of
        // different tables at once.
        for (workload, tables) in [("writers-postgres", 1), ("writers-postgres-tables", writerTables)] where selected.contains(workload) {
            let outcome = try await InstanceGroup.with(count: 1, postgres: postgres, directory: directory.appendingPathComponent(workload),
                                                       secret: secret) { group in
                let schema = group.schema
                var writing = ConcurrentWriters(base: group.current[0].baseURL, tokens: tokens, writers: writers, batch: batch,
                                                duration: duration, baseline: { [batch] in
                    try RawPostgreSQL(postgres).reinsert(table: ConcurrentWriters.table + (tables == 1 ? "" : "_0"), schema: schema,
                                                         limit: ConcurrentWriters.baselineRows, batch: batch)
                }, name: tables == 1 ? "concurrent-writers-postgres" : "concurrent-writers-postgres-\(tables)-tables")
                writing.tables = tables
                return try await writing.run()
            }
            results.append(outcome.json)
            failures += outcome.failures
        }
        if selected.contains("writers-postgres-shared") {
            let outcome = try await sharedWriters(postgres: postgres, directory: directory, secret: secret, tokens: tokens)
            (results, failures) = (results + [outcome.json], failures + outcome.failures)
        }
        if selected.contains("pulls-postgres-replicas") {
            let outcome = try await ReplicaPulls(postgres: postgres, replicas: postgresReplicas, directory: directory.appendingPathComponent("replicas"),
                                                 secret: secret, tokens: tokens, pullers: pullers, rowsPerIdentity: pullRows, duration: duration).run()
            results.append(outcome.json)
            failures += outcome.failures
        }
        if selected.contains("propagation-delayed") {
            let outcome = try await delayedPropagation(postgres: postgres, directory: directory.appendingPathComponent("propagation-delayed"),
                                                       secret: secret, tokens: tokens)
            results.append(outcome.json)
            failures += outcome.failures
        }
        if selected.contains("fan-out-postgres") {
            let outcome = try await fanOutPostgres(postgres: postgres, directory: directory, secret: secret, tokens: tokens)
            results.append(outcome.json)
            failures += outcome.failures
        }
        if selected.contains("one-row-clients-postgres") {
            let outcome = try await OneRowClients(postgres: postgres, directory: directory.appendingPathComponent("one-row-clients"), secret: secret,
                                                  tokens: tokens, clients: oneRowClients, duration: duration,
                                                  instanceCounts: clientInstances.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }).run()
            results.append(outcome.json)
            failures += outcome.failures
        }
        if selected.contains("rolling-restart") {
            let outcome = try await InstanceGroup.with(count: 2, postgres: postgres, directory: directory.appendingPathComponent("rolling-restart"),
                                                       secret: secret) { group in
                try await ConcurrentWriters(base: group.baseURL, tokens: tokens, writers: writers, batch: batch, duration: duration,
                                            baseline: nil, name: "rolling-restart", restart: { try await group.restartFirst() }).run()
            }
            results.append(outcome.json)
            failures += outcome.failures
        }
        return (results, failures)
    }

    /// Stops the server with SIGTERM and waits up to 30 s for it to exit; returns how long it
    /// took, or `nil` when it had to be killed (said on the output: a server that does not
    /// finish its shutdown is a defect, though not one of the invariants `--check` checks).
    private func stopBounded(_ server: ServerProcess) async -> Double? {
        let started = ContinuousClock.now
        server.process.terminate()
        while server.process.isRunning, ContinuousClock.now - started < .seconds(30) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        guard !server.process.isRunning else {
            say("loadtest: WARNING: the server did not exit within 30 s of SIGTERM; killed it")
            kill(server.process.processIdentifier, SIGKILL)
            return nil
        }
        let elapsed = ContinuousClock.now - started
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Raises the soft limit on open files to the hard limit (each client holds a socket or
    /// two); returns the limit now in force.
    private func raiseDescriptorLimit() -> UInt64 {
        #if os(Linux)
        let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return 0 }
        #if os(Linux)
        limit.rlim_cur = limit.rlim_max
        #else
        // Darwin's hard limit may be RLIM_INFINITY, which setrlimit refuses for open files.
        limit.rlim_cur = min(limit.rlim_max, rlim_t(OPEN_MAX))
        #endif
        _ = setrlimit(resource, &limit)
        return UInt64(limit.rlim_cur)
    }

    private func machineDescription() -> String {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let memory = ProcessInfo.processInfo.physicalMemory >> 30
        return "\(BenchCommand.cpuModel()), \(cores) cores, \(memory) GiB, \(ProcessInfo.processInfo.operatingSystemVersionString)"
    }
}

/// Latencies in microseconds, recorded from many tasks.
final class LatencyRecorder: Sendable {
    private let histogram = Mutex(Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three))

    func record(_ elapsed: Duration) {
        let micros = UInt64(max(0, elapsed.components.seconds)) * 1_000_000 + UInt64(max(0, elapsed.components.attoseconds)) / 1_000_000_000_000
        _ = histogram.withLock { $0.record(max(1, min(micros, 600_000_000))) }
    }

    var count: UInt64 { histogram.withLock { $0.totalCount } }

    /// p50, p95, p99, p99.9 and max in milliseconds, and the distribution (percentile, ms) for a plot.
    var json: [String: Any] {
        histogram.withLock { histogram in
            guard histogram.totalCount > 0 else { return ["count": 0] }
            let ms = { (value: UInt64) in Double(value) / 1_000 }
            var distribution: [[Double]] = []
            for point in histogram.percentiles(ticksPerHalfDistance: 5) {
                distribution.append([point.percentile, ms(point.value)])
            }
            return [
                "count": histogram.totalCount, "p50Ms": ms(histogram.valueAtPercentile(50)), "p95Ms": ms(histogram.valueAtPercentile(95)),
                "p99Ms": ms(histogram.valueAtPercentile(99)), "p999Ms": ms(histogram.valueAtPercentile(99.9)), "maxMs": ms(histogram.max),
                "distribution": distribution,
            ]
        }
    }

    var summary: String {
        histogram.withLock { histogram in
            guard histogram.totalCount > 0 else { return "no samples" }
            func ms(_ percentile: Double) -> String { String(format: "%.1f", Double(histogram.valueAtPercentile(percentile)) / 1_000) }
            return "p50 \(ms(50)) ms, p95 \(ms(95)) ms, p99 \(ms(99)) ms, max \(String(format: "%.1f", Double(histogram.max) / 1_000)) ms (\(histogram.totalCount) samples)"
        }
    }
}

/// One workload's figures and what it found wrong.
struct LoadOutcome {
    var json: [String: Any]
    var failures: [String]
}

/// Writes a progress line at once, also when the output is a pipe (`print` would hold it in
/// a buffer until the run ends).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

extension LoadtestCommand {
    /// `fan-out-postgres`: the fan-out on one instance over PostgreSQL, what a delivered row
    /// costs the instance and the database (the sizing model's figures).
    func fanOutPostgres(postgres: String, directory: URL, secret: String, tokens: TokenAuthority) async throws -> LoadOutcome {
        try await InstanceGroup.with(count: 1, postgres: postgres, directory: directory.appendingPathComponent("fan-out-postgres"),
                                     secret: secret) { group in
            try await Propagation(name: "fan-out-postgres", identity: "loadtest-team-postgres", base: group.current[0].baseURL, tokens: tokens,
                                  clients: clients, writes: fanoutWrites, rate: 1, tableRows: 0,
                                  serverMemory: { [pid = group.current[0].process.processIdentifier] in ServerProcess.residentBytes(of: pid) },
                                  serverCPU: { [pid = group.current[0].process.processIdentifier] in ProcessCPU.seconds(of: pid) },
                                  databaseCPU: { ProcessCPU.postgres(postgres) }).run()
        }
    }

    /// The rules of `concurrent-writers-postgres-shared`: one list whose members read and write
    /// its rows; each identity writes its own membership.
    static let sharedWritersRules = """
        version: 1
        memberships:
          lt_team: { table: lt_team, member: user_id, group: list_id }
        tables:
          \(ConcurrentWriters.table):
            read: [{ member: lt_team, key: list_id }]
            write: [{ member: lt_team, key: list_id }]
          lt_team:
            read: [{ identity: user_id }]
            write: [{ identity: user_id }]

        """

    /// `concurrent-writers-postgres-shared`: the concurrent writers of one table on one
    /// instance, the table shared: every writer is a member of one list (a large group of
    /// the rules, past the fan-out limit), and every row goes into it, so each push reads the
    /// writer's membership and the list's group row and writes the row and the list's log
    /// entry. Against libpq's multi-row inserts of the same stored rows, as the owner-only
    /// workload is.
    func sharedWriters(postgres: String, directory parent: URL, secret: String, tokens: TokenAuthority) async throws -> LoadOutcome {
        let directory = parent.appendingPathComponent("writers-postgres-shared")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let rules = directory.appendingPathComponent("rules.yaml")
        try Self.sharedWritersRules.write(to: rules, atomically: true, encoding: .utf8)
        return try await InstanceGroup.with(count: 1, postgres: postgres, directory: directory, secret: secret,
                                            extraArguments: ["--rules", rules.path]) { group in
            let schema = group.schema
            let name = "concurrent-writers-postgres-shared"
            var writing = ConcurrentWriters(base: group.current[0].baseURL, tokens: tokens, writers: writers, batch: batch,
                                            duration: duration, baseline: { [batch] in
                try RawPostgreSQL(postgres).reinsert(table: ConcurrentWriters.table, schema: schema,
                                                     limit: ConcurrentWriters.baselineRows, batch: batch)
            }, name: name)
            writing.fields = ["list_id": "team"]
            writing.sharedTable = true
            writing.prepare = { remotes in
                // One membership at a time: each changes the list's group row.
                for (index, remote) in remotes.enumerated() {
                    let results = try await remote.push([PushOperation(
                        id: "op-member-\(index)", table: "lt_team", itemId: "m-\(index)", kind: .insert,
                        item: Record(id: "m-\(index)", fields: ["list_id": "team", "user_id": .string("\(name)-\(index)")]), baseVersion: nil)])
                    guard case .applied = results.first?.outcome else {
                        throw SyncError(.rejected, "\(name): writer \(index)'s membership was not applied: \(String(describing: results.first?.outcome))")
                    }
                }
            }
            return try await writing.run()
        }
    }
}
