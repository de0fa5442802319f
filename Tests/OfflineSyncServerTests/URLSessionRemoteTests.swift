import AsyncHTTPClient
import Foundation
import Hummingbird
import OfflineSync
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import OfflineSyncURLSession
import Testing

extension LiveServer {
    /// A remote over `URLSession` for `identity`.
    func urlSessionRemote(_ identity: String, configuration: URLSessionRemoteStore.Configuration = .init()) async throws -> URLSessionRemoteStore {
        let token = try await server.tokens.mint(identity: identity)
        return URLSessionRemoteStore(baseURL: baseURL, configuration: configuration, token: { token })
    }
}

/// A live server on a loopback port, over a SQLite file, reached through ``URLSessionRemoteStore``.
let urlSessionBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let live = try await LiveServer.start(in: directory)
    return ConformanceBackend(remote: { try await live.urlSessionRemote($0) }, shutdown: { try await live.stop() })
}

/// The same under the suite's shared-lists rules document.
let urlSessionSharedBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let live = try await LiveServer.start(in: directory, rules: try SyncRules(yaml: RemoteStoreConformance.sharedListsRules))
    return ConformanceBackend(remote: { try await live.urlSessionRemote($0) }, shutdown: { try await live.stop() })
}

@Suite("Conformance: RemoteStore over URLSession (live server on SQLite)")
struct URLSessionRemoteConformanceTests {
    let suite = RemoteStoreConformance(makeBackend: urlSessionBackend, makeSharedListsBackend: urlSessionSharedBackend)

    @Test(arguments: RemoteStoreConformance.Group.allCases)
    func group(_ group: RemoteStoreConformance.Group) async throws { try await suite.check(group) }
}

@Suite("Conformance: sync scenarios, SQLite clients over URLSession")
struct URLSessionScenarioTests {
    let suite = SyncScenarioConformance(
        makeLocal: { try await SQLiteStore(path: $0.appendingPathComponent("client.sqlite").path) },
        makeBackend: urlSessionBackend)

    @Test(arguments: SyncScenarioConformance.Group.allCases)
    func group(_ group: SyncScenarioConformance.Group) async throws { try await suite.check(group) }
}

/// A proxy that passes plain HTTP, streaming answers as they come, and no WebSockets: an
/// upgrade reaches the server as a plain GET (its `Upgrade` header dropped, as a proxy that
/// does not know WebSockets drops hop-by-hop headers), which answers 426.
struct PlainHTTPProxy {
    let app: LoopbackApp
    var port: Int { app.port }

    static func start(target: String) async throws -> PlainHTTPProxy {
        let router = Router()
        let forward: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            var outgoing = HTTPClientRequest(url: target + request.uri.description)
            outgoing.method = .init(rawValue: request.method.rawValue)
            for field in request.headers where [.authorization, .contentType, .accept].contains(field.name) {
                outgoing.headers.add(name: field.name.rawName, value: field.value)
            }
            if request.method == .post { outgoing.body = .bytes(try await request.body.collect(upTo: 64 << 20)) }
            let answer = try await HTTPClient.shared.execute(outgoing, timeout: .seconds(600))
            var headers: HTTPFields = [:]
            if let type = answer.headers.first(name: "Content-Type") { headers[.contentType] = type }
            return Response(status: .init(code: Int(answer.status.code)), headers: headers, body: ResponseBody(asyncSequence: answer.body))
        }
        router.post("**", use: forward)
        router.get("**", use: forward)
        return PlainHTTPProxy(app: try await LoopbackApp.start(router))
    }

    func stop() async { await app.stop() }
}

@Suite("URLSession remote: the change channel, failures, the page stream", .timeLimit(.minutes(3)))
struct URLSessionRemoteTests {
    static func item(_ id: String) -> PushOperation {
        PushOperation(id: "op-\(id)", table: "notes", itemId: id, kind: .insert, item: Record(id: id, fields: ["n": 1]), baseVersion: nil)
    }

    @Test("the change channel over URLSession: subscribed, then another client's change and never its own (an event stream where Foundation has no WebSocket)")
    func changeChannel() async throws {
        try await LiveServer.with { live in
            let remote = try await live.urlSessionRemote("alice")
            var events = remote.changes().makeAsyncIterator()
            #expect(await events.next() == .subscribed)
            // Its own push is not announced back to it; another client's is.
            _ = try await remote.push([Self.item("own")])
            _ = try await live.remote("alice").push([Self.item("other")])
            #expect(await events.next() == .changed(table: "notes"))
            // Nobody else's rows: bob's write reaches bob's channel only.
            let bob = try await live.urlSessionRemote("bob")
            var bobEvents = bob.changes().makeAsyncIterator()
            #expect(await bobEvents.next() == .subscribed)
            _ = try await live.remote("bob").push([Self.item("bobs")])
            #expect(await bobEvents.next() == .changed(table: "notes"))
            _ = try await live.remote("alice").push([Self.item("second")])
            #expect(await events.next() == .changed(table: "notes"), "alice hears her own second change, not bob's")
        }
    }

