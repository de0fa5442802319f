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

    @Test("a batch sees its own writes: operations on one row and a repeated id in one push answer as one push each would")
    func batchSeesItsOwnWrites() async throws {
        func op(_ id: String, _ item: String, _ kind: OperationKind, _ title: String? = nil, base: String? = nil) -> PushOperation {
            PushOperation(id: id, table: "t", itemId: item, kind: kind,
                          item: title.map { Record(id: item, fields: ["title": .string($0)]) }, baseVersion: base)
        }
        let operations = [
            op("1", "a", .insert, "one"), op("2", "a", .insert, "again"), op("3", "a", .update, "two"),
            op("1", "a", .insert, "one"), op("4", "a", .delete), op("5", "a", .update, "three"), op("6", "a", .insert, "back"),
            op("7", "b", .update, "nothing"), op("8", "b", .insert, "b"), op("9", "\u{0}", .insert, "bad id"),
        ]
        try await withTemporaryDirectory { directory in
            let together = try await SQLiteStore(path: directory.appendingPathComponent("together.sqlite").path)
            let apart = try await SQLiteStore(path: directory.appendingPathComponent("apart.sqlite").path)
            let batched = try await OfflineSyncService(store: together).push(identity: "u", operations)
            let oneByOne = try await OfflineSyncService(store: apart)
            var single: [PushResult] = []
            for operation in operations { single += try await oneByOne.push(identity: "u", [operation]) }
            func shape(_ result: PushResult) -> String {
                switch result.outcome {
                case .applied(let record): "applied \(record.id) \(record.fields) deleted=\(record.deleted)"
                case .conflict(let record): "conflict \(record.id) \(record.fields) deleted=\(record.deleted)"
                case let .rejected(_, status): "rejected \(status.map(String.init) ?? "-")"
                }
            }
            #expect(batched.map(shape) == single.map(shape))
            #expect(batched.map(shape) == [
                "applied a [\"title\": \"one\"] deleted=false", "conflict a [\"title\": \"one\"] deleted=false",
                "applied a [\"title\": \"two\"] deleted=false", "applied a [\"title\": \"one\"] deleted=false",
                "applied a [\"title\": \"two\"] deleted=true", "conflict a [\"title\": \"two\"] deleted=true",
                "applied a [\"title\": \"back\"] deleted=false", "rejected 404", "applied b [\"title\": \"b\"] deleted=false",
                "rejected 400",
            ])
            // The repeated id got the first attempt's outcome, version and all.
            #expect(batched[3] == PushResult(operationId: "1", outcome: batched[0].outcome))
            try await together.close()
            try await apart.close()
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
