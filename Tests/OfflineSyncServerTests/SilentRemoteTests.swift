import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A server that accepts and never answers, and a proxy that refuses WebSocket upgrades:
/// `sync()` ends at its deadline, a started context says what is true, and background sync
/// goes on without the change channel.
@Suite("A silent server and a proxy without WebSockets", .timeLimit(.minutes(3)))
struct SilentRemoteTests {
    static let notes = TableSchema("notes", fields: [FieldDefinition("title", .string)])

    /// A context on a fresh SQLite store talking to `baseURL` as alice, with one queued insert.
    static func context(_ directory: URL, baseURL: String, options: SyncOptions,
                        remote configuration: HTTPRemoteStore.Configuration = .init()) async throws -> (SyncContext, SQLiteStore) {
        let token = try await TokenAuthority(secret: testSecret).mint(identity: "alice")
        let remote = HTTPRemoteStore(baseURL: baseURL, configuration: configuration, token: { token })
        let store = try await SQLiteStore(path: directory.appendingPathComponent("client-\(UUID().uuidString).sqlite").path)
        let context = try await SyncContext(store: store, remote: remote, options: options)
        try await context.defineTable(Self.notes)
        _ = try await context.table("notes").insert(Record(id: "queued", fields: ["title": "written before start"]))
        return (context, store)
    }

