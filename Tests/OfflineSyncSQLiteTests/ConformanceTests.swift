import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncSQLite
import Testing

/// The shared LocalStore conformance suite, run against a file store and an in-memory store.
@Suite("SQLiteStore passes the LocalStore conformance suite")
struct ConformanceTests {
    static let fileSuite = LocalStoreConformance(
        capabilities: .init(persistent: true, storeFile: { $0.appendingPathComponent("store.sqlite") })
    ) { directory in
        try await SQLiteStore(path: directory.appendingPathComponent("store.sqlite").path)
    }

    static let memorySuite = LocalStoreConformance(capabilities: .init(persistent: false)) { _ in
        try await SQLiteStore.inMemory()
    }

    @Test("file store", arguments: LocalStoreConformance.Group.allCases)
    func fileStore(group: LocalStoreConformance.Group) async throws {
        try await Self.fileSuite.check(group)
    }

    @Test("in-memory store", arguments: LocalStoreConformance.Group.allCases)
    func inMemoryStore(group: LocalStoreConformance.Group) async throws {
        try await Self.memorySuite.check(group)
    }
}