    @Test("behind a proxy without WebSockets, HTTPRemoteStore's refused upgrade turns to the event stream, and changes arrive",
          .timeLimit(.minutes(3)))
    func refusedUpgradeUsesTheEventStream() async throws {
        try await LiveServer.with { live in
            let proxy = try await PlainHTTPProxy.start(target: live.baseURL)
            let token = try await live.token("alice")
            let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(proxy.port)", token: { token })
            var events = remote.changes().makeAsyncIterator()
            // Under the whole suite's load a first attempt can outlast the handshake timeout;
            // the channel tries again, and what matters is that it ends up subscribed.
            var first = await events.next()
            while let event = first, event != .subscribed { first = await events.next() }
            #expect(first == .subscribed)
            _ = try await live.remote("alice").push([Self.item("through")])
            // A channel that reconnects under load says so with another `subscribed` (a change
            // made in the gap is caught up by a sync, not announced): write again then.
            var heard = false, rewrites = 0
            while !heard, let event = await events.next() {
                switch event {
                case .changed(table: "notes"): heard = true
                case .subscribed:
                    rewrites += 1
                    _ = try await live.remote("alice").push([Self.item("again-\(rewrites)")])
                default: continue
                }
            }
            #expect(heard)
            await proxy.stop()
        }
    }

    @Test("an event stream ends when its token expires; the channel comes back with the provider's fresh token")
    func eventStreamTokenExpiry() async throws {
        try await LiveServer.with { live in
            let asked = Box(0)
            let tokens = live.server.tokens
            let remote = URLSessionRemoteStore(baseURL: live.baseURL, configuration: .init(initialBackoff: .milliseconds(10)), token: {
                asked.withLock { $0 += 1 }
                return try await tokens.mint(identity: "alice", lifetime: .seconds(2))
            })
            var events = remote.changes().makeAsyncIterator()
            #expect(await events.next() == .subscribed)
            #expect(await events.next() == .disconnected)
            #expect(await events.next() == .subscribed)
            #expect(asked.withLock { $0 } >= 2)
        }
    }

    @Test("refusals are typed: a garbage token is authenticationFailed (push and channel), a closed port is transient and says so")
    func refusals() async throws {
        try await LiveServer.with { live in
            let garbage = URLSessionRemoteStore(baseURL: live.baseURL, token: { "garbage" })
            await #expect(throws: SyncError.self) { _ = try await garbage.push([Self.item("x")]) }
            do {
                _ = try await garbage.push([Self.item("x")])
            } catch let error as SyncError {
                #expect(error.code == .authenticationFailed)
            }
            var events = garbage.changes().makeAsyncIterator()
            guard case .unavailable(let failure)? = await events.next() else { Issue.record("no failure reported"); return }
            #expect(failure.code == .authenticationFailed, "\(failure)")
        }
        let port = try RefusingPort()
        let closed = URLSessionRemoteStore(baseURL: "http://127.0.0.1:\(port.port)",
                                           configuration: .init(maxAttempts: 2, initialBackoff: .milliseconds(10)), token: { "t" })
        do {
            _ = try await closed.pull(PullRequest(table: "notes", limit: 10))
            Issue.record("a pull from a closed port succeeded")
        } catch let error as SyncError {
            #expect(error.code == .transient)
            #expect(error.message.contains("refused"), "\(error.message)")
        }
        #expect(await closed.isReachable() == false)
    }

    @Test("a page stream larger than the transport's response limit, read slowly, arrives whole and in order over several responses")
    func largePageStreamReadSlowly() async throws {
        try await LiveServer.with { live in
            let writer = try await live.remote("alice")
            let filler = String(repeating: "x", count: 400)
            let total = 16_000
            for start in stride(from: 0, to: total, by: 1_000) {
                let batch = (start..<start + 1_000).map { index in
                    PushOperation(id: "op-\(index)", table: "notes", itemId: String(format: "n%06d", index), kind: .insert,
                                  item: Record(id: String(format: "n%06d", index), fields: ["text": .string(filler)]), baseVersion: nil)
                }
                _ = try await writer.push(batch)
            }
            // 16,000 rows of 400 bytes: over 6 MiB, more than the 4 MiB the transport lets one response carry.
            let remote = try await live.urlSessionRemote("alice")
            let stream = remote.openPull(PullRequest(table: "notes", limit: 500))
            var ids: [String] = []
            var pages = 0
            while let page = try await stream.next() {
                ids += page.records.map(\.id)
                pages += 1
                // The first pages slowly, so the body backs up behind the reader.
                if pages <= 3 { try await Task.sleep(for: .milliseconds(300)) }
            }
            #expect(ids.count == total)
            #expect(ids == ids.sorted())
            #expect(Set(ids).count == total)
        }
    }
}
