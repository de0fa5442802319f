import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `offline-sync serve` instances over one PostgreSQL database, in a schema of their own that
/// ``stop()`` drops, behind a ``LoopbackBalancer``: what an operator runs to scale out, and
/// what a rolling restart restarts one at a time.
final class InstanceGroup: Sendable {
    /// The balancer's address, which clients use.
    let baseURL: String
    let balancer: LoopbackBalancer
    private let postgres: String
    /// The PostgreSQL schema the instances share.
    let schema: String
    private let storeURL: String
    private let directory: URL
    private let secret: String
    private let adminKey: String
    private let instances: Mutex<[ServerProcess]>
    private let started = Atomic(0)
    /// More `serve` arguments for every instance (`--postgres-replica …`).
    private let extraArguments: [String]

    /// Starts `count` instances, each draining for a second on SIGTERM (`/ready` answers 503
    /// while it still serves: the balancer's cue).
    init(count: Int, postgres: String, directory: URL, secret: String, adminKey: String, extraArguments: [String] = []) throws {
        self.postgres = postgres
        self.extraArguments = extraArguments
        schema = "osync_loadtest_" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        storeURL = postgres + (postgres.contains("?") ? "&" : "?") + "schema=" + schema
        self.directory = directory
        self.secret = secret
        self.adminKey = adminKey
        instances = Mutex([])
        balancer = try LoopbackBalancer(backends: [])
        baseURL = "http://127.0.0.1:\(balancer.port)"
        var running: [ServerProcess] = []
        for _ in 0..<count { running.append(try launch()) }
        instances.withLock { $0 = running }
        balancer.setBackends(running.map(Self.port))
    }

    /// The instances running now, in the balancer's order.
    var current: [ServerProcess] { instances.withLock { $0 } }

    private func launch() throws -> ServerProcess {
        let number = started.wrappingAdd(1, ordering: .relaxed).oldValue
        return try ServerProcess.start(data: directory.appendingPathComponent("instance-\(number)"), secret: secret,
                                       extraArguments: ["--store", storeURL, "--drain-seconds", "1"] + extraArguments,
                                       environment: ["OFFLINE_SYNC_ADMIN_KEY": adminKey])
    }

    static func port(_ server: ServerProcess) -> Int { URL(string: server.baseURL)?.port ?? 0 }

    /// Restarts the first instance as an orchestrator does: SIGTERM; once its `/ready` answers
    /// 503 the balancer sends new connections to the others; it finishes what it serves and
    /// exits; a replacement starts and joins the balancer. Returns when the replacement takes
    /// connections; throws when the stopped instance did not exit cleanly within 60 s.
    func restartFirst() async throws {
        let (stopping, others) = instances.withLock { ($0[0], Array($0.dropFirst())) }
        let port = Self.port(stopping)
        stopping.process.terminate()
        let signalled = ContinuousClock.now
        while await LoopbackSocket.get(port: port, path: "/ready")?.status == 200, ContinuousClock.now - signalled < .seconds(10) {
            try await Task.sleep(for: .milliseconds(20))
        }
        balancer.setBackends(others.map(Self.port))
        let status = try await exitStatus(of: stopping, within: .seconds(60))
        guard status == 0 else { throw SyncError(.transient, "the restarted instance exited with status \(status.map(String.init) ?? "none (still running after 60 s)")") }
        let replacement = try await Task.detached { try self.launch() }.value
        let now = instances.withLock { running -> [ServerProcess] in
            running = Array(running.dropFirst()) + [replacement]
            return running
        }
        balancer.setBackends(now.map(Self.port))
    }

    /// The process's exit status, or `nil` when it still runs after `limit`.
    private func exitStatus(of server: ServerProcess, within limit: Duration) async throws -> Int32? {
        let deadline = ContinuousClock.now + limit
        while server.process.isRunning {
            guard ContinuousClock.now < deadline else { return nil }
            try await Task.sleep(for: .milliseconds(20))
        }
        return server.process.terminationStatus
    }

    /// Runs `body` with `count` fresh instances (each with an admin key of its own making),
    /// and stops them afterwards, whether `body` returns or throws.
    static func with<T>(count: Int, postgres: String, directory: URL, secret: String, extraArguments: [String] = [],
                        _ body: (InstanceGroup) async throws -> T) async throws -> T {
        let group = try InstanceGroup(count: count, postgres: postgres, directory: directory, secret: secret, adminKey: UUID().uuidString,
                                      extraArguments: extraArguments)
        do {
            let result = try await body(group)
            await group.stop()
            return result
        } catch {
            await group.stop()
            throw error
        }
    }

    /// The store reads of every instance so far, by what served them
    /// (`offline_sync_replica_reads_total`).
    func replicaReads() async throws -> (replica: Int, primary: Int) {
        var totals = (replica: 0, primary: 0)
        for server in current {
            guard let answer = await LoopbackSocket.get(port: Self.port(server), path: "/metrics", headers: "X-Admin-Key: \(adminKey)\r\n"),
                  answer.status == 200 else {
                throw SyncError(.transient, "an instance's /metrics did not answer")
            }
            for line in answer.body.split(separator: "\n") where line.hasPrefix("offline_sync_replica_reads_total{") {
                let count = line.split(separator: " ").last.flatMap { Int($0) } ?? 0
                if line.contains("served_by=\"replica\"") { totals.replica += count } else if line.contains("served_by=\"primary\"") { totals.primary += count }
            }
        }
        return totals
    }

    /// Stops every instance (SIGTERM, then SIGKILL after 30 s) and the balancer, and drops the schema.
    func stop() async {
        balancer.stop()
        for server in current {
            server.process.terminate()
            if (try? await exitStatus(of: server, within: .seconds(30))) == nil { kill(server.process.processIdentifier, SIGKILL) }
        }
        try? RawPostgreSQL(postgres).execute("SET client_min_messages = warning; DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
    }
}
