import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncPostgreSQL
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// A store on the test server in a schema of its own, derived from the directory.
func makeStore(_ directory: URL, poolSize: Int = 2) async throws -> PostgreSQLStore {
    guard let url = TestServer.require() else { throw SyncError(.unsupported, "no PostgreSQL test server") }
    return try await PostgreSQLStore(connectionString: url,
                                     options: .init(poolSize: poolSize, schema: TestServer.schema(for: directory.path),
                                                    attachmentsDirectory: directory.appendingPathComponent("attachments").path))
}

/// The shared LocalStore conformance suite over PostgreSQLStore.
@Suite("PostgreSQLStore passes the LocalStore conformance suite", .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct ConformanceTests {
    static let suite = LocalStoreConformance(capabilities: .init(persistent: true)) { directory in
        try await makeStore(directory)
    }

    @Test("PostgreSQL store", arguments: LocalStoreConformance.Group.allCases)
    func store(group: LocalStoreConformance.Group) async throws {
        guard TestServer.require() != nil else { return }
        try await Self.suite.check(group)
    }
}

/// The service over a PostgreSQL store.
let postgresBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let store = try await makeStore(directory.appendingPathComponent("service"))
    let service = try await OfflineSyncService(store: store)
    return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: { try await store.close() })
}

/// The service over a PostgreSQL store, under the shared-lists rules.
let postgresSharedBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let store = try await makeStore(directory.appendingPathComponent("service"))
    let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false))
    return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: { try await store.close() })
}

@Suite("Conformance: service over PostgreSQL", .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct PostgreSQLServiceConformanceTests {
    let suite = RemoteStoreConformance(makeBackend: postgresBackend, makeSharedListsBackend: postgresSharedBackend)

    @Test(arguments: RemoteStoreConformance.Group.allCases)
    func group(_ group: RemoteStoreConformance.Group) async throws {
        guard TestServer.require() != nil else { return }
        try await suite.check(group)
    }
}

@Suite("Conformance: sync scenarios, PostgreSQL clients, service over PostgreSQL", .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct PostgreSQLScenarioTests {
    let suite = SyncScenarioConformance(
        makeLocal: { try await makeStore($0.appendingPathComponent("client")) },
        makeBackend: postgresBackend)

    @Test(arguments: SyncScenarioConformance.Group.allCases)
    func group(_ group: SyncScenarioConformance.Group) async throws {
        guard TestServer.require() != nil else { return }
        try await suite.check(group)
    }
}

/// Two service instances over two store objects on one PostgreSQL schema — as several
/// stateless server instances share one database: each remote alternates between them.
let sharedPostgresBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let first = try await makeStore(directory.appendingPathComponent("shared"))
    let second = try await makeStore(directory.appendingPathComponent("shared"))
    let services = [try await OfflineSyncService(store: first), try await OfflineSyncService(store: second)]
    let turn = Counter()
    return ConformanceBackend(remote: { services[turn.next() % 2].remote(for: try Identity($0)) },
                              shutdown: { try await first.close(); try await second.close() })
}

/// Two service instances under the shared-lists rules on one PostgreSQL schema: each remote
/// alternates between them, so a membership written through one moves rows for a pull
/// through the other.
let sharedPostgresRulesBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let first = try await makeStore(directory.appendingPathComponent("shared"))
    let second = try await makeStore(directory.appendingPathComponent("shared"))
    let rules = sharedListsRules(ownerReadsMembers: false)
    let services = [try await OfflineSyncService(store: first, rules: rules), try await OfflineSyncService(store: second, rules: rules)]
    let turn = Counter()
    return ConformanceBackend(remote: { services[turn.next() % 2].remote(for: try Identity($0)) },
                              shutdown: { try await first.close(); try await second.close() })
}

@Suite("Conformance: two service instances sharing one PostgreSQL schema", .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct PostgreSQLSharedServiceTests {
    let suite = RemoteStoreConformance(makeBackend: sharedPostgresBackend, makeSharedListsBackend: sharedPostgresRulesBackend)

    @Test(arguments: [.concurrentWriters, .pushOutcomes, .idempotentReplay, .cursorPulls, .sharedRules] as [RemoteStoreConformance.Group])
    func group(_ group: RemoteStoreConformance.Group) async throws {
        guard TestServer.require() != nil else { return }
        try await suite.check(group)
    }
}
