import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncLMDB
import Testing

/// The shared LocalStore conformance suite, run against an LMDB environment directory.
@Suite("LMDBStore passes the LocalStore conformance suite")
struct ConformanceTests {
    static let suite = LocalStoreConformance(
        capabilities: .init(persistent: true, storeFile: { $0.appendingPathComponent("data.mdb") })
    ) { directory in
        try await LMDBStore(directory: directory)
    }

    @Test("environment directory", arguments: LocalStoreConformance.Group.allCases)
    func environment(group: LocalStoreConformance.Group) async throws {
        try await Self.suite.check(group)
    }
}
