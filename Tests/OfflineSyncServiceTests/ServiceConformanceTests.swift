import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncSQLite
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A service over a SQLite file in `directory`.
let sqliteBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let store = try await SQLiteStore(path: directory.appendingPathComponent("service.sqlite").path)
    let service = try await OfflineSyncService(store: store)
    return ConformanceBackend(remote: { service.remote(for: $0) }, shutdown: { try await store.close() })
}

/// A service over a SQLite file in `directory`, under the shared-lists rules.
let sqliteSharedBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let store = try await SQLiteStore(path: directory.appendingPathComponent("service.sqlite").path)
    let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false))
    return ConformanceBackend(remote: { service.remote(for: $0) }, shutdown: { try await store.close() })
}

@Suite("Conformance: service over SQLite (file)")
struct SQLiteServiceConformanceTests {
    let suite = RemoteStoreConformance(makeBackend: sqliteBackend, makeSharedListsBackend: sqliteSharedBackend)

    @Test(arguments: RemoteStoreConformance.Group.allCases)
    func group(_ group: RemoteStoreConformance.Group) async throws { try await suite.check(group) }
}

@Suite("Conformance: sync scenarios, SQLite file clients, service over SQLite")
struct SQLiteFileScenarioTests {
    let suite = SyncScenarioConformance(
        makeLocal: { try await SQLiteStore(path: $0.appendingPathComponent("client.sqlite").path) },
        makeBackend: sqliteBackend)

    @Test(arguments: SyncScenarioConformance.Group.allCases)
    func group(_ group: SyncScenarioConformance.Group) async throws { try await suite.check(group) }
}

@Suite("Conformance: sync scenarios, SQLite in-memory clients")
struct SQLiteMemoryScenarioTests {
    let suite = SyncScenarioConformance(makeLocal: { _ in try await SQLiteStore.inMemory() }, makeBackend: sqliteBackend)

    @Test(arguments: SyncScenarioConformance.Group.allCases)
    func group(_ group: SyncScenarioConformance.Group) async throws { try await suite.check(group) }
}

@Suite("OfflineSyncService")
struct ServiceTests {
    @Test("stored outcomes can be pruned; a pruned operation id is applied as new")
    func pruneOutcomes() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let insert = PushOperation(id: "op-1", table: "t", itemId: "a", kind: .insert, item: Record(id: "a"), baseVersion: nil)
        _ = try await service.push(identity: "u", [insert])
        #expect(try await service.pruneOperationOutcomes(olderThan: Timestamp(millisecondsSince1970: 0)) == 0)
        let future = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 60_000)
        #expect(try await service.pruneOperationOutcomes(olderThan: future) == 1)
        let replay = try await service.push(identity: "u", [insert])
        guard case .conflict = replay[0].outcome else {
            Issue.record("a replay after pruning is a new insert of an existing id: \(replay[0].outcome)"); return
        }
    }

    @Test("bad identities and unserved tables are refused")
    func refusals() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), schemas: [TableSchema("only")],
                                                   allowUndeclaredTables: false)
        await #expect(throws: SyncError.self) {
            try await service.pull(identity: "", PullRequest(table: "only"))
        }
        let results = try await service.push(identity: "u", [
            PushOperation(id: "x", table: "other", itemId: "a", kind: .insert, item: Record(id: "a"), baseVersion: nil),
            PushOperation(id: "y", table: "only", itemId: "a", kind: .insert,
                          item: Record(id: "a", fields: ["__owner": "someone"]), baseVersion: nil),
            PushOperation(id: "z", table: "only", itemId: "b", kind: .insert, item: Record(id: "b"), baseVersion: nil),
        ])
        guard case .rejected(_, let status) = results[0].outcome else { Issue.record("unserved table accepted"); return }
        #expect(status == 404)
        guard case .rejected = results[1].outcome else { Issue.record("a reserved field name was accepted"); return }
        guard case .applied = results[2].outcome else { Issue.record("a valid insert was not applied"); return }
    }
}
