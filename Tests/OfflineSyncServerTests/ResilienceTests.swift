import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// A real reverse proxy on a loopback port in front of a server that answers the first
/// `failures` requests with `status` (and `Retry-After`), then forwards every request.
struct FlakyProxy {
    let running: Task<Void, any Error>
    let port: Int
    let requests: Box<Int>

    static func start(target: String, failures: Int, status: HTTPResponse.Status, retryAfter: String?) async throws -> FlakyProxy {
        let counter = Box(0)
        let router = Router()
        router.post("**") { request, _ -> Response in
            let number = counter.withLock { value -> Int in value += 1; return value }
            let body = try await request.body.collect(upTo: 64 << 20)
            if number <= failures {
                var headers: HTTPFields = [:]
                if let retryAfter { headers[.retryAfter] = retryAfter }
                return Response(status: status, headers: headers)
            }
            var forward = HTTPClientRequest(url: target + request.uri.path)
            forward.method = .POST
            for field in request.headers where [.authorization, .contentType, .accept].contains(field.name) {
                forward.headers.add(name: field.name.rawName, value: field.value)
            }
            forward.body = .bytes(body)
            let answer = try await HTTPClient.shared.execute(forward, timeout: .seconds(30))
            let bytes = try await answer.body.collect(upTo: 64 << 20)
            var headers: HTTPFields = [:]
            if let type = answer.headers.first(name: "Content-Type") { headers[.contentType] = type }
            return Response(status: .init(code: Int(answer.status.code)), headers: headers, body: .init(byteBuffer: bytes))
        }
        let app = try await LoopbackApp.start(router)
        return FlakyProxy(running: app.running, port: app.port, requests: counter)
    }

    func stop() { running.cancel() }
}

@Suite("HTTP client: retries, backoff and the reconnecting change channel")
struct ResilienceTests {
    @Test("429 with Retry-After and 503 are retried; the push is applied once; a 4xx is not retried")
    func retries() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice")
            for (status, retryAfter) in [(HTTPResponse.Status.tooManyRequests, "1"), (.serviceUnavailable, nil), (.badGateway, nil)] {
                let proxy = try await FlakyProxy.start(target: live.baseURL, failures: 2, status: status, retryAfter: retryAfter)
                defer { proxy.stop() }
                let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(proxy.port)",
                                             configuration: .init(maxAttempts: 4, initialBackoff: .milliseconds(20)), token: { token })
                let started = ContinuousClock.now
                let id = "op-\(status.code)"
                let results = try await remote.push([PushOperation(id: id, table: "t", itemId: "item-\(status.code)", kind: .insert,
                                                                  item: Record(id: "item-\(status.code)"), baseVersion: nil)])
                guard case .applied = results[0].outcome else { Issue.record("not applied after retries: \(results)"); continue }
                #expect(proxy.requests.withLock { $0 } == 3, "two refusals, then the forwarded request")
                if retryAfter != nil { #expect(ContinuousClock.now - started >= .seconds(1), "Retry-After was honoured") }
            }
            let page = try await live.remote("alice").pull(PullRequest(table: "t", limit: 10))
            #expect(page.records.count == 3, "each push applied exactly once")

