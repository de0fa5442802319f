import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncServer
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// `GET /ready`, the readiness probe, beside `GET /health`, the liveness probe.
@Suite("Server: readiness while serving, draining and without a store")
struct ReadinessTests {
    @Test("a shutdown answers 503 on /ready for the drain period while the server still serves, then stops accepting")
    func drainsBeforeStopping() async throws {
        // A drain longer than the shutdown's 10 s grace period: the grace period once bounded
        // the whole shutdown, drain included, and cut the drain short under the whole suite's
        // load, where the requests below took longer than that. The drain is long enough that
        // the requests below, slowed by the whole suite, still fall inside it.
        try await LiveServer.with(configure: { $0.drainPeriod = .seconds(45) }) { live in
            let ready = try await http(.GET, live.baseURL + "/ready")
            #expect(ready.status == 200 && ready.text.contains("\"ready\""))
            let began = ContinuousClock.now
            let stopping = Task { try await live.running.stop() }
            #expect(try await eventually(timeout: .seconds(30)) { try await http(.GET, live.baseURL + "/ready").status == 503 })
            let draining = try await http(.GET, live.baseURL + "/ready")
            #expect(draining.text.contains("\"draining\""))
            // Still serving while it drains: liveness, and a request that needs a token.
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)
            let pull = try await http(.POST, live.baseURL + "/v1/pull", headers: [("Authorization", "Bearer \(try await live.token("alice"))")],
                                      body: Array(#"{"table":"todos"}"#.utf8))
            #expect(pull.status == 200)
            // Still serving past the 10 s grace period, which once cut the drain short there.
            try await Task.sleep(until: began + .seconds(14))
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)
            try await stopping.value
            #expect(ContinuousClock.now - began >= .seconds(45), "the drain ended early")
            // Stopped: the port refuses a new connection.
            #expect(throws: POSIXError.self) { _ = try LoopbackSocket(port: live.running.port) }
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
