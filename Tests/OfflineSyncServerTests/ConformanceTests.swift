import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// A live server on a loopback port, over a SQLite file in `directory`, reached through
/// ``HTTPRemoteStore``.
let httpBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let live = try await LiveServer.start(in: directory)
    return ConformanceBackend(remote: { try await live.remote($0) }, shutdown: { try await live.stop() })
}

/// The same under the suite's shared-lists rules document, loaded as `serve --rules` loads one.
let httpSharedBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let live = try await LiveServer.start(in: directory, rules: try SyncRules(yaml: RemoteStoreConformance.sharedListsRules))
    return ConformanceBackend(remote: { try await live.remote($0) }, shutdown: { try await live.stop() })
}

@Suite("Conformance: RemoteStore over HTTP (live server on SQLite)")
struct HTTPRemoteConformanceTests {
    let suite = RemoteStoreConformance(makeBackend: httpBackend, makeSharedListsBackend: httpSharedBackend)

    @Test(arguments: RemoteStoreConformance.Group.allCases)
    func group(_ group: RemoteStoreConformance.Group) async throws { try await suite.check(group) }
}

@Suite("Conformance: sync scenarios, SQLite clients over HTTP")
struct HTTPScenarioTests {
    let suite = SyncScenarioConformance(
        makeLocal: { try await SQLiteStore(path: $0.appendingPathComponent("client.sqlite").path) },
        makeBackend: httpBackend)

    @Test(arguments: SyncScenarioConformance.Group.allCases)
    func group(_ group: SyncScenarioConformance.Group) async throws { try await suite.check(group) }
}
