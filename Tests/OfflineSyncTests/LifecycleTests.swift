import Foundation
@testable import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Keeps a context's events (by ``name(_:)``) as they come, for waiting and order checks.
actor EventRecorder {
    private(set) var names: [String] = []
    private var task: Task<Void, Never>?

    init(_ context: SyncContext) {
        let stream = context.events()
        Task { await self.consume(stream) }
    }

    private func consume(_ stream: SyncEvents) {
        task = Task { for await event in stream { self.append(name(event)) } }
    }

    private func append(_ entry: String) { names.append(entry) }

    /// Waits up to `timeout` until `entry` has been seen `count` times.
    func waitFor(_ entry: String, count: Int = 1, timeout: Duration = .seconds(60)) async -> Bool {
        await eventually(timeout: timeout) { names.filter { $0 == entry }.count >= count }
    }

    /// The lifecycle events only (no outbox or progress detail: a pull sends its table's
    /// queued writes first, with their own outbox events), in order; the outbox status that
    /// each `ready` follows is kept.
    var lifecycle: [String] {
        let kept: Set<String> = ["networkStatus(true)", "networkStatus(false)", "subscriptionsEstablished", "syncQueriesStarted(notes)",
                                 "modelSynced(notes)", "syncQueriesReady", "ready"]
        return names.enumerated().filter { index, entry in
            kept.contains(entry) || (entry.hasPrefix("outboxStatus") && names.indices.contains(index + 1) && names[index + 1] == "ready")
        }.map(\.element)
    }

    func clear() { names.removeAll() }

    /// Publishes a marker through the context's own event stream and waits until it arrives.
    /// Each subscriber gets events in publication order, so every event published before the
    /// marker has then been recorded: the signal a test waits on before asserting that
    /// something was *not* reported. The marker is not kept.
    func barrier(_ context: SyncContext) async -> Bool {
        let marker = SyncEvent.pullProgress(table: "__barrier", done: -1, total: -1)
        context.broadcaster.publish(marker)
        let arrived = await waitFor(name(marker))
        names.removeAll { $0 == name(marker) }
        return arrived
    }
}

@Suite("Lifecycle: start, stop, clear and the network monitor")
struct LifecycleTests {
    static let online = ["networkStatus(true)", "subscriptionsEstablished", "syncQueriesStarted(notes)", "modelSynced(notes)",
                         "syncQueriesReady", "outboxStatus(true)", "ready"]

    @Test("online at start: networkStatus → subscriptionsEstablished → syncQueriesStarted → modelSynced → syncQueriesReady → outboxStatus → ready")
    func onlineAtStart() async throws {
        let h = try await Harness()
        let other = try await h.otherDevice()
        _ = try await other.table("notes").insert(Record(id: "remote", fields: ["title": "from the other device"]))
        try await other.push()
        let events = EventRecorder(h.client)
        await h.client.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
        #expect(await events.waitFor("ready"))
        #expect(await events.lifecycle == Self.online)
        #expect(try await h.client.table("notes").get("remote") != nil)
        await h.client.stop()
    }

    @Test("a local write while started is pushed without a call to push(); a failed push is retried with backoff")
    func localWritesArePushed() async throws {
        let h = try await Harness()
        let events = EventRecorder(h.client)
        await h.client.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
        #expect(await events.waitFor("ready"))
        _ = try await h.client.table("notes").insert(Record(id: "w1", fields: ["title": "written online"]))
        #expect(await events.waitFor("processed(insert)"))
        let other = try await h.otherDevice()
        try await other.pull("notes")
        #expect(try await other.table("notes").get("w1") != nil, "the write reached the server")
        // The server fails for a while: the loop reports it and pushes once it answers again.
        h.network.set(.down)
        _ = try await h.client.table("notes").insert(Record(id: "w2", fields: ["title": "written during an outage"]))
        #expect(await events.waitFor("syncFailed(transient, true)"))
        h.network.set(.up)
        #expect(await events.waitFor("processed(insert)", count: 2))
        #expect(try await h.client.queuedOperationCount() == 0)
        await h.client.stop()
    }

    @Test("offline at start: networkStatus(false) only, local work goes on, and the sequence runs when the network returns")
    func offlineThenOnline() async throws {
        let h = try await Harness()
        h.network.set(.down)
        let monitor = ManualNetworkMonitor(online: false)
        let events = EventRecorder(h.client)
        await h.client.start(tables: ["notes"], network: monitor)
        #expect(await events.waitFor("networkStatus(false)"))
        _ = try await h.client.table("notes").insert(Record(id: "offline", fields: ["title": "written offline"]))
        #expect(try await h.client.table("notes").get("offline")?["title"] == "written offline")
        #expect(await events.waitFor("enqueued(insert)"))
        #expect(await events.barrier(h.client))
        #expect(await events.lifecycle == ["networkStatus(false)"], "nothing but local work while offline")
        #expect(h.network.pushCount == 0)

        h.network.set(.up)
        monitor.set(online: true)
        #expect(await events.waitFor("ready"))
        let seen = await events.lifecycle
        #expect(seen == ["networkStatus(false)"] + Self.online, "\(seen)")
        #expect(try await h.service.record(identity: "user", table: "notes", id: "offline") != nil, "the offline write reached the server")

        // Another outage and return: the whole sequence again.
        await events.clear()
        monitor.set(online: false)
        #expect(await events.waitFor("networkStatus(false)"))
        monitor.set(online: true)
        #expect(await events.waitFor("ready"))
        #expect(await events.lifecycle == ["networkStatus(false)"] + Self.online)

        // Stopped, it reacts to nothing.
        await h.client.stop()
        await events.clear()
        monitor.set(online: false)
        monitor.set(online: true)
        #expect(await events.barrier(h.client))
        #expect(await events.lifecycle.isEmpty)
    }

