import Foundation
import OfflineSync
import OfflineSyncServer
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// `GET /ready`, the readiness probe, beside `GET /health`, the liveness probe.
@Suite("Server: readiness while serving, draining and without a store")
struct ReadinessTests {
    @Test("a shutdown answers 503 on /ready for the drain period while the server still serves, then stops accepting")
    func drainsBeforeStopping() async throws {
        // A drain long enough for the requests below on a machine busy with the whole suite:
        // 2, 8 and 20 seconds each ran out there at times (the port was closed before the
        // checks ran), as each request then waits its turn for seconds.
        try await LiveServer.with(configure: { $0.drainPeriod = .seconds(60) }) { live in
            let ready = try await http(.GET, live.baseURL + "/ready")
            #expect(ready.status == 200 && ready.text.contains("\"ready\""))
            let stopping = Task { try await live.running.stop() }
            #expect(try await eventually(timeout: .seconds(30)) { try await http(.GET, live.baseURL + "/ready").status == 503 })
            let draining = try await http(.GET, live.baseURL + "/ready")
            #expect(draining.text.contains("\"draining\""))
            // Still serving while it drains: liveness, and a request that needs a token.
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)
            let pull = try await http(.POST, live.baseURL + "/v1/pull", headers: [("Authorization", "Bearer \(try await live.token("alice"))")],
                                      body: Array(#"{"table":"todos"}"#.utf8))
            #expect(pull.status == 200)
            try await stopping.value
            // Stopped: the port refuses a new connection.
            #expect(throws: SyncError.self) { _ = try RawConnection(port: live.running.port) }
        }
    }

    @Test("a store that does not answer makes /ready 503 while /health stays 200")
    func storeUnavailable() async throws {
        try await LiveServer.with { live in
            #expect(try await http(.GET, live.baseURL + "/ready").status == 200)
            try await live.store.close()
            let answer = try await http(.GET, live.baseURL + "/ready")
            #expect(answer.status == 503 && answer.text.contains("store unavailable"))
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)
        }
    }
}
