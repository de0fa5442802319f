import Foundation
@testable import OfflineSync
import OfflineSyncConformance
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// The queue's batches beside a batch in flight: the batch in flight is left out by runs of
/// its sequence numbers where it can be, and that must choose exactly what leaving it out by
/// id chooses.
@Suite("Outbox batches beside a batch in flight")
struct OutboxBatchTests {
    /// A queue of `count` operations on random items of one table, with gaps in the sequence
    /// numbers, transactions of one to three operations, and some failed (blocking their items).
    static func queue(_ store: any LocalStore, count: Int, _ generator: inout SplitMix64) async throws {
        var operations: [QueuedOperation] = []
        var sequence: Int64 = 0
        var transaction = 0
        for i in 0..<count {
            sequence += 1 + (generator.below(4) == 0 ? Int64(generator.below(3)) : 0)
            if generator.below(3) != 0 { transaction += 1 }
            let item = "i\(generator.below(count / 2))"
            var operation = QueuedOperation(id: "op\(i)", sequence: sequence, table: "notes", itemId: item, kind: .update,
                                            item: Record(id: item, fields: ["n": .int(Int64(i))]), baseVersion: "v1",
                                            transaction: "t\(transaction)", changedFields: ["n"], now: .now())
            if generator.below(12) == 0 { operation.state = .failed }
            operations.append(operation)
        }
        let queued = operations
        try await store.write { txn in for operation in queued { try Outbox.save(operation, txn) } }
    }

    @Test("the next batch and the items queued besides a batch are the same by sequence runs as by ids", arguments: ["memory", "sqlite"])
    func runsMatchIds(storeKind: String) async throws {
        try await withTemporaryDirectory { directory in
            for seed in 0..<30 {
                var generator = SplitMix64(seed: UInt64(seed) + 20_261_127)
                let store: any LocalStore = storeKind == "memory"
                    ? InMemoryStore() : try await SQLiteStore(path: directory.appendingPathComponent("q\(seed).sqlite").path)
                let service = try await OfflineSyncService(store: InMemoryStore(), schemas: [])
                _ = try await SyncContext(store: store, remote: service.remote(for: "user"))
                try await Self.queue(store, count: 40 + generator.below(80), &generator)
                let limit = 1 + generator.below(15)
                let (inFlight, choices, besides) = try await store.read { txn in
                    let inFlight = try Outbox.nextBatch(txn, limit: limit)
                    // By runs (as many as it needs), by ids, and by ids once past two runs.
                    let choices = try [Int.max, 0, 2].map { try Outbox.nextBatch(txn, limit: limit, excluding: inFlight, maxRuns: $0) }
                    let besides = try [Int.max, 0, 2].map { try Outbox.itemsQueuedBesides(inFlight, txn, maxRuns: $0) }
                    return (inFlight, choices, besides)
                }
                #expect(!inFlight.isEmpty, "seed \(seed)")
                #expect(choices[0] == choices[1] && choices[2] == choices[1], "seed \(seed): \(choices.map { $0.map(\.id) })")
                #expect(besides[0] == besides[1] && besides[2] == besides[1], "seed \(seed)")
                #expect(Set(choices[1].map(\.id)).isDisjoint(with: inFlight.map(\.id)), "seed \(seed)")
                try await store.close()
            }
        }
    }

    @Test("sequence runs are the maximal ranges of consecutive numbers, in order")
    func runs() {
        func operations(_ sequences: [Int64]) -> [QueuedOperation] {
            sequences.map { QueuedOperation(id: "op\($0)", sequence: $0, table: "t", itemId: "i\($0)", kind: .insert, item: nil,
                                            baseVersion: nil, transaction: "t", changedFields: [], now: .now()) }
        }
        #expect(Outbox.sequenceRuns(operations([])) == [])
        #expect(Outbox.sequenceRuns(operations([5, 3, 4, 9, 11, 10, 1])) == [1...1, 3...5, 9...11])
        #expect(Outbox.sequenceRuns(operations([7])) == [7...7])
    }
}
