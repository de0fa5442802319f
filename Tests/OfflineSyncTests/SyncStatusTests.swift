import Foundation
@testable import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A remote whose pushes wait until the test lets them through, so a test can see the
/// context while a push is under way.
final class HeldRemote: RemoteStore, Sendable {
    let base: any RemoteStore
    private let held = Box<[CheckedContinuation<Void, Never>]>([])
    private let holding = Box(true)

    init(_ base: any RemoteStore) { self.base = base }

    /// How many pushes are waiting.
    var waiting: Int { held.value.count }

    /// Lets every waiting push (and every later one) through.
    func release() {
        holding.value = false
        for continuation in held.withLock({ held -> [CheckedContinuation<Void, Never>] in defer { held = [] }; return held }) {
            continuation.resume()
        }
    }

    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        if holding.value {
            await withCheckedContinuation { continuation in
                let wait = held.withLock { held -> Bool in
                    guard holding.value else { return false }
                    held.append(continuation)
                    return true
                }
                if !wait { continuation.resume() }
            }
        }
        return try await base.push(operations)
    }

    func pull(_ request: PullRequest) async throws -> PullPage { try await base.pull(request) }
}

@Suite("Sync status: what the context is doing and how its last attempt went")
struct SyncStatusTests {
    @Test("a new context is offline, idle, never synced and without errors; a sync run records the table's time, connected")
    func firstSync() async throws {
        let h = try await Harness()
        #expect(h.client.status == SyncStatus())
        #expect(!h.client.status.hasSynced)
        try await h.client.sync(["notes"])
        let status = h.client.status
        #expect(status.connected)
        #expect(!status.uploading && !status.downloading)
        #expect(status.hasSynced)
        #expect(status.lastSyncedAt["notes"] != nil)
        #expect(status.lastError == nil)
    }

    @Test("uploading while a push is under way, downloading while a pull is, and back")
    func activity() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let remote = HeldRemote(service.remote(for: "user"))
        let context = try await SyncContext(store: InMemoryStore(), remote: remote)
        try await context.defineTable(Harness.notes)
        _ = try await context.table("notes").insert(Record(id: "a"))
        var statuses = context.observeStatus().makeAsyncIterator()
        #expect(await statuses.next() == SyncStatus(), "the current status first")
        let push = Task { _ = try await context.push() }
        #expect(await statuses.next()?.uploading == true)
        #expect(await eventually(timeout: .seconds(30)) { remote.waiting == 1 })
        remote.release()
        try await push.value
        var last = context.status
        while last.uploading { last = await statuses.next()! }
        #expect(context.status.uploading == false)
        #expect(context.status.connected)
        _ = try await context.pull("notes", queryId: "default")
        #expect(context.status.lastSyncedAt["notes"] != nil)
    }

    @Test("failures are classified: transient, authentication, store; the next success clears the error")
    func classified() async throws {
        let h = try await Harness()
        h.network.set(.down)
        await #expect(throws: SyncError.self) { try await h.client.sync(["notes"]) }
        #expect(h.client.status.lastError?.kind == .transient)
        #expect(h.client.status.connected == false)

        h.network.set(.refusing)
        await #expect(throws: SyncError.self) { try await h.client.pull("notes") }
        #expect(h.client.status.lastError?.kind == .authentication)
        #expect(h.client.status.connected, "a refusal is an answer: the remote is reachable")

        h.network.set(.up)
        try await h.client.sync(["notes"])
        #expect(h.client.status.lastError == nil)
        #expect(SyncFailure.kind(of: SyncError(.storageFailure, "disk full")) == .store)
        #expect(SyncFailure.kind(of: SyncError(.corrupted, "damaged")) == .store)
        #expect(SyncFailure.kind(of: SyncError(.rejected, "400")) == .rejected)
    }

    @Test("the background sync: running, halted on refused credentials with the error, off after stop")
    func background() async throws {
        let h = try await Harness()
        let monitor = ManualNetworkMonitor(online: true)
        h.network.set(.refusing)
        await h.client.start(tables: ["notes"], network: monitor)
        #expect(await eventually(timeout: .seconds(30)) { h.client.status.backgroundSync == .halted })
        let failure = try #require(h.client.status.lastError)
        #expect(failure.kind == .authentication)
        #expect(failure.willRetry == false)
        await h.client.stop()
        #expect(h.client.status.backgroundSync == .off)

        h.network.set(.down)
        await h.client.start(tables: ["notes"], network: monitor)
        #expect(h.client.status.backgroundSync == .running)
        #expect(await eventually(timeout: .seconds(30)) { h.client.status.lastError?.willRetry == true })
        #expect(h.client.status.lastError?.kind == .transient)
        await h.client.stop()
    }

    @Test("a store error halts the background sync instead of spinning")
    func storeErrorHalts() async throws {
        let store = InMemoryStore()
        let service = try await OfflineSyncService(store: InMemoryStore())
        let context = try await SyncContext(store: store, remote: service.remote(for: "user"))
        try await context.defineTable(Harness.notes)
        try await store.close()
        let events = EventRecorder(context)
        await context.start(tables: ["notes"], network: ManualNetworkMonitor(online: true))
        #expect(await events.waitFor("syncFailed(storeClosed, false)"))
        #expect(context.status.backgroundSync == .halted)
        #expect(context.status.lastError?.kind == .store)
        await context.stop()
    }

    @Test("lastSyncedAt is read back from the store by a new context, and goes with a purge")
    func persisted() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let store = InMemoryStore()
        let context = try await SyncContext(store: store, remote: service.remote(for: "user"))
        try await context.defineTable(Harness.notes)
        try await context.sync(["notes"])
        let synced = try #require(context.status.lastSyncedAt["notes"])

        let again = try await SyncContext(store: store, remote: service.remote(for: "user"))
        #expect(again.status.lastSyncedAt["notes"] == synced)
        #expect(again.status.hasSynced)
        try await again.purge("notes")
        #expect(again.status.lastSyncedAt["notes"] == nil)
        #expect(!again.status.hasSynced)
    }
}
