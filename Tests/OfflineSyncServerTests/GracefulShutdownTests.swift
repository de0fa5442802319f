import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncTestSupport
import OfflineSyncURLSession
import OfflineSyncWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Server process: graceful shutdown")
struct GracefulShutdownTests {
    @Test("SIGTERM during a push: the push completes whole, new connections are refused, the process exits 0")
    func sigtermDuringPush() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await ServerProcess.start(data: directory)
            let token = try await TokenAuthority(secret: testSecret).mint(identity: "alice")
            let operations = (0..<500).map { i in
                PushOperation(id: "op-\(i)", table: "todos", itemId: "item-\(i)", kind: .insert,
                              item: Record(id: "item-\(i)", fields: ["title": .string("todo \(i)"), "n": .int(Int64(i))]), baseVersion: nil)
            }
            let body = JSON.object([("operations", .array(operations.map(Wire.json)))]).encoded
            let head = Array("POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8)
            // Send the head and half the body, so the request is in flight when SIGTERM arrives.
            let connection = try LoopbackSocket(port: server.port)
            defer { connection.hangUp() }
            try connection.send(head + body[0..<body.count / 2])
            // Give the server time to read the head (a connection with no request under way is
            // idle, and idle connections are closed at shutdown).
            try await Task.sleep(for: .seconds(1))
            server.signal(SIGTERM)
            try await Task.sleep(for: .milliseconds(500))
            // The listener is closed: a new connection is refused, while the in-flight request goes on.
            #expect(throws: POSIXError.self) { _ = try LoopbackSocket(port: server.port) }
            try connection.send(Array(body[(body.count / 2)...]))
            let answer = String(decoding: try await connection.readAll(), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
            let exit = try await server.exited()
            #expect(exit.status == 0)
            #expect(exit.output.contains("offline-sync server stopped"))
            // Restarted on the same data, every operation of the push is there, once.
            let again = try await ServerProcess.start(data: directory)
            defer { _ = again.stop() }
            let remote = HTTPRemoteStore(baseURL: again.baseURL, token: { token })
            let page = try await remote.pull(PullRequest(table: "todos", limit: 1000))
            #expect(page.records.count == 500)
            #expect(Set(page.records.map(\.id)) == Set(operations.map(\.itemId)))
            let replay = try await remote.push(Array(operations.prefix(3)))
            for result in replay {
                guard case .applied = result.outcome else { Issue.record("a replay is not answered with its first outcome"); break }
            }
            #expect(await again.stopped() == 0)
        }
    }

    @Test("SIGINT stops an idle server with status 0; a notification socket is told 'going away' (1001) and reports no disconnection, only that the reconnection found no server; a killed server's socket is a disconnection")
    func sigintIdle() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await ServerProcess.start(data: directory)
            let token = try await TokenAuthority(secret: testSecret).mint(identity: "alice")
            let remote = HTTPRemoteStore(baseURL: server.baseURL,
                                         configuration: .init(maxAttempts: 1, initialBackoff: .seconds(30)), token: { token })
            var events = remote.changes().makeAsyncIterator()
            #expect(await events.next() == .subscribed)
            server.signal(SIGINT)
            let exit = try await server.exited()
            #expect(exit.status == 0)
            #expect(await Self.nextIsUnreachable(&events))

            // A server that dies says nothing: that is a disconnection.
            let killed = try await ServerProcess.start(data: directory.appendingPathComponent("killed"))
            let other = HTTPRemoteStore(baseURL: killed.baseURL,
                                        configuration: .init(maxAttempts: 1, initialBackoff: .seconds(30)), token: { token })
            var otherEvents = other.changes().makeAsyncIterator()
            #expect(await otherEvents.next() == .subscribed)
            killed.signal(SIGKILL)
            _ = try await killed.exited()
            #expect(await otherEvents.next() == .disconnected)
        }
    }

    /// Whether the channel's next event says the server cannot be reached (and not that the
    /// channel was disconnected: a server going away is not a disconnection).
    static func nextIsUnreachable(_ events: inout AsyncStream<RemoteChangeEvent>.Iterator) async -> Bool {
        guard case .unavailable(let error)? = await events.next() else { return false }
        return error.code == .transient
    }
    @Test("SIGINT with an event-stream change channel open: its last message says 'going away', the process exits 0 within the grace period")
    func sigintWithEventStream() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await ServerProcess.start(data: directory)
            let token = try await TokenAuthority(secret: testSecret).mint(identity: "alice")
            // URLSession on Linux has no WebSocket: its channel is the event stream.
            let remote = URLSessionRemoteStore(baseURL: server.baseURL,
                                               configuration: .init(maxAttempts: 1, initialBackoff: .seconds(30)), token: { token })
            var events = remote.changes().makeAsyncIterator()
            #expect(await events.next() == .subscribed)
            let started = ContinuousClock.now
            server.signal(SIGINT)
            let exit = try await server.exited()
            #expect(exit.status == 0)
            #expect(ContinuousClock.now - started < .seconds(8), "the open stream did not hold the server to its grace period")
            #expect(await Self.nextIsUnreachable(&events))
        }
    }

    // A hang is what this guards against: the time limit turns one into a failure.
    @Test("a connection that never sends a byte does not hold a stopping server open: SIGTERM closes it at once and the process exits 0",
          .timeLimit(.minutes(1)))
    func silentConnectionAtShutdown() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await ServerProcess.start(data: directory)
            // Connected, and silent (a pooled connection opened ahead of need, a link that
            // dropped after the handshake): before this was guarded the shutdown waited for it
            // for as long as the socket stayed open.
            let silent = try LoopbackSocket(port: server.port)
            defer { silent.hangUp() }
            server.signal(SIGTERM)
            #expect(try await silent.readAll().isEmpty)
            let exit = try await server.exited()
            #expect(exit.status == 0)
            #expect(exit.output.contains("offline-sync server stopped"))
        }
    }

    @Test("a connection silent for longer than the silent-connection timeout is closed; one that sends its request in time is served",
          .timeLimit(.minutes(1)))
    func silentConnectionTimesOut() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LiveServer.start(in: directory) { $0.silentConnectionTimeout = .milliseconds(300) }
            let silent = try LoopbackSocket(port: live.running.port)
            defer { silent.hangUp() }
            let prompt = try LoopbackSocket(port: live.running.port)
            defer { prompt.hangUp() }
            try prompt.send(Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
            #expect(try await silent.readAll().isEmpty)
            let answer = String(decoding: try await prompt.readAll(), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
            try await live.stop()
        }
    }
}
