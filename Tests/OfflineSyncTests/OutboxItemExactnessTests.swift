import Foundation
@testable import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// The queue tells items apart by their ids' bytes, as the stores do: a failed write on one
/// record never holds back another whose id differs only in Unicode normalisation.
@Suite("The outbox compares item ids by bytes")
struct OutboxItemExactnessTests {
    @Test("a failed operation on josé (composed) leaves the operation on josé (decomposed) free to send")
    func failedItemHoldsBackOnlyItself() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), schemas: [])
        let context = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: "user"))
        try await context.defineTable(Harness.notes)
        let composed = "jos\u{E9}", decomposed = "jose\u{301}"
        try await context.table("notes").insert(Record(id: composed, fields: ["title": "composed"]))
        try await context.table("notes").insert(Record(id: decomposed, fields: ["title": "decomposed"]))
        let batch = try await context.observer.write { txn -> [QueuedOperation] in
            let queued = try txn.records(in: SystemTables.operations, matching: .all).map(QueuedOperation.init(row:))
            let first = try #require(queued.first { ExactString.sameBytes($0.itemId, composed) })
            _ = try Outbox.fail(first, status: 400, message: "refused", server: nil, now: .now(), txn)
            return try Outbox.nextBatch(txn, limit: 10)
        }
        #expect(batch.map { Array($0.itemId.utf8) } == [Array(decomposed.utf8)])
    }
}
