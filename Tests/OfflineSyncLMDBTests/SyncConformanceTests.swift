import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncLMDB
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// The service over an LMDB environment.
let lmdbBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let store = try await LMDBStore(directory: directory.appendingPathComponent("service-env"))
    let service = try await OfflineSyncService(store: store)
    return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: { try await store.close() })
}

/// The service over an LMDB environment, under the shared-lists rules.
let lmdbSharedBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let store = try await LMDBStore(directory: directory.appendingPathComponent("service-env"))
    let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false))
    return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: { try await store.close() })
}

@Suite("Conformance: service over LMDB")
struct LMDBServiceConformanceTests {
    let suite = RemoteStoreConformance(makeBackend: lmdbBackend, makeSharedListsBackend: lmdbSharedBackend)

    @Test(arguments: RemoteStoreConformance.Group.allCases)
    func group(_ group: RemoteStoreConformance.Group) async throws { try await suite.check(group) }
}

@Suite("Conformance: sync scenarios, LMDB clients, service over LMDB")
struct LMDBScenarioTests {
    let suite = SyncScenarioConformance(
        makeLocal: { try await LMDBStore(directory: $0.appendingPathComponent("client-env")) },
        makeBackend: lmdbBackend)

    @Test(arguments: SyncScenarioConformance.Group.allCases)
    func group(_ group: SyncScenarioConformance.Group) async throws { try await suite.check(group) }
}
