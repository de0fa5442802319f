import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncLMDB
import OfflineSyncService
import Testing

/// The service over an LMDB environment.
let lmdbBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let store = try await LMDBStore(directory: directory.appendingPathComponent("service-env"))
    let service = try await OfflineSyncService(store: store)
    return ConformanceBackend(remote: { service.remote(for: $0) }, shutdown: { try await store.close() })
}

@Suite("Conformance: service over LMDB")
struct LMDBServiceConformanceTests {
    let suite = RemoteStoreConformance(makeBackend: lmdbBackend)

    @Test func pushOutcomes() async throws { try await suite.pushOutcomes() }
    @Test func conflicts() async throws { try await suite.conflicts() }
    @Test func idempotentReplay() async throws { try await suite.idempotentReplay() }
    @Test func cursorPulls() async throws { try await suite.cursorPulls() }
    @Test func concurrentWriters() async throws { try await suite.concurrentWriters() }
    @Test func tombstones() async throws { try await suite.tombstones() }
    @Test func identityIsolation() async throws { try await suite.identityIsolation() }
}

@Suite("Conformance: sync scenarios, LMDB clients, service over LMDB")
struct LMDBScenarioTests {
    let suite = SyncScenarioConformance(
        makeLocal: { try await LMDBStore(directory: $0.appendingPathComponent("client-env")) },
        makeBackend: lmdbBackend)

    @Test func offlineEdits() async throws { try await suite.offlineEdits() }
    @Test func collapse() async throws { try await suite.collapse() }
    @Test func conflictPolicies() async throws { try await suite.conflictPolicies() }
    @Test func purge() async throws { try await suite.purge() }
    @Test func incrementalPull() async throws { try await suite.incrementalPull() }
    @Test func implicitPush() async throws { try await suite.implicitPush() }
}
