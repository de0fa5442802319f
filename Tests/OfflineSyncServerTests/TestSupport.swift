import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import OfflineSync
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// The token secret every test server uses.
let testSecret = Array("offline-sync test secret, 32+ bytes long".utf8)
/// The admin key every test server uses.
let testAdminKey = "test-admin-key"

/// A logger that drops everything (tests that read logs make their own).
let quietLogger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

/// A live server on a loopback port over a SQLite file, for one test.
struct LiveServer: Sendable {
    let store: SQLiteStore
    let server: SyncServer
    let running: RunningSyncServer
    var baseURL: String { running.baseURL }

    static func start(in directory: URL, rules: SyncRules = .ownerOnly,
                      groupFanoutLimit: Int = OfflineSyncService.defaultGroupFanoutLimit,
                      attachmentLimits: AttachmentLimits = AttachmentLimits(),
                      configure: (inout SyncServer.Configuration) -> Void = { _ in }) async throws -> LiveServer {
        let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
        let service = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: groupFanoutLimit,
                                                   attachmentLimits: attachmentLimits)
        var configuration = SyncServer.Configuration(port: 0, tokenSecret: testSecret, adminKey: testAdminKey, logger: quietLogger)
        configure(&configuration)
        let server = try await SyncServer(service: service, configuration: configuration)
        return LiveServer(store: store, server: server, running: try await server.start())
    }

    func remote(_ identity: String, configuration: HTTPRemoteStore.Configuration = .init()) async throws -> HTTPRemoteStore {
        let token = try await server.tokens.mint(identity: identity)
        return HTTPRemoteStore(baseURL: baseURL, configuration: configuration, token: { token })
    }

    func token(_ identity: String) async throws -> String { try await server.tokens.mint(identity: identity) }

    func stop() async throws {
        try await running.stop()
        try await store.close()
    }

    /// Runs `body` against a fresh server and stops it afterwards, even on failure.
    static func with<T>(rules: SyncRules = .ownerOnly, groupFanoutLimit: Int = OfflineSyncService.defaultGroupFanoutLimit,
                        attachmentLimits: AttachmentLimits = AttachmentLimits(),
                        configure: (inout SyncServer.Configuration) -> Void = { _ in },
                        _ body: (LiveServer) async throws -> T) async throws -> T {
        try await withTemporaryDirectory { directory in
            let live = try await start(in: directory, rules: rules, groupFanoutLimit: groupFanoutLimit,
                                       attachmentLimits: attachmentLimits, configure: configure)
            do {
                let result = try await body(live)
                try await live.stop()
                return result
            } catch {
                try? await live.stop()
                throw error
            }
        }
    }
}

/// A Hummingbird application of a test's own (a proxy, an identity provider) on a free
/// loopback port; ``start(_:)`` returns once it listens.
struct LoopbackApp: Sendable {
    let port: Int
    let running: Task<Void, any Error>

    static func start(_ router: Router<BasicRequestContext>) async throws -> LoopbackApp {
        let (bound, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: quietLogger)
        let task = Task { try await app.runService(gracefulShutdownSignals: []) }
        var iterator = bound.makeAsyncIterator()
        guard let port = await iterator.next() else { throw SyncError(.transient, "the loopback app did not start") }
        return LoopbackApp(port: port, running: task)
    }

    /// Stops it and waits until it has.
    func stop() async {
        running.cancel()
        _ = await running.result
    }
}

/// A raw HTTP exchange's answer.
struct RawResponse {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    /// The `error.code` of a JSON error body.
    var errorCode: String? {
        guard let json = try? OfflineSyncWire.JSON.parse(body), case .string(let code)? = json["error"]?["code"] else { return nil }
        return code
    }
}

/// Sends one request with AsyncHTTPClient and reads the whole answer.
func http(_ method: NIOHTTP1.HTTPMethod, _ url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
          client: HTTPClient = .shared) async throws -> RawResponse {
    var request = HTTPClientRequest(url: url)
    request.method = method
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
    let response = try await client.execute(request, timeout: .seconds(60))
    let buffer = try await response.body.collect(upTo: 512 << 20)
    return RawResponse(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                       body: Array(buffer.readableBytesView))
}

import NIOHTTP1
import OfflineSyncWire

/// Runs `body` with an HTTP client of its own that opens up to `connections` connections to
/// one host at once (the shared client queues requests past 8), and shuts it down after.
func withWideClient<T>(connections: Int, _ body: (HTTPClient) async throws -> T) async throws -> T {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    do {
        let result = try await body(client)
        try await client.shutdown()
        return result
    } catch {
        try? await client.shutdown()
        throw error
    }
}
