import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Synchronization
import Testing

/// A message channel between instances that the test can break: what `LISTEN`/`NOTIFY` is
/// to PostgreSQL, in process. ``drop()`` ends the open listening (as a failover does);
/// ``failSends`` makes every send fail (as a database that cannot be reached does).
final class BreakableChannel: Sendable {
    private let state = Mutex<(current: AsyncStream<String>.Continuation?, failing: Bool)>((nil, false))

    func send(_ message: String) throws {
        try state.withLock { state in
            if state.failing { throw SyncError(.transient, "the channel is down") }
            state.current?.yield(message)
        }
    }

    func receive() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        state.withLock { state in
            state.current?.finish()
            state.current = continuation
        }
        return stream
    }

    /// Ends the listening under way: the feed listens again, and what was sent meanwhile is lost.
    func drop() { state.withLock { $0.current?.finish() } }

    func failSends(_ failing: Bool) { state.withLock { $0.failing = failing } }
}

/// Notices lost between instances (the database failed over) make every change channel of
/// the instance end, so its client reconnects and catches up by pulling; a notice that could
/// not be sent still reaches this instance's own channels.
@Suite("Change channels after lost notices: the client reconnects and catches up")
struct FeedGapTests {
    static func insert(_ id: String) -> PushOperation {
        PushOperation(id: "op-\(id)-\(UUID())", table: "todos", itemId: id, kind: .insert, item: Record(id: id, fields: ["n": 1]),
                      baseVersion: nil)
    }

    /// Runs `body` with a server whose feed relays through `channel`.
    static func withServer(_ channel: BreakableChannel,
                           _ body: (SyncServer, RunningSyncServer, RelayedChangeFeed) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let feed = RelayedChangeFeed(send: { try channel.send($0) }, receive: { channel.receive() })
            await feed.waitUntilListening()
            let server: SyncServer, running: RunningSyncServer
            do {
                let service = try await OfflineSyncService(store: store)
                server = try await SyncServer(service: service, configuration: SyncServer.Configuration(
                    port: 0, tokenSecret: testSecret, adminKey: testAdminKey, logger: quietLogger), feed: feed)
                running = try await server.start()
            } catch {
                feed.stop()
                try? await store.close()
                throw error
            }
            do {
                try await body(server, running, feed)
            } catch {
                feed.stop()
                try? await running.stop()
                try? await store.close()
                throw error
            }
            feed.stop()
            try await running.stop()
            try await store.close()
        }
    }

    static func remote(_ server: SyncServer, _ running: RunningSyncServer, _ identity: String) async throws -> HTTPRemoteStore {
        let token = try await server.tokens.mint(identity: identity)
        return HTTPRemoteStore(baseURL: running.baseURL, token: { token })
    }

    @Test("the relay listens again after its channel ended: every change channel ends, reconnects and is told to pull")
    func relistenEndsChannels() async throws {
        let channel = BreakableChannel()
        try await Self.withServer(channel) { server, running, _ in
            let bob = try await Self.remote(server, running, "bob")
            let heard = EventLog(bob.changes())
            #expect(await heard.waitFor(.subscribed))
            channel.drop()
            // Before the fix the channel stayed open, deaf to what was lost: no disconnection.
            #expect(await heard.waitFor(.disconnected), "the channel did not end after notices were lost")
            #expect(await heard.waitFor(.subscribed), "the channel did not come back")
            // And it hears changes again (made through another of bob's devices).
            _ = try await Self.remote(server, running, "bob").push([Self.insert("after")])
            #expect(await heard.waitFor(.changed(table: "todos")))
            await heard.stop()
        }
    }

    @Test("a notice that cannot be sent still reaches this instance's channels")
    func failedSendIsDeliveredHere() async throws {
        let channel = BreakableChannel()
        try await Self.withServer(channel) { server, running, _ in
            let alice = try await Self.remote(server, running, "alice")
            let heard = EventLog(alice.changes())
            #expect(await heard.waitFor(.subscribed))
            channel.failSends(true)
            // Through another of alice's devices. Before, the notice was dropped with its send.
            _ = try await Self.remote(server, running, "alice").push([Self.insert("while-down")])
            #expect(await heard.waitFor(.changed(table: "todos")), "the unsent notice did not reach this instance's channel")
            await heard.stop()
        }
    }
}
