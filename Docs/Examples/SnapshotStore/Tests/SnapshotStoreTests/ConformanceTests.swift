import Foundation
import OfflineSync
import OfflineSyncConformance
import SnapshotStore
import Testing

/// The shared LocalStore conformance suite, every group, against the snapshot store: once
/// built by hand and once through a store URL, as `offline-sync conformance` would run it.
@Suite("SnapshotStore passes the LocalStore conformance suite")
struct ConformanceTests {
    static let suite = LocalStoreConformance(
        capabilities: .init(persistent: true, storeFile: { $0.appendingPathComponent("app.snapshot") })
    ) { directory in
        try await SnapshotStore(path: directory.appendingPathComponent("app.snapshot").path)
    }

    @Test("every group", arguments: LocalStoreConformance.Group.allCases)
    func group(_ group: LocalStoreConformance.Group) async throws {
        try await Self.suite.check(group)
    }

    @Test("every group, through the registry", arguments: LocalStoreConformance.Group.allCases)
    func registeredGroup(_ group: LocalStoreConformance.Group) async throws {
        var registry = StoreRegistry()
        registry.register(.snapshot)
        let suite = try LocalStoreConformance(store: "snapshot:///anywhere/app.snapshot", in: registry)
        #expect(suite.capabilities.persistent)
        try await suite.check(group)
    }
}
