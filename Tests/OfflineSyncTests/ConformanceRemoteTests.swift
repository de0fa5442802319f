import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// The RemoteStore groups against the service over the in-memory store, and the sync
/// scenario groups with in-memory clients.
@Suite("Conformance: service over InMemoryStore")
struct InMemoryServiceConformanceTests {
    static let backend: @Sendable (URL) async throws -> ConformanceBackend = { _ in
        let service = try await OfflineSyncService(store: InMemoryStore())
        return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: { try await service.store.close() })
    }
    static let sharedBackend: @Sendable (URL) async throws -> ConformanceBackend = { _ in
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: sharedListsRules(ownerReadsMembers: false))
        return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: { try await service.store.close() })
    }
    let remote = RemoteStoreConformance(makeBackend: backend, makeSharedListsBackend: sharedBackend)
    let scenarios = SyncScenarioConformance(makeLocal: { _ in InMemoryStore() }, makeBackend: backend)

    @Test func pushOutcomes() async throws { try await remote.pushOutcomes() }
    @Test func conflicts() async throws { try await remote.conflicts() }
    @Test func idempotentReplay() async throws { try await remote.idempotentReplay() }
    @Test func cursorPulls() async throws { try await remote.cursorPulls() }
    @Test func concurrentWriters() async throws { try await remote.concurrentWriters() }
    @Test func tombstones() async throws { try await remote.tombstones() }
    @Test func identityIsolation() async throws { try await remote.identityIsolation() }
    @Test func sharedRules() async throws { try await remote.sharedRules() }

    @Test func offlineEdits() async throws { try await scenarios.offlineEdits() }
    @Test func collapse() async throws { try await scenarios.collapse() }
    @Test func conflictPolicies() async throws { try await scenarios.conflictPolicies() }
    @Test func purge() async throws { try await scenarios.purge() }
    @Test func incrementalPull() async throws { try await scenarios.incrementalPull() }
    @Test func implicitPush() async throws { try await scenarios.implicitPush() }
}
