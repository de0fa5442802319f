import Foundation
import GRDB
import OfflineSync
import OfflineSyncConformance
import OfflineSyncGRDB
import Testing

/// The shared LocalStore conformance suite, run against the GRDB adapter on a `DatabaseQueue`
/// and on a `DatabasePool`: every table the suite defines becomes a typed table of the
/// database, every `__` table a bookkeeping table beside them.
@Suite("GRDBStore passes the LocalStore conformance suite")
struct ConformanceTests {
    static func file(_ directory: URL) -> URL { directory.appendingPathComponent("app.sqlite") }

    /// As Docs/GRDB.md says an app opens its database: the file checked first, so damage is
    /// a typed error and the file is left as it is (the corrupt-files group).
    static let queueSuite = LocalStoreConformance(capabilities: .init(persistent: true, storeFile: file)) { directory in
        try GRDBStore.checkDatabaseFile(atPath: file(directory).path)
        return try await GRDBStore(try DatabaseQueue(path: file(directory).path))
    }

    static let poolSuite = LocalStoreConformance(capabilities: .init(persistent: true, storeFile: file)) { directory in
        try GRDBStore.checkDatabaseFile(atPath: file(directory).path)
        return try await GRDBStore(try DatabasePool(path: file(directory).path))
    }

    @Test("database queue", arguments: LocalStoreConformance.Group.allCases)
    func queue(group: LocalStoreConformance.Group) async throws {
        try await Self.queueSuite.check(group)
    }

    @Test("database pool", arguments: LocalStoreConformance.Group.allCases)
    func pool(group: LocalStoreConformance.Group) async throws {
        try await Self.poolSuite.check(group)
    }
}
