import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `stop()` and cancellation end promptly whatever the network does, and a closed port fails
/// fast with an error that says so. The bounds are generous for a loaded CI machine; what
/// they rule out is the 30 s per attempt (150 s per call) of a remote that waited out its
/// request deadline.
@Suite("Failing fast: stop, cancellation and refused connections")
struct FailFastTests {
    static let notes = TableSchema("notes", fields: [FieldDefinition("title", .string)])

    /// A context on a fresh SQLite store in `directory`, talking to `baseURL`, with one queued insert.
    static func context(_ directory: URL, baseURL: String) async throws -> (SyncContext, SQLiteStore) {
        let token = try await TokenAuthority(secret: testSecret).mint(identity: "alice")
        let remote = HTTPRemoteStore(baseURL: baseURL, token: { token })
        let store = try await SQLiteStore(path: directory.appendingPathComponent("client-\(UUID().uuidString).sqlite").path)
        let context = try await SyncContext(store: store, remote: remote)
        try await context.defineTable(Self.notes)
        _ = try await context.table("notes").insert(Record(id: "queued", fields: ["title": "must not be lost"]))
        return (context, store)
    }

    @Test("sync() against a closed port throws soon, saying the connection was refused; the queue is kept")
    func closedPortFailsFast() async throws {
        try await withTemporaryDirectory { directory in
            let refusing = try RefusingPort(), port = refusing.port
            defer { withExtendedLifetime(refusing) {} }
            let (context, store) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(port)")
            let started = ContinuousClock.now
            do {
                try await context.sync(["notes"])
                Issue.record("a sync against a closed port succeeded")
            } catch let error as SyncError {
                #expect(error.code == .transient)
                #expect(error.message.contains("refused"), "\(error.message)")
            }
            let elapsed = ContinuousClock.now - started
            #expect(elapsed < .seconds(15), "five attempts with 100 ms doubling backoff, not five request deadlines: \(elapsed)")
            #expect(try await context.queuedOperationCount() == 1)
            #expect(context.status.lastError?.kind == .transient)
            try await store.close()
        }
    }

    @Test("a push to a server that never answers: cancelling its task ends it with CancellationError, the operation still queued")
    func cancelledPush() async throws {
        try await withTemporaryDirectory { directory in
            let silent = try SilentServer()
            defer { silent.stop() }
            let (context, store) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(silent.port)")
            let push = Task { try await context.push() }
            #expect(await eventually(timeout: .seconds(30)) { silent.accepted >= 1 }, "the push is in flight")
            push.cancel()
            let result = await push.result
            guard case .failure(let error) = result else { Issue.record("a cancelled push succeeded"); return }
            #expect(error is CancellationError, "\(error)")
            let queued = try await context.queuedOperations()
            #expect(queued.map(\.itemId) == ["queued"])
            // A push waiting behind it for the gate leaves the line just as promptly.
            try await store.close()
        }
    }

    @Test("a pull waiting for the gate behind a hung push is cancelled too")
    func cancelledWhileWaitingForTheGate() async throws {
        try await withTemporaryDirectory { directory in
            let silent = try SilentServer()
            defer { silent.stop() }
            let (context, store) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(silent.port)")
            let push = Task { try await context.push() }
            #expect(await eventually(timeout: .seconds(30)) { silent.accepted >= 1 })
            let pull = Task { try await context.pull("notes") }
            pull.cancel()
            guard case .failure(let error) = await pull.result else { Issue.record("the pull ran"); return }
            #expect(error is CancellationError, "\(error)")
            push.cancel()
            _ = await push.result
            try await store.close()
        }
    }

    /// How long a prompt `stop()` may take: below the shortest timeout a hung stop would wait
    /// for (the channel's 10 s handshake; requests wait 30 s), with room for the whole suite's
    /// load on two cores (5 s was exceeded by 0.2 s under it, with nothing hung).
    static let promptStop: Duration = .seconds(8)

