import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `offline-sync crash-trial-client` in a child process, to be killed.
struct TrialClient {
    let process: Process
    let output: Pipe

    static func start(store: URL, server: String, prefix: String, steps: Int, acks: URL, token: String, drain: Bool = false,
                      untilStep: Int? = nil) throws -> TrialClient {
        let process = Process()
        process.executableURL = ServerProcess.tool
        process.arguments = ["crash-trial-client", "--store", "sqlite://" + store.path, "--server", server, "--prefix", prefix,
                             "--steps", String(steps), "--acks", acks.path] + (drain ? ["--drain"] : [])
            + (untilStep.map { ["--until-step", String($0)] } ?? [])
        var environment = ProcessInfo.processInfo.environment
        environment["OFFLINE_SYNC_TRIAL_TOKEN"] = token
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        return TrialClient(process: process, output: output)
    }

    func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func finish() -> (status: Int32, output: String) {
        let text = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: text, as: UTF8.self))
    }
}

@Suite("Crash trials: client and server processes killed with SIGKILL at random points")
struct CrashTrialTests {
    /// `OFFLINE_SYNC_CRASH_TRIALS` (default 20), `OFFLINE_SYNC_CRASH_SEED` (default: random).
    static let trials = ProcessInfo.processInfo.environment["OFFLINE_SYNC_CRASH_TRIALS"].flatMap(Int.init) ?? 20
    static let seed = ProcessInfo.processInfo.environment["OFFLINE_SYNC_CRASH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)

    /// How many steps the log acknowledges.
    static func acknowledged(_ log: URL) -> Int {
        guard let data = try? Data(contentsOf: log) else { return 0 }
        return data.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    }

    @Test("every acknowledged change reaches the server exactly once, with no false conflict, however often either side is killed")
    func killedAndRestarted() async throws {
        var random = SplitMix64(seed: Self.seed)
        let replay = "replay with OFFLINE_SYNC_CRASH_SEED=\(Self.seed) OFFLINE_SYNC_CRASH_TRIALS=\(Self.trials)"
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("server", isDirectory: true)
            var server = try ServerProcess.start(data: data)
            let token = try await TokenAuthority(secret: testSecret).mint(identity: "trial")
            let store = directory.appendingPathComponent("client.sqlite")
            let acks = directory.appendingPathComponent("acks.log")
            let steps = 100 * Self.trials
            var clientKills = 0, serverKills = 0
            for trial in 0..<Self.trials {
                // Each trial lets the client acknowledge a random number of further steps, then
                // kills it a random few milliseconds later: mid transaction, mid push, anywhere.
                // The client makes steps up to a random target, then only pushes; the kill
                // comes a random moment after the target, or (one trial in three) before it,
                // so it lands mid transaction, mid push or mid answer, however loaded the machine.
                let before = Self.acknowledged(acks)
                let target = before + Int.random(in: 1...60, using: &random)
                let client = try TrialClient.start(store: store, server: server.baseURL, prefix: "t", steps: steps, acks: acks,
                                                   token: token, untilStep: target)
                let early = Int.random(in: 0..<3, using: &random) == 0 ? Int.random(in: before...target, using: &random) : target
                let deadline = ContinuousClock.now + .seconds(30)
                while Self.acknowledged(acks) < early, ContinuousClock.now < deadline, client.process.isRunning {
                    try await Task.sleep(for: .milliseconds(2))
                }
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...20, using: &random)))
                if trial % 4 == 3 {
                    // The server dies mid-push or mid-apply, and comes back on the same data.
                    server.signal(SIGKILL)
                    _ = server.waitForExit()
                    serverKills += 1
                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...100, using: &random)))
                    client.kill()
                    server = try ServerProcess.start(data: data)
                } else {
                    client.kill()
                }
                clientKills += 1
            }
            // The kills cut the work short: the client had not finished when the last one came.
            let ackedByKills = Self.acknowledged(acks)
            #expect(ackedByKills > 0 && ackedByKills < steps, "\(ackedByKills) of \(steps) steps before the last run; \(replay)")
            print("crash trials: \(clientKills) client kills, \(serverKills) server kills, \(ackedByKills) of \(steps) steps acknowledged before the last run")
            // Let the client run to the end, then drain its queue.
            let last = try TrialClient.start(store: store, server: server.baseURL, prefix: "t", steps: steps, acks: acks, token: token)
            let ran = last.finish()
            #expect(ran.status == 0, "the last run failed: \(ran.output); \(replay)")
            let drain = try TrialClient.start(store: store, server: server.baseURL, prefix: "t", steps: steps, acks: acks,
                                              token: token, drain: true)
            let drained = drain.finish()
            #expect(drained.output.contains("drained pending=0 errors=0"),
                    "the queue did not drain cleanly (a false conflict or a failed operation): \(drained.output); \(replay)")

            let acknowledged = String(decoding: try Data(contentsOf: acks), as: UTF8.self).split(separator: "\n").compactMap { Int($0) }
            #expect(Set(acknowledged).count == steps, "every step was acknowledged once the client ran to the end; \(replay)")
            let remote = HTTPRemoteStore(baseURL: server.baseURL, token: { token })
            var rows: [Record] = []
            var cursor: String?
            while true {
                let page = try await remote.pull(PullRequest(table: "trial", cursor: cursor, limit: 1000))
                rows += page.records
                cursor = page.nextCursor
                if page.remaining == 0 { break }
            }
            let ids = rows.filter { $0.id != "t-counter" && !$0.deleted }.map(\.id)
            #expect(ids.count == Set(ids).count, "no row twice; \(replay)")
            #expect(Set(ids) == Set((0..<steps).map { "t-\($0)" }), "every acknowledged insert is on the server, and nothing else; \(replay)")
            #expect(rows.first { $0.id == "t-counter" }?["n"] == .int(Int64(steps - 1)), "the counter holds the last acknowledged step; \(replay)")
            #expect(rows.allSatisfy { $0.id == "t-counter" || $0["n"] == .int(Int64($0.id.dropFirst(2)) ?? -1) }, "\(replay)")
            #expect(clientKills == Self.trials && serverKills == Self.trials / 4)
            #expect(server.stop() == 0)
        }
    }
}
