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
    return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: { try await store.close() })
}

/// A service over a SQLite file in `directory`, under the shared-lists rules.
let sqliteSharedBackend: @Sendable (URL) async throws -> ConformanceBackend = { directory in
    let store = try await SQLiteStore(path: directory.appendingPathComponent("service.sqlite").path)
    let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false))
    return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: { try await store.close() })
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
    @Test("an applied operation's outcome is its row while the row holds it; taken over, it is stored, can be pruned, and a pruned id is applied as new")
    func pruneOutcomes() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let future = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 60_000)
        let insert = PushOperation(id: "op-1", table: "t", itemId: "a", kind: .insert, item: Record(id: "a", fields: ["n": 1]), baseVersion: nil)
        let first = try await service.push(identity: "u", [insert])
        // The row holds the insert's outcome: nothing to prune, and a replay gets the first answer.
        #expect(try await service.pruneOperationOutcomes(olderThan: future) == 0)
        #expect(try await service.push(identity: "u", [insert]) == first)
        // Another identity's operation with the same id is its own.
        guard case .applied = try await service.push(identity: "v", [insert])[0].outcome else {
            Issue.record("the same operation id under another identity is another operation"); return
        }
        // An update takes the row over: the insert's outcome is stored, so a replay still gets it.
        let update = PushOperation(id: "op-2", table: "t", itemId: "a", kind: .update, item: Record(id: "a", fields: ["n": 2]), baseVersion: nil)
        let second = try await service.push(identity: "u", [update])
        #expect(try await service.push(identity: "u", [insert]) == first)
        #expect(try await service.push(identity: "u", [update, insert]) == second + first)
        #expect(try await service.pruneOperationOutcomes(olderThan: Timestamp(millisecondsSince1970: 0)) == 0)
        #expect(try await service.pruneOperationOutcomes(olderThan: future) == 1)
        // Pruned, the insert's id is a new insert of an existing id; the update still answers from its row.
        let replay = try await service.push(identity: "u", [insert])
        guard case .conflict = replay[0].outcome else {
            Issue.record("a replay after pruning is a new insert of an existing id: \(replay[0].outcome)"); return
        }
        #expect(try await service.push(identity: "u", [update]) == second)
    }

    @Test("a batch that takes a row over and then replays the operation that held it answers that operation's first outcome")
    func takeOverThenReplayInOneBatch() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let insert = PushOperation(id: "op-1", table: "t", itemId: "a", kind: .insert, item: Record(id: "a", fields: ["n": 1]), baseVersion: nil)
        let first = try await service.push(identity: "u", [insert])
        let update = PushOperation(id: "op-2", table: "t", itemId: "a", kind: .update, item: Record(id: "a", fields: ["n": 2]), baseVersion: nil)
        let both = try await service.push(identity: "u", [update, insert])
        #expect(both[1] == first[0], "the insert is answered as first applied, not applied again")
        guard case .applied(let record) = both[0].outcome else { Issue.record("\(both)"); return }
        #expect(record.fields == ["n": 2])
        let rows = try await service.query(identity: "u", table: "t")
        #expect(rows.map(\.fields) == [["n": 2]], "one row, the update's")
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
            try await service.pull(identity: Identity(String()), PullRequest(table: "only"))
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