    @Test("stop() returns promptly: a server that never answers, a closed port, a server killed while the socket is open")
    func stopIsPrompt() async throws {
        try await withTemporaryDirectory { directory in
            // A server that accepts and never answers: the change channel's upgrade hangs.
            let silent = try SilentServer()
            let (hung, hungStore) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(silent.port)")
            await hung.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
            #expect(await eventually(timeout: .seconds(30)) { silent.accepted >= 1 })
            var started = ContinuousClock.now
            await hung.stop()
            #expect(ContinuousClock.now - started < Self.promptStop, "hung server: \(ContinuousClock.now - started)")
            #expect(try await hung.queuedOperationCount() == 1)
            silent.stop()
            try await hungStore.close()

            // Nothing listens: the loop is between failed attempts.
            let refusing = try RefusingPort(), port = refusing.port
            defer { withExtendedLifetime(refusing) {} }
            let (closed, closedStore) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(port)")
            let events = closed.events()
            await closed.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
            for await event in events { if case .syncFailed = event { break } }
            started = ContinuousClock.now
            await closed.stop()
            #expect(ContinuousClock.now - started < Self.promptStop, "closed port: \(ContinuousClock.now - started)")
            #expect(try await closed.queuedOperationCount() == 1)
            try await closedStore.close()

            // A real server killed with SIGKILL while the context is idle with its socket open.
            let server = try await ServerProcess.start(data: directory.appendingPathComponent("server"))
            let (idle, idleStore) = try await Self.context(directory, baseURL: server.baseURL)
            let idleEvents = idle.events()
            await idle.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
            for await event in idleEvents { if event == .ready { break } }
            server.signal(SIGKILL)
            _ = try await server.exited()
            started = ContinuousClock.now
            await idle.stop()
            #expect(ContinuousClock.now - started < Self.promptStop, "killed server: \(ContinuousClock.now - started)")
            #expect(try await idle.queuedOperationCount() == 0, "pushed before the kill")
            try await idleStore.close()
        }
    }

    @Test("a started context with a garbage token says so and stops: the change channel's refused upgrade is authenticationFailed, the queue is kept")
    func garbageTokenHalts() async throws {
        try await LiveServer.with { live in
            try await withTemporaryDirectory { directory in
                let calls = Box(0)
                let remote = HTTPRemoteStore(baseURL: live.baseURL, token: { calls.withLock { $0 += 1 }; return "garbage" })
                let store = try await SQLiteStore(path: directory.appendingPathComponent("c.sqlite").path)
                let context = try await SyncContext(store: store, remote: remote)
                try await context.defineTable(Self.notes)
                _ = try await context.table("notes").insert(Record(id: "queued"))
                let events = context.events()
                await context.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
                var failure: (SyncError, Bool)?
                for await event in events {
                    if case .syncFailed(let error, let willRetry) = event { failure = (error, willRetry); break }
                }
                #expect(failure?.0.code == .authenticationFailed)
                #expect(failure?.1 == false)
                #expect(context.status.backgroundSync == .halted)
                #expect(context.status.lastError?.kind == .authentication)
                #expect(context.status.connected, "the server answered: it is not offline")
                #expect(try await context.queuedOperationCount() == 1)
                await context.stop()
                try await store.close()
            }
        }
    }

    @Test("two concurrent starts leave one loop, which stop() ends")
    func concurrentStarts() async throws {
        try await withTemporaryDirectory { directory in
            let refusing = try RefusingPort(), port = refusing.port
            defer { withExtendedLifetime(refusing) {} }
            let (context, store) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(port)")
            let monitor = ManualNetworkMonitor(online: true)
            async let one: Void = context.start(tables: ["notes"], network: monitor)
            async let two: Void = context.start(tables: ["notes"], network: monitor)
            _ = await (one, two)
            await context.stop()
            // Every loop subscribed to the monitor; a leaked one would still listen.
            #expect(await eventually(timeout: .seconds(30)) { monitor.listenerCount == 0 })
            try await store.close()
        }
    }
}