    @Test("a failing run reports syncFailed(willRetry: true); refused credentials report willRetry: false and end the loop, queue kept, until start")
    func failuresAreReported() async throws {
        let h = try await Harness()
        _ = try await h.client.table("notes").insert(Record(id: "queued", fields: ["title": "waits"]))
        let monitor = ManualNetworkMonitor(online: true)
        let events = EventRecorder(h.client)

        // A server that answers 5xx (here: a transient failure) is retried, and says so.
        h.network.set(.down)
        await h.client.start(tables: ["notes"], network: monitor)
        #expect(await events.waitFor("syncFailed(transient, true)"))
        await h.client.stop()

        // Refused credentials: one report, and the loop stops listening to the network.
        await events.clear()
        h.network.set(.refusing)
        await h.client.start(tables: ["notes"], network: monitor)
        #expect(await events.waitFor("syncFailed(authenticationFailed, false)"))
        #expect(await eventually { monitor.listenerCount == 0 }, "no longer listening: nothing will retry")
        monitor.set(online: false)
        monitor.set(online: true)
        #expect(await events.barrier(h.client))
        #expect(await events.names.filter { $0.hasPrefix("syncFailed") } == ["syncFailed(authenticationFailed, false)"])
        #expect(try await h.client.queuedOperationCount() == 1, "the queue is kept")

        // Started again with credentials that work, it syncs.
        h.network.set(.up)
        await h.client.start(tables: ["notes"], network: monitor)
        #expect(await events.waitFor("ready"))
        #expect(try await h.client.queuedOperationCount() == 0)
        await h.client.stop()
    }

    @Test("clear() stops syncing and removes local records, queue and cursors; start() then syncs from scratch")
    func clearAndRestart() async throws {
        let h = try await Harness()
        let other = try await h.otherDevice()
        _ = try await other.table("notes").insert(Record(id: "kept", fields: ["title": "on the server"]))
        try await other.push()
        let monitor = ManualNetworkMonitor(online: true)
        let events = EventRecorder(h.client)
        await h.client.start(tables: ["notes"], network: monitor)
        #expect(await events.waitFor("ready"))
        h.network.set(.down)
        _ = try await h.client.table("notes").insert(Record(id: "queued", fields: ["title": "never sent"]))
        try await h.client.clear()
        #expect(try await h.client.table("notes").query().isEmpty)
        #expect(try await h.client.queuedOperationCount() == 0)
        #expect(try await h.client.cursor(table: "notes", queryId: "default") == nil)

        h.network.set(.up)
        await events.clear()
        await h.client.start(tables: ["notes"], network: monitor)
        #expect(await events.waitFor("ready"))
        #expect(try await h.client.table("notes").query().map(\.id) == ["kept"], "a full sync brought the server's data back")
        await h.client.stop()
    }

    @Test("the probing monitor reports the first status, then changes only, with backoff while down")
    func probingMonitor() async throws {
        let reachable = ManualNetworkMonitor(online: false)   // stands for the server's state
        let monitor = ProbingNetworkMonitor(interval: .milliseconds(20), initialBackoff: .milliseconds(5),
                                            maxBackoff: .milliseconds(40)) { reachable.isOnline }
        var statuses = monitor.statuses().makeAsyncIterator()
        #expect(await statuses.next() == false)
        reachable.set(online: true)
        #expect(await statuses.next() == true)
        reachable.set(online: false)
        #expect(await statuses.next() == false)
        reachable.set(online: true)
        #expect(await statuses.next() == true)
    }

    @Test("synchronizeOnConnectivity waits while offline, keeps only the latest request, and runs its callbacks once")
    func synchronizeOnConnectivity() async throws {
        let service = try await DatasetService(store: InMemoryStore())
        let pool = "us-east-1:00000000-0000-0000-0000-0000000000dd", identity = "us-east-1:aaaa"
        let monitor = ManualNetworkMonitor(online: false)
        let datasets = try await DatasetManager(store: InMemoryStore(), identity: identity,
                                                remote: service.remote(pool: pool, identity: identity), network: monitor)
        let dataset = try await datasets.openOrCreateDataset("later")
        try await dataset.put("k", "v")
        let log = CallbackLog()
        dataset.synchronizeOnConnectivity(DatasetSyncCallbacks(onSuccess: { _, _ in log.add("first") },
                                                               onFailure: { _, _ in log.add("first failed") }))
        try await dataset.put("k2", "v2")
        dataset.synchronizeOnConnectivity(DatasetSyncCallbacks(onSuccess: { _, _ in log.add("second") },
                                                               onFailure: { _, _ in log.add("second failed") }))
        // The signal: the deferred run is parked on the monitor, waiting for it to report online.
        #expect(await eventually { monitor.listenerCount > 0 })
        #expect(log.all.isEmpty)
        await #expect(throws: SyncError.self) {
            _ = try await service.describeDataset(pool: pool, identity: identity, name: "later")
        }
        monitor.set(online: true)
        let deadline = ContinuousClock.now + .seconds(10)
        while log.all.isEmpty && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(log.all == ["second"])   // and "first" never comes: the check after "third" below
        #expect(try await service.describeDataset(pool: pool, identity: identity, name: "later").numRecords == 2)
        // Online, it runs at once.
        try await dataset.put("k3", "v3")
        dataset.synchronizeOnConnectivity(DatasetSyncCallbacks(onSuccess: { _, _ in log.add("third") }))
        let later = ContinuousClock.now + .seconds(10)
        while log.all.count < 2 && ContinuousClock.now < later { try await Task.sleep(for: .milliseconds(10)) }
        #expect(log.all == ["second", "third"])
    }
}
