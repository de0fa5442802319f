import Foundation
import OfflineSync
import OfflineSyncServer
import Synchronization

/// Many devices, each pushing one row at a time and the next as soon as it is answered, on
/// PostgreSQL: through one instance, then through more behind the balancer (a schema of its
/// own each run). Measures operations a second, push latency, and what each operation cost the
/// instances, PostgreSQL and the generator in CPU: the per-core figures of the sizing model
/// in Operating.md, and its check at one and two instances. One more instance runs beside
/// them, outside the balancer and with no device: every instance hears every change's
/// notice, and its CPU is what that costs.
struct OneRowClients {
    let postgres: String
    let directory: URL
    let secret: String
    let tokens: TokenAuthority
    let clients: Int
    let duration: Int
    /// The instance counts measured, in order; the first is the base of the scaling ratios.
    var instanceCounts: [Int]

    func run() async throws -> LoadOutcome {
        var runs: [[String: Any]] = []
        var failures: [String] = []
        var rates: [Double] = []
        for count in instanceCounts {
            let (json, found) = try await measure(instances: count)
            runs.append(json)
            failures += found
            rates.append(json["operationsPerSecond"] as? Double ?? 0)
        }
        var json: [String: Any] = ["name": "one-row-clients-postgres", "clients": clients, "runs": runs]
        if rates.count > 1, rates[0] > 0 {
            let scaling = rates.map { $0 / rates[0] }
            json["scalingToFirst"] = scaling
            say("one-row-clients-postgres: \(clients) clients, operations a second against one instance: "
                + zip(instanceCounts, scaling).map { "\($0) → \(String(format: "%.2f", $1))×" }.joined(separator: ", "))
        }
        return LoadOutcome(json: json, failures: failures)
    }

    private func measure(instances: Int) async throws -> ([String: Any], [String]) {
        let name = "one-row-clients-postgres-\(instances)-instance" + (instances == 1 ? "" : "s")
        return try await InstanceGroup.with(count: instances + 1, postgres: postgres, directory: directory.appendingPathComponent(name),
                                            secret: secret) { group in
            group.balancer.setBackends(group.current.prefix(instances).map(InstanceGroup.port))
            let pids = group.current.prefix(instances).map(\.process.processIdentifier)
            let listener = group.current[instances].process.processIdentifier
            @Sendable func serversCPU() -> Double? {
                let each = pids.map { ProcessCPU.seconds(of: $0) }
                return each.contains(where: { $0 == nil }) ? nil : each.reduce(0) { $0 + ($1 ?? 0) }
            }
            // CPU seconds so far: the instances', PostgreSQL's, the generator's (this process:
            // the clients and the balancer's relays) and the listening instance's.
            let readings = Mutex<[[Double?]]>([])
            var writing = ConcurrentWriters(base: group.baseURL, tokens: tokens, writers: clients, batch: 1, duration: duration,
                                            baseline: nil, name: name)
            writing.window = { _ in
                let reading = [serversCPU(), ProcessCPU.postgres(postgres), MeasuredWindows.processCPUSeconds(), ProcessCPU.seconds(of: listener)]
                readings.withLock { $0.append(reading) }
            }
            let outcome = try await writing.run()
            let window = readings.withLock { $0 }
            let spent: [Double?] = (0..<4).map { index in
                guard window.count == 2, let before = window[0][index], let after = window[1][index] else { return nil }
                return after - before
            }
            var json = outcome.json
            json["instances"] = instances
            let operations = max(json["operations"] as? Int ?? 0, 1)
            let seconds = json["durationSeconds"] as? Double ?? 0
            var line = "\(name):"
            // Each cost as CPU milliseconds an operation and as cores busy over the run.
            for (key, spent) in zip(["server", "postgres", "generator", "listeningInstance"], spent) {
                guard let spent else { continue }
                json[key + "CPUSeconds"] = spent
                json[key + "CPUMillisecondsPerOperation"] = spent * 1000 / Double(operations)
                json[key + "CoresBusy"] = seconds > 0 ? spent / seconds : 0
                line += " \(key) \(String(format: "%.3f", spent * 1000 / Double(operations))) ms CPU an operation"
                    + " (\(String(format: "%.2f", seconds > 0 ? spent / seconds : 0)) cores);"
            }
            say(String(line.dropLast()))
            return (json, outcome.failures)
        }
    }
}
