import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncServer
import OfflineSyncTestSupport
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Rolling restart: one of two instances over one PostgreSQL restarted under load",
       .enabled(if: TestPostgres.shouldRun, "OFFLINE_SYNC_TEST_POSTGRES_URL is not set: run with Scripts/with-postgres.sh"),
       .timeLimit(.minutes(5)))
struct RollingRestartTests {
    static let notes = TableSchema("notes", fields: [FieldDefinition("title", .string), FieldDefinition("n", .int)])
    static let writers = 6
    static let rows = 60

    @Test("clients behind a balancer lose nothing and apply nothing twice; a change channel on the stopping instance moves to the other without a disconnection")
    func rollingRestart() async throws {
        guard let url = TestPostgres.url else { Issue.record("OFFLINE_SYNC_TEST_POSTGRES_URL is not set but CI is"); return }
        try await withTemporaryDirectory { directory in
            let store = TestPostgres.storeURL(url)
            // `one` drains for a second on SIGTERM: /ready answers 503 while it still serves,
            // and the balancer, watching it, sends new connections elsewhere.
            let one = try await ServerProcess.start(data: directory.appendingPathComponent("one"), store: store,
                                                    extraArguments: ["--drain-seconds", "1"])
            let two = try await ServerProcess.start(data: directory.appendingPathComponent("two"), store: store)
            let balancer = try LoopbackBalancer(backends: [one.port])
            let base = "http://127.0.0.1:\(balancer.port)"
            let tokens = try await TokenAuthority(secret: testSecret)
            let token = try await tokens.mint(identity: "alice")

            // The watcher's channel opens while only `one` takes connections.
            let watcher = HTTPRemoteStore(baseURL: base, token: { token })
            let events = EventLog(watcher.changes())
            #expect(await events.waitFor(.subscribed))
            balancer.setBackends([one.port, two.port])

            var contexts: [(SyncContext, SQLiteStore)] = []
            for index in 0..<Self.writers {
                let local = try await SQLiteStore(path: directory.appendingPathComponent("device-\(index).sqlite").path)
                let remote = HTTPRemoteStore(baseURL: base, token: { token })
                let context = try await SyncContext(store: local, remote: remote, options: SyncOptions(pollInterval: .milliseconds(500)))
                try await context.defineTable(Self.notes)
                await context.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
                contexts.append((context, local))
            }

            let three = Box<ServerProcess?>(nil)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, (context, _)) in contexts.enumerated() {
                    group.addTask {
                        let table = context.table("notes")
                        for row in 0..<Self.rows {
                            let id = "d\(index)-r\(row)"
                            _ = try await table.insert(Record(id: id, fields: ["title": .string(id), "n": 1]))
                            try await Task.sleep(for: .milliseconds(25))
                            if row > 0 { _ = try await table.update(Record(id: "d\(index)-r\(row - 1)", fields: ["n": 2])) }
                        }
                        _ = try await table.update(Record(id: "d\(index)-r\(Self.rows - 1)", fields: ["n": 2]))
                    }
                }
                group.addTask {
                    // Mid-load: stop `one` as an orchestrator does, and start its replacement.
                    try await Task.sleep(for: .milliseconds(600))
                    one.signal(SIGTERM)
                    #expect(await eventually(timeout: .seconds(10)) { await Self.status(of: one, "/ready") == 503 },
                            "a stopping instance says it is not ready")
                    balancer.setBackends([two.port])
                    #expect(await one.stopped() == 0)
                    let replacement = try await ServerProcess.start(data: directory.appendingPathComponent("three"), store: store)
                    three.withLock { $0 = replacement }
                    balancer.setBackends([two.port, replacement.port])
                }
                try await group.waitForAll()
            }

            // Every device's queue drains, with no write refused or in conflict.
            for (index, (context, _)) in contexts.enumerated() {
                #expect(await eventually(timeout: .seconds(60)) { (try? await context.queuedOperationCount()) == 0 },
                        "device \(index)'s queue drained")
                #expect(try await context.operationErrors().isEmpty, "device \(index) has no failed operation")
            }
            // The server holds each row once, updated once: nothing lost, nothing applied twice.
            let direct = HTTPRemoteStore(baseURL: two.baseURL, token: { token })
            var records: [Record] = []
            let stream = direct.openPull(PullRequest(table: "notes", limit: 500))
            while let page = try await stream.next() { records += page.records }
            #expect(records.count == Self.writers * Self.rows)
            #expect(Set(records.map(\.id)).count == Self.writers * Self.rows)
            #expect(records.allSatisfy { $0["n"] == 2 }, "every row carries its one update")

            // The watcher's channel was on `one`: it heard "going away" and subscribed again
            // elsewhere, with no disconnection or failure reported in between.
            let between = await events.consume(through: .subscribed, timeout: .seconds(30))
            #expect(between != nil, "the channel subscribed again")
            #expect(!(between ?? []).contains { event in
                if case .changed = event { return false }
                return true
            }, "only change notices between the two subscriptions: \(between ?? [])")

            for (context, local) in contexts {
                try await context.close()
                try await local.close()
            }
            await events.stop()
            balancer.stop()
            _ = await two.stopped()
            if let replacement = three.withLock({ $0 }) { _ = await replacement.stopped() }
        }
    }

    /// The status `path` answers on `server` (0 when it does not answer).
    static func status(of server: ServerProcess, _ path: String) async -> Int {
        (try? await http(.GET, server.baseURL + path))?.status ?? 0
    }
}
