import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncSQLite
import Testing

/// A live server on a loopback port, over a SQLite file in `directory`, reached through
/// ``HTTPRemoteStore``.
let httpBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let live = try await LiveServer.start(in: directory)
    return ConformanceBackend(remote: { try await live.remote($0) }, shutdown: { try await live.stop() })
}

@Suite("Conformance: RemoteStore over HTTP (live server on SQLite)")
struct HTTPRemoteConformanceTests {
    let suite = RemoteStoreConformance(makeBackend: httpBackend)

    @Test func pushOutcomes() async throws { try await suite.pushOutcomes() }
    @Test func conflicts() async throws { try await suite.conflicts() }
    @Test func idempotentReplay() async throws { try await suite.idempotentReplay() }
    @Test func cursorPulls() async throws { try await suite.cursorPulls() }
    @Test func concurrentWriters() async throws { try await suite.concurrentWriters() }
    @Test func tombstones() async throws { try await suite.tombstones() }
    @Test func identityIsolation() async throws { try await suite.identityIsolation() }
}

@Suite("Conformance: sync scenarios, SQLite clients over HTTP")
struct HTTPScenarioTests {
    let suite = SyncScenarioConformance(
        makeLocal: { try await SQLiteStore(path: $0.appendingPathComponent("client.sqlite").path) },
        makeBackend: httpBackend)

    @Test func offlineEdits() async throws { try await suite.offlineEdits() }
    @Test func collapse() async throws { try await suite.collapse() }
    @Test func conflictPolicies() async throws { try await suite.conflictPolicies() }
    @Test func purge() async throws { try await suite.purge() }
    @Test func incrementalPull() async throws { try await suite.incrementalPull() }
    @Test func implicitPush() async throws { try await suite.implicitPush() }
}
