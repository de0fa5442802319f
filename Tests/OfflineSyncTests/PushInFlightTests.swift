import Foundation
@testable import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// The push's in-flight marker (``InFlight``): a batch chosen for sending is attempted through
/// one `__config` row, and the rows say so once the batch is settled, the push fails, or a
/// context opens on a store a killed push left marked.
@Suite("Push in-flight marker")
struct PushInFlightTests {
    /// The `__operations` rows as stored, by item id, and the marker.
    private static func stored(_ store: any LocalStore) async throws -> (rows: [String: QueuedOperation], marker: InFlight) {
        try await store.read { txn in
            let rows = try txn.records(in: SystemTables.operations, matching: .all).map(QueuedOperation.init(row:))
            return (Dictionary(rows.map { ($0.itemId, $0) }, uniquingKeysWith: { first, _ in first }), try InFlight.read(txn))
        }
    }

    @Test("a batch a killed push chose is attempted: writes queue behind it, and opening the store writes its rows")
    func killedPushIsRecoveredAtOpen() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), schemas: [])
        let store = InMemoryStore()
        let first = try await SyncContext(store: store, remote: service.remote(for: "user"))
        try await first.defineTable(Harness.notes)
        // One transaction each: a batch never splits a transaction.
        for id in ["a", "b", "c"] { try await first.table("notes").insert(Record(id: id, fields: ["title": .string(id)])) }
        // What a push does before it sends: choose the batch and mark it, in one transaction.
        // The process is "killed" here: nothing is sent and nothing settles.
        let chosen = try await first.observer.write { txn in
            try Outbox.markAttempted(try Outbox.nextBatch(txn, limit: 2), txn)
        }
        #expect(chosen.map(\.itemId) == ["a", "b"])
        let marked = try await Self.stored(store)
        #expect(marked.marker.ids == Set(chosen.map(\.id)))
        #expect(marked.rows.values.allSatisfy { $0.state == .pending && $0.attempts == 0 }, "rows are not rewritten when chosen")

        // Every reader sees the chosen operations attempted, and a write queues behind one.
        let seen = try await first.queuedOperations()
        #expect(seen.map(\.state) == [.attempted, .attempted, .pending])
        #expect(seen.map(\.attempts) == [1, 1, 0])
        try await first.table("notes").update(Record(id: "a", fields: ["title": "a2"]))
        try await first.table("notes").update(Record(id: "c", fields: ["title": "c2"]))
        let queued = try await first.queuedOperations()
        #expect(queued.map(\.itemId) == ["a", "b", "c", "a"], "the update of a queues behind its chosen insert; c's collapses")
        #expect(queued.first?.item?["title"] == "a", "the chosen insert is not rewritten")

        // A context opened on the store writes the marked rows as attempted and drops the marker.
        let second = try await SyncContext(store: store, remote: service.remote(for: "user"))
        let recovered = try await Self.stored(store)
        #expect(recovered.marker.isEmpty)
        #expect(recovered.rows["b"]?.state == .attempted && recovered.rows["b"]?.attempts == 1)
        #expect(recovered.rows["c"]?.state == .pending && recovered.rows["c"]?.attempts == 0)
        #expect(try await second.queuedOperations().map(\.attempts) == [1, 1, 0, 0])

        let summary = try await second.push()
        #expect(summary.applied == 4)
        #expect(summary.conflictsResolved + summary.failed == 0)
        #expect(try await second.queuedOperationCount() == 0)
        let remote = try await service.remote(for: "user").pull(PullRequest(table: "notes"))
        #expect(Dictionary(uniqueKeysWithValues: remote.records.map { ($0.id, $0["title"]) }) == ["a": "a2", "b": "b", "c": "c2"])
    }

    @Test("a push that fails writes its chosen batches as attempted and leaves no marker")
    func failedPushWritesRows() async throws {
        let h = try await Harness(options: SyncOptions(pushBatchSize: 2))
        for id in ["a", "b", "c", "d", "e"] { try await h.client.table("notes").insert(Record(id: id, fields: ["title": .string(id)])) }
        h.network.set(.down)
        await #expect(throws: SyncError.self) { try await h.client.push() }
        let after = try await Self.stored(h.client.store)
        #expect(after.marker.isEmpty)
        // The batch sent and the one chosen beside it are attempted; the rest were never chosen.
        #expect(["a", "b", "c", "d"].allSatisfy { after.rows[$0]?.state == .attempted && after.rows[$0]?.attempts == 1 })
        #expect(after.rows["e"]?.state == .pending && after.rows["e"]?.attempts == 0)
        h.network.set(.up)
        #expect(try await h.client.push().applied == 5)
        #expect(try await Self.stored(h.client.store).marker.isEmpty)
    }

    @Test("a settled push leaves no marker, and an operation the remote did not answer is written attempted")
    func settledPushLeavesNoMarker() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), schemas: [])
        let remote = DropsLastAnswer(service.remote(for: "user"))
        let client = try await SyncContext(store: InMemoryStore(), remote: remote, options: SyncOptions(pushBatchSize: 2))
        try await client.defineTable(Harness.notes)
        for id in ["a", "b", "c"] { try await client.table("notes").insert(Record(id: id, fields: ["title": .string(id)])) }
        remote.dropping.withLock { $0 = true }
        await #expect(throws: SyncError.self) { try await client.push() }
        let partial = try await Self.stored(client.store)
        #expect(partial.marker.isEmpty)
        #expect(partial.rows["a"] == nil, "the answered operation was settled")
        // b went unanswered (written attempted by the settle), was chosen again for the batch
        // after c's, and that batch's choosing counts once more when the push gives up.
        #expect(partial.rows["b"]?.state == .attempted && partial.rows["b"]?.attempts == 2, "the unanswered one")
        #expect(partial.rows["c"]?.state == .attempted && partial.rows["c"]?.attempts == 1, "the one chosen beside it")

        remote.dropping.withLock { $0 = false }
        #expect(try await client.push().applied == 2)
        let after = try await Self.stored(client.store)
        #expect(after.marker.isEmpty)
        #expect(after.rows.isEmpty)
    }
}

/// The in-process service, answering every push but the last operation of each batch while
/// `dropping` (a remote whose answer lost an entry).
private final class DropsLastAnswer: RemoteStore, Sendable {
    let dropping = Box(false)
    let base: any RemoteStore

    init(_ base: any RemoteStore) { self.base = base }

    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        let results = try await base.push(operations)
        return dropping.value ? Array(results.dropLast()) : results
    }

    func pull(_ request: PullRequest) async throws -> PullPage { try await base.pull(request) }
}