            // Too many failures: a transient error, and the client gave up after its attempts.
            let proxy = try await FlakyProxy.start(target: live.baseURL, failures: 100, status: .serviceUnavailable, retryAfter: nil)
            defer { proxy.stop() }
            let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(proxy.port)",
                                         configuration: .init(maxAttempts: 3, initialBackoff: .milliseconds(10)), token: { token })
            await #expect(throws: SyncError.self) { try await remote.pull(PullRequest(table: "t", limit: 10)) }
            #expect(proxy.requests.withLock { $0 } == 3)

            // A refusal is final: no retry.
            let direct = HTTPRemoteStore(baseURL: live.baseURL, configuration: .init(maxAttempts: 5), token: { "bad token" })
            do {
                _ = try await direct.pull(PullRequest(table: "t", limit: 10))
                Issue.record("a bad token was accepted")
            } catch let error as SyncError {
                #expect(error.code == .authenticationFailed)
            }
        }
    }

    @Test("the change channel reconnects by itself when the server comes back; a server that stopped said 'going away', so no disconnection is reported")
    func reconnects() async throws {
        try await withTemporaryDirectory { directory in
            // The channel gets ample time to hear "going away" however loaded the machine is.
            let first = try await LiveServer.start(in: directory) { $0.goingAwayGrace = .seconds(30) }
            let port = first.running.port
            let token = try await first.token("alice")
            let remote = HTTPRemoteStore(baseURL: first.baseURL, configuration: .init(initialBackoff: .milliseconds(50),
                                                                                       maxBackoff: .milliseconds(200)),
                                         token: { token })
            let events = EventLog(remote.changes())
            #expect(await events.waitFor(.subscribed))
            try await first.stop()
            // The same data and port, a new server process-equivalent.
            let second = try await LiveServer.start(in: directory) { $0.port = port }
            let between = await events.consume(through: .subscribed)
            #expect(between != nil, "subscribed again")
            #expect(!(between ?? []).contains(.disconnected), "\(between ?? [])")
            _ = try await HTTPRemoteStore(baseURL: second.baseURL, token: { token })
                .push([PushOperation(id: "1", table: "todos", itemId: "a", kind: .insert, item: Record(id: "a"), baseVersion: nil)])
            #expect(await events.waitFor(.changed(table: "todos")))
            await events.stop()
            try await second.stop()
        }
    }

    @Test("the notification socket refuses missing and foreign tokens")
    func socketAuth() async throws {
        try await LiveServer.with { live in
            let forged = try await TokenAuthority(secret: Array("some other secret, also 32 bytes long".utf8)).mint(identity: "alice")
            for token in ["", "garbage", forged] {
                // An upgrade request without a valid token is refused by the WebSocket upgrader:
                // a bare 400 and a closed connection, never 101.
                let connection = try LoopbackSocket(port: live.running.port)
                try connection.send(LoopbackSocket.changeChannelRequest(port: live.running.port, token: token))
                let answer = String(decoding: try await connection.readAll(), as: UTF8.self)
                connection.hangUp()
                #expect(answer.hasPrefix("HTTP/1.1 400"), "token '\(token.prefix(10))': \(answer.prefix(40))")
                // The same route without an upgrade says why.
                let plain = try await http(.GET, live.baseURL + "/v1/changes", headers: [("Authorization", "Bearer \(token)")])
                #expect(plain.status == 401)
                #expect(plain.errorCode == "unauthorized")
            }
            let valid = try await http(.GET, live.baseURL + "/v1/changes", headers: [("Authorization", "Bearer \(try await live.token("alice"))")])
            #expect(valid.status == 426, "a valid token without an upgrade is told to upgrade")
            let remote = HTTPRemoteStore(baseURL: live.baseURL, configuration: .init(initialBackoff: .milliseconds(20)), token: { forged })
            let events = EventLog(remote.changes())
            // The channel reports the refusal, and nothing was subscribed before it. (The refused
            // upgrade is reported first, at once, as the remote's refusal: a proxy's 400 looks the
            // same; the event stream's 401 then names refused credentials.)
            let beforeRefusal = await events.consume(throughFirst: { event in
                if case .unavailable(let error) = event { return error.code == .authenticationFailed }
                return false
            })
            let onlyRefusals = beforeRefusal?.allSatisfy { event in
                guard case .unavailable(let error) = event else { return false }
                return error.code == .rejected
            }
            #expect(onlyRefusals == true, "a forged token never subscribes: \(String(describing: beforeRefusal))")
            await events.stop()
        }
    }
}

/// A log handler that keeps every line, with its metadata, for inspection.
struct CapturingLogHandler: LogHandler {
    let lines: Box<[String]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = self.metadata.merging(event.metadata ?? [:]) { $1 }
        lines.withLock { $0.append("\(event.level) \(event.message) \(all)") }
    }
}

@Suite("Server: logs")
struct LogTests {
    @Test("structured request logs carry no token, key, secret or record value")
    func noSecrets() async throws {
        let lines = Box<[String]>([])
        let logger = Logger(label: "capture") { _ in CapturingLogHandler(lines: lines) }
        try await LiveServer.with(configure: { $0.logger = logger }) { live in
            let token = try await live.token("alice")
            let remote = HTTPRemoteStore(baseURL: live.baseURL, token: { token })
            _ = try await remote.push([PushOperation(id: "1", table: "todos", itemId: "secret-item-id", kind: .insert,
                                                     item: Record(id: "secret-item-id", fields: ["title": "TOP-SECRET-VALUE"]), baseVersion: nil)])
            _ = try await remote.pull(PullRequest(table: "todos", predicate: Field("title") == "TOP-SECRET-VALUE", limit: 10))
            _ = try await http(.GET, live.baseURL + "/tables/todos?$filter=" + encode("title eq 'TOP-SECRET-VALUE'"),
                               headers: [("Authorization", "Bearer \(token)")])
            _ = try await http(.POST, live.baseURL + "/v1/admin/tokens", headers: [("X-Admin-Key", testAdminKey)],
                               body: Array(#"{"identity":"bob"}"#.utf8))
            _ = try await http(.POST, live.baseURL + "/v1/push", headers: [("Authorization", "Bearer forged.TOKEN.value")], body: [])
        }
        let all = lines.withLock { $0 }
        #expect(all.count >= 5, "one line per request")
        #expect(all.contains { $0.contains("/v2/push") && $0.contains("status=200") || $0.contains("/v2/push") && $0.contains("200") })
        for line in all {
            for secret in ["TOP-SECRET-VALUE", "secret-item-id", "forged.TOKEN.value", testAdminKey, "eyJ",
                           String(decoding: testSecret, as: UTF8.self)] {
                #expect(!line.contains(secret), "a log line leaks '\(secret)': \(line)")
            }
        }
    }
}