    @Test("sync() against a server that never answers throws at its progress deadline, not after every attempt's; the queue stays")
    func syncDeadline() async throws {
        try await withTemporaryDirectory { directory in
            let silent = try SilentServer()
            defer { silent.stop() }
            // Before, this took 151 s: five attempts of 30 s each.
            let (context, store) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(silent.port)",
                                                          options: SyncOptions(progressTimeout: .seconds(2)))
            let started = ContinuousClock.now
            do {
                try await context.sync(["notes"])
                Issue.record("a sync against a silent server succeeded")
            } catch let error as SyncError {
                #expect(error.code == .transient)
                #expect(error.message.contains("answered nothing"), "\(error.message)")
            }
            let elapsed = ContinuousClock.now - started
            #expect(elapsed < .seconds(20), "the deadline, not the remote's attempts: \(elapsed)")
            #expect(try await context.queuedOperationCount() == 1)
            #expect(context.status.lastError?.kind == .transient)
            #expect(!context.status.connected && !context.status.uploading && !context.status.downloading)
            try await store.close()
        }
    }

    @Test("a started context against a server that never answers reports it, and does not say connected")
    func startedAgainstSilence() async throws {
        try await withTemporaryDirectory { directory in
            let silent = try SilentServer()
            defer { silent.stop() }
            let (context, store) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(silent.port)",
                                                          options: SyncOptions(progressTimeout: .seconds(2), pollInterval: .seconds(1)),
                                                          remote: .init(channelHandshakeTimeout: .seconds(1)))
            let events = context.events()
            let statuses = Box<[SyncStatus]>([])
            let watching = Task { for await status in context.observeStatus() { statuses.withLock { $0.append(status) } } }
            // Before, nothing was reported for 200 s and more, and the status said connected.
            await context.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
            var failure: SyncError?
            for await event in events {
                if case .syncFailed(let error, let willRetry) = event {
                    #expect(willRetry)
                    failure = error
                    break
                }
            }
            #expect(failure?.code == .transient, "\(String(describing: failure))")
            #expect(context.status.lastError?.kind == .transient)
            #expect(context.status.backgroundSync == .running)
            #expect(!context.status.connected)
            #expect(statuses.value.allSatisfy { !$0.connected }, "never connected: nothing answered")
            await context.stop()
            watching.cancel()
            #expect(try await context.queuedOperationCount() == 1)
            try await store.close()
        }
    }

    @Test("behind a proxy that refuses WebSocket upgrades, a started context pushes what was queued before start and pulls others' changes on its schedule")
    func withoutWebSockets() async throws {
        try await LiveServer.with { live in
            try await withTemporaryDirectory { directory in
                // Forwards POST requests only: the channel's upgrade (a GET) gets a 404.
                let proxy = try await FlakyProxy.start(target: live.baseURL, failures: 0, status: .ok, retryAfter: nil)
                defer { proxy.stop() }
                let (context, store) = try await Self.context(directory, baseURL: "http://127.0.0.1:\(proxy.port)",
                                                              options: SyncOptions(pollInterval: .milliseconds(500)))
                var events = context.events().makeAsyncIterator()
                await context.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
                // Before, a started context never pulled or pushed here: its sync run waited
                // for a channel that could not open.
                let other = try await live.remote("alice")
                #expect(await eventually(timeout: .seconds(60)) {
                    (try? await other.pull(PullRequest(table: "notes", limit: 10)).records.map(\.id)) == ["queued"]
                }, "the write queued before start reached the server")
                _ = try await other.push([PushOperation(id: "from-other", table: "notes", itemId: "other", kind: .insert,
                                                        item: Record(id: "other", fields: ["title": "from another device"]),
                                                        baseVersion: nil)])
                #expect(await eventually(timeout: .seconds(60)) {
                    (try? await context.table("notes").get("other")) != nil
                }, "another device's write arrived by the poll")
                #expect(context.status.connected, "the remote answers, though the channel cannot open")
                #expect(context.status.backgroundSync == .running)
                // The channel's refusals (retried all along) are its state, not failures of the
                // syncs, which work. (Before, each was reported as a failed sync.)
                await context.stop()
                #expect(context.status.lastError == nil, "\(String(describing: context.status.lastError))")
                let failures = try await Self.eventsSoFar(context, &events).compactMap(Self.failure)
                #expect(failures.isEmpty, "\(failures)")
                try await store.close()
            }
        }
    }

    // Against the old lifecycle: the refused channel was reported after the first run, which had
    // succeeded (a `syncFailed` and `lastError` saying the upgrade was refused), and a channel
    // that then opened as an event stream ran the whole sequence a second time.
    @Test("behind a proxy that answers WebSocket upgrades 400, a started context syncs at once, not at the channel's handshake deadline, and reports no failure while its syncs work",
          arguments: [UpgradeRefusingProxy.EventStream.held, .plain, .streamed])
    func refusedUpgradeSyncsAtOnce(_ eventStream: UpgradeRefusingProxy.EventStream) async throws {
        try await LiveServer.with { live in
            try await withTemporaryDirectory { directory in
                let proxy = try await UpgradeRefusingProxy.start(target: live.baseURL, eventStream: eventStream)
                // Every deadline that could start the first sync is far off: the handshake's and
                // the event stream's head (2 minutes), the poll's (10). Only the refused upgrade,
                // reported at once, can. (Before, a held event stream made the context wait for
                // the handshake deadline: 10 s by default, here 120 s.)
                let (context, store) = try await Self.context(directory, baseURL: proxy.url,
                                                              options: SyncOptions(pollInterval: .seconds(600)),
                                                              remote: .init(requestTimeout: .seconds(120), channelHandshakeTimeout: .seconds(120)))
                var events = context.events().makeAsyncIterator()
                var seen: [SyncEvent] = []
                let started = ContinuousClock.now
                await context.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
                var firstSync: Duration?
                var ready = false, subscribed = false, caughtUp = false
                while let event = await events.next() {
                    seen.append(event)
                    switch event {
                    case .syncQueriesStarted:
                        if firstSync == nil { firstSync = ContinuousClock.now - started }
                    case .ready:
                        ready = true
                    case .subscriptionsEstablished:
                        subscribed = true
                    case .modelSynced(let synced) where subscribed && synced.table == "notes":
                        caughtUp = true
                    default:
                        break
                    }
                    // Streamed through, the event stream opens the channel after the first run,
                    // and the context catches up.
                    if ready && (eventStream != .streamed || caughtUp) { break }
                }
                let elapsed = try #require(firstSync)
                #expect(elapsed < .seconds(30), "the first sync began \(elapsed) after start")
                #expect(proxy.refusedUpgrades >= 1)
                #expect(context.status.connected)
                #expect(context.status.backgroundSync == .running)
                // The channel could not open as a WebSocket, and every sync works: nothing failed.
                await context.stop()
                #expect(context.status.lastError == nil, "\(String(describing: context.status.lastError))")
                seen += try await Self.eventsSoFar(context, &events)
                let failures = seen.compactMap(Self.failure)
                #expect(failures.isEmpty, "\(failures)")
                let runs = seen.filter { event in
                    if case .syncQueriesStarted = event { return true }
                    return false
                }.count
                #expect(runs == 1, "one whole run; a channel that opened after it caught up with pulls")
                let other = try await live.remote("alice")
                #expect(try await other.pull(PullRequest(table: "notes", limit: 10)).records.map(\.id) == ["queued"],
                        "the first run pushed what was queued before start")
                try await store.close()
                await proxy.stop()
            }
        }
    }

    /// The events `context` published so far, from `events` on: a write to a table of its own
    /// publishes a marker, and each subscriber gets the events in the order they were published.
    static func eventsSoFar(_ context: SyncContext, _ events: inout SyncEvents.Iterator) async throws -> [SyncEvent] {
        try await context.defineTable(TableSchema("marker"))
        let id = UUID().uuidString
        _ = try await context.table("marker").insert(Record(id: id))
        var seen: [SyncEvent] = []
        while let event = await events.next() {
            if case .outboxMutationEnqueued(let table, let record, _) = event, table == "marker", record.id == id { break }
            seen.append(event)
        }
        return seen
    }

    /// The error of a `syncFailed` event.
    static func failure(_ event: SyncEvent) -> SyncError? {
        if case .syncFailed(let error, _) = event { return error }
        return nil
    }
}
