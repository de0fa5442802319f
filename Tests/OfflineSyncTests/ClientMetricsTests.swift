import Foundation
import MetricsTestKit
@testable import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A context reports its pushes, pulls, queue and failures through swift-metrics, to the
/// factory its options name (swift-metrics' own test backend here).
@Suite("Client metrics through swift-metrics")
struct ClientMetricsTests {
    @Test("Docs/GettingStarted.md lists the metrics a context reports")
    func documented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
        let text = try String(contentsOf: root.appendingPathComponent("Docs/GettingStarted.md"), encoding: .utf8)
        let listed = text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `offline_sync_client_") else { return nil }
            return line.dropFirst(3).split(separator: "`").first.map(String.init)
        }
        #expect(listed == SyncMetrics.names)
    }

    @Test("a push, a pull and a failed push each move their metrics")
    func pushPullAndFailure() async throws {
        let metrics = TestMetrics()
        let service = try await OfflineSyncService(store: InMemoryStore(), schemas: [])
        let network = FaultyNetwork(service.remote(for: "user"))
        let context = try await SyncContext(store: InMemoryStore(), remote: network, options: SyncOptions(metricsFactory: metrics))
        try await context.defineTable(Harness.notes)
        for id in ["a", "b", "c"] { try await context.table("notes").insert(Record(id: id, fields: ["title": .string(id)])) }

        try await context.push()
        #expect(try metrics.expectTimer(SyncMetrics.pushDuration).values.count == 1)
        #expect(try metrics.expectTimer(SyncMetrics.pushDuration).values.allSatisfy { $0 > 0 })
        #expect(try metrics.expectCounter(SyncMetrics.pushOperations, [("outcome", "applied")]).totalValue == 3)
        #expect(try metrics.expectGauge(SyncMetrics.queueDepth).values == [3, 0])

        // Another device's rows arrive by pull.
        let other = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: "user"))
        try await other.defineTable(Harness.notes)
        try await other.table("notes").insert(Record(id: "d", fields: ["title": "d"]))
        try await other.push()
        try await context.pull("notes")
        #expect(try metrics.expectTimer(SyncMetrics.pullDuration, [("table", "notes")]).values.count == 1)
        #expect(try metrics.expectCounter(SyncMetrics.pulledRecords, [("table", "notes")]).totalValue == 4)

        network.set(.refusing)
        await #expect(throws: SyncError.self) { try await context.pull("notes") }
        #expect(try metrics.expectCounter(SyncMetrics.failures, [("call", "pull"), ("kind", "authentication")]).totalValue == 1)
        network.set(.down)
        try await context.table("notes").insert(Record(id: "e", fields: ["title": "e"]))
        await #expect(throws: SyncError.self) { try await context.push() }
        #expect(try metrics.expectCounter(SyncMetrics.failures, [("call", "push"), ("kind", "transient")]).totalValue == 1)
        #expect(try metrics.expectTimer(SyncMetrics.pushDuration).values.count == 1, "a failed push is a failure, not a duration")
    }
}
