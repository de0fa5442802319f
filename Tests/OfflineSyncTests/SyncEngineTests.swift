import Foundation
@testable import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A remote that forwards to the real in-process service, but can be told to fail the way a
/// network does: unreachable before sending, or the answer lost after the service applied it.
final class FaultyNetwork: RemoteStore, Sendable {
    enum Mode { case up, down, loseResponses, refusing }
    private let state = Box<(mode: Mode, pushes: Int)>((.up, 0))
    let base: any RemoteStore

    init(_ base: any RemoteStore) { self.base = base }

    func set(_ mode: Mode) { state.withLock { $0.mode = mode } }
    var pushCount: Int { state.value.pushes }

    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        let mode = state.withLock { $0.pushes += 1; return $0.mode }
        switch mode {
        case .down: throw SyncError(.transient, "network unreachable")
        case .refusing: throw SyncError(.authenticationFailed, "missing or invalid credentials")
        case .loseResponses:
            _ = try await base.push(operations)
            throw SyncError(.transient, "connection reset before the response arrived")
        case .up: return try await base.push(operations)
        }
    }

    func pull(_ request: PullRequest) async throws -> PullPage {
        switch state.value.mode {
        case .down: throw SyncError(.transient, "network unreachable")
        case .refusing: throw SyncError(.authenticationFailed, "missing or invalid credentials")
        case .up, .loseResponses: return try await base.pull(request)
        }
    }
}

struct Harness {
    let service: OfflineSyncService
    let network: FaultyNetwork
    let client: SyncContext

    static let notes = TableSchema("notes", fields: [FieldDefinition("title", .string), FieldDefinition("n", .int)])

    init(serverSchemas: [TableSchema] = [], options: SyncOptions = SyncOptions()) async throws {
        service = try await OfflineSyncService(store: InMemoryStore(), schemas: serverSchemas)
        network = FaultyNetwork(service.remote(for: "user"))
        client = try await SyncContext(store: InMemoryStore(), remote: network, options: options)
        try await client.defineTable(Harness.notes)
    }

    /// A second device of the same user, straight on the service.
    func otherDevice() async throws -> SyncContext {
        let other = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: "user"))
        try await other.defineTable(Harness.notes)
        return other
    }
}

/// Everything a context emitted while `body` ran.
func recordEvents(_ context: SyncContext, _ body: () async throws -> Void) async rethrows -> [SyncEvent] {
    let stream = context.events()
    try await body()
    context.broadcaster.finish()
    var events: [SyncEvent] = []
    for await event in stream { events.append(event) }
    return events
}

/// A short name per event, for comparing sequences.
func name(_ event: SyncEvent) -> String {
    switch event {
    case .networkStatus(let active): return "networkStatus(\(active))"
    case .subscriptionsEstablished: return "subscriptionsEstablished"
    case .syncQueriesStarted(let tables): return "syncQueriesStarted(\(tables.joined(separator: ",")))"
    case .modelSynced(let info): return "modelSynced(\(info.table))"
    case .syncQueriesReady: return "syncQueriesReady"
    case .ready: return "ready"
    case .outboxMutationEnqueued(_, _, let kind): return "enqueued(\(kind.rawValue))"
    case .outboxMutationProcessed(_, _, let kind): return "processed(\(kind.rawValue))"
    case .outboxMutationFailed(_, _, let kind, _): return "failed(\(kind.rawValue))"
    case .outboxStatus(let isEmpty): return "outboxStatus(\(isEmpty))"
    case .pushProgress(let done, let total): return "pushProgress(\(done)/\(total))"
    case .pullProgress(_, let done, let total): return "pullProgress(\(done)/\(total))"
    case .conflictResolved(_, _, let resolution): return "conflictResolved(\(resolution.name))"
    case .removedFromView(let table, let ids): return "removedFromView(\(table), \(ids.count))"
    case .syncFailed(let error, let willRetry): return "syncFailed(\(error.code), \(willRetry))"
    case .eventsDropped(let count): return "eventsDropped(\(count))"
    case let .attachmentProgress(sha256, direction, done, total): return "attachmentProgress(\(sha256.prefix(8)),\(direction.rawValue),\(done)/\(total))"
    }
}

@Suite("Sync engine")
struct SyncEngineTests {
    @Test("a push emits enqueue, processed with the server version, progress and outbox status")
    func pushEvents() async throws {
        let h = try await Harness()
        let events = try await recordEvents(h.client) {
            try await h.client.table("notes").insert(Record(id: "a", fields: ["title": "x"]))
            try await h.client.push()
        }
        #expect(events.map(name) == [
            "enqueued(insert)", "outboxStatus(false)", "networkStatus(true)", "processed(insert)",
            "pushProgress(1/1)", "outboxStatus(true)",
        ])
        guard case .outboxMutationProcessed(let table, let record, _) = events[3] else {
            Issue.record("event 3 is not processed"); return
        }
        #expect(table == "notes")
        #expect(record.version != nil && record.updatedAt != nil && !record.deleted)
        #expect(try await h.client.table("notes").get("a")?.version == record.version)
    }

    @Test("a sync run emits Amplify's sequence, with modelSynced counts")
    func syncEvents() async throws {
        let h = try await Harness()
        let other = try await h.otherDevice()
        try await other.transaction { tx in
            for i in 0..<3 { try tx.insert(Record(id: "r\(i)", fields: ["n": .int(Int64(i))]), into: "notes") }
        }
        try await other.push()
        let events = try await recordEvents(h.client) {
            try await h.client.sync(["notes"])
            try await h.client.sync(["notes"])
        }
        let names = events.map(name)
        let run = [
            "syncQueriesStarted(notes)", "networkStatus(true)", "pullProgress(3/3)", "modelSynced(notes)",
            "syncQueriesReady", "outboxStatus(true)", "ready",
        ]
        #expect(Array(names.prefix(7)) == run)
        // The second run: no networkStatus (it did not change), a delta sync of nothing.
        #expect(Array(names.dropFirst(7)) == [
            "syncQueriesStarted(notes)", "pullProgress(0/0)", "modelSynced(notes)", "syncQueriesReady",
            "outboxStatus(true)", "ready",
        ])
        let synced = events.compactMap { if case .modelSynced(let info) = $0 { return info } else { return nil } }
        #expect(synced == [
            ModelSyncedEvent(table: "notes", isFullSync: true, isDeltaSync: false, added: 3, updated: 0, deleted: 0,
                             skippedPending: 0),
            ModelSyncedEvent(table: "notes", isFullSync: false, isDeltaSync: true, added: 0, updated: 0, deleted: 0,
                             skippedPending: 0),
        ])
    }

    @Test("an unreachable remote leaves the queue's operations, order and contents as they were")
    func transientFailureKeepsQueue() async throws {
        let h = try await Harness()
        try await h.client.transaction { tx in
            try tx.insert(Record(id: "a", fields: ["title": "1"]), into: "notes")
            try tx.insert(Record(id: "b", fields: ["title": "2"]), into: "notes")
        }
        try await h.client.table("notes").insert(Record(id: "c", fields: ["title": "3"]))
        let before = try await h.client.queuedOperations()
        h.network.set(.down)
        let events = await recordEvents(h.client) {
            await #expect(throws: SyncError.self) { try await h.client.push() }
        }
        #expect(events.map(name) == ["networkStatus(false)"])
        let after = try await h.client.queuedOperations()
        #expect(after.map(\.id) == before.map(\.id))
        #expect(after.map(\.sendId) == before.map(\.sendId))
        #expect(after.map(\.kind) == before.map(\.kind))
        #expect(after.map(\.item) == before.map(\.item))
        #expect(after.map(\.baseVersion) == before.map(\.baseVersion))
        #expect(after.allSatisfy { $0.state == .attempted })
        h.network.set(.up)
        let summary = try await h.client.push()
        #expect(summary.applied == 3)
        #expect(try await h.client.queuedOperationCount() == 0)
    }

    @Test("a lost push response is replayed by operation id: applied once, no false conflict")
    func lostResponse() async throws {
        let h = try await Harness()
        try await h.client.table("notes").insert(Record(id: "a", fields: ["title": "1"]))
        try await h.client.push()
        try await h.client.table("notes").update(Record(id: "a", fields: ["title": "2"]))
        h.network.set(.loseResponses)
        await #expect(throws: SyncError.self) { try await h.client.push() }
        // The service applied it; the client does not know. A write now queues behind it.
        try await h.client.table("notes").update(Record(id: "a", fields: ["title": "3"]))
        #expect(try await h.client.queuedOperations().map(\.kind) == [.update, .update])
        h.network.set(.up)
        let summary = try await h.client.push()
        #expect(summary.applied == 2)
        #expect(summary.conflictsResolved == 0 && summary.failed == 0)
        let other = try await h.otherDevice()
        try await other.pull("notes")
        let server = try #require(try await other.table("notes").get("a"))
        #expect(server["title"] == "3")
        #expect(server.version == (try await h.client.table("notes").get("a"))?.version)
        // Three changes in all (insert, update 2, update 3): the replay added none.
        let page = try await h.service.pull(identity: "user", PullRequest(table: "notes", limit: 10))
        #expect(page.nextCursor.hasSuffix(":3"))
    }

    @Test("a rejected operation moves to operation errors, emits failed, blocks only its own item")
    func rejectedOperation() async throws {
        // The server declares n as an int; the client sends a string in an undeclared field of its own schema.
        let server = TableSchema("loose", fields: [FieldDefinition("n", .int)])
        let h = try await Harness(serverSchemas: [server])
        try await h.client.defineTable(TableSchema("loose"))
        try await h.client.table("loose").insert(Record(id: "bad", fields: ["n": "not a number"]))
        try await h.client.table("loose").update(Record(id: "bad", fields: ["n": "still not"]))
        try await h.client.table("loose").insert(Record(id: "good", fields: ["n": 1]))
        let events = try await recordEvents(h.client) { try await h.client.push() }
        let failed = events.compactMap { if case .outboxMutationFailed(_, _, _, let error) = $0 { return error } else { return nil } }
        #expect(failed.count == 1)
        #expect(failed.first?.status == 400)
        #expect(failed.first?.message.contains("declared int") == true)
        let errors = try await h.client.operationErrors()
        #expect(errors.map(\.itemId) == ["bad"])
        let queue = try await h.client.queuedOperations()
        #expect(queue.map(\.state) == [.failed])
        #expect(queue.first?.item?["n"] == "still not") // insert+update collapsed before the push
        let other = try await h.otherDevice()
        try await other.defineTable(TableSchema("loose"))
        try await other.pull("loose")
        #expect(try await other.table("loose").query().map(\.id) == ["good"])
        // A later write to the failed item waits behind it.
        try await h.client.table("loose").update(Record(id: "bad", fields: ["n": 5]))
        try await h.client.push()
        #expect(try await h.client.queuedOperations().map(\.state) == [.failed, .pending])
        // The app fixes it: retry with a valid record; the waiting update follows.
        try await h.client.resolve(errors[0], with: .retryWith(Record(id: "bad", fields: ["n": 4])))
        try await h.client.push()
        #expect(try await h.client.queuedOperationCount() == 0)
        try await other.pull("loose")
        #expect(try await other.table("loose").get("bad")?["n"] == 5)
    }

    @Test("a delete of an item whose insert is in flight is sent after it (no orphaned server row)")
    func deleteBehindInFlightInsert() async throws {
        let h = try await Harness()
        try await h.client.table("notes").insert(Record(id: "a", fields: ["title": "x"]))
        h.network.set(.loseResponses)
        await #expect(throws: SyncError.self) { try await h.client.push() }
        try await h.client.table("notes").delete(id: "a")
        #expect(try await h.client.queuedOperations().map(\.kind) == [.insert, .delete])
        h.network.set(.up)
        try await h.client.push()
        let page = try await h.service.pull(identity: "user", PullRequest(table: "notes", limit: 10))
        #expect(page.records.count == 1 && page.records[0].deleted)
    }

    @Test("after take-server, a newer local edit of the item meets the server's record as its own conflict")
    func takeServerDoesNotRebaseLaterEdit() async throws {
        let seen = ConflictLog()
        let resolver = ClosureConflictResolver { conflict in
            await seen.add(conflict.clientRecord?["title"].stringValue ?? "")
            return .takeServer
        }
        let h = try await Harness(options: SyncOptions(conflictResolver: resolver))
        let other = try await h.otherDevice()
        try await h.client.table("notes").insert(Record(id: "a", fields: ["title": "v0"]))
        try await h.client.push()
        try await other.pull("notes")
        try await other.table("notes").update(Record(id: "a", fields: ["title": "server"]))
        try await other.push()
        // Two local edits: the first is sent (and lost), the second queues behind it.
        try await h.client.table("notes").update(Record(id: "a", fields: ["title": "local 1"]))
        h.network.set(.down)
        await #expect(throws: SyncError.self) { try await h.client.push() }
        try await h.client.table("notes").update(Record(id: "a", fields: ["title": "local 2"]))
        h.network.set(.up)
        try await h.client.push()
        #expect(await seen.titles == ["local 1", "local 2"])
        #expect(try await h.client.table("notes").get("a")?["title"] == "server")
        try await other.pull("notes")
        #expect(try await other.table("notes").get("a")?["title"] == "server")
        #expect(try await h.client.queuedOperationCount() == 0)
    }

    @Test("pairs the queue cannot combine are a typed error and change nothing")
    func invalidSequences() async throws {
        let store = InMemoryStore()
        try await SystemTables.define(in: store)
        for (first, second) in [(OperationKind.insert, OperationKind.insert), (.update, .insert),
                                (.delete, .update), (.delete, .delete)] {
            let error = await #expect(throws: SyncError.self) {
                try await store.write { txn in
                    var sequence: Int64 = 0
                    for kind in [first, second] {
                        _ = try Outbox.enqueue(txn, table: "t", itemId: "x", kind: kind, item: Record(id: "x"),
                                                       baseVersion: nil, changedFields: [], transaction: "tx",
                                                       latest: try Outbox.latest(txn, table: "t", itemId: "x"),
                                                       sequence: { sequence += 1; return sequence }, now: .now())
                    }
                }
            }
            #expect(error?.code == .invalidOperationSequence, "\(first) then \(second)")
            #expect(try await store.read { try $0.count(in: SystemTables.operations, matching: .all) } == 0)
        }
    }

    @Test("local writes check ids: duplicate insert, update or delete of a missing record")
    func localWriteErrors() async throws {
        let h = try await Harness()
        try await h.client.table("notes").insert(Record(id: "a"))
        await #expect(throws: SyncError.self) { try await h.client.table("notes").insert(Record(id: "a")) }
        await #expect(throws: SyncError.self) { try await h.client.table("notes").update(Record(id: "zz")) }
        await #expect(throws: SyncError.self) { try await h.client.table("notes").delete(id: "zz") }
        await #expect(throws: SyncError.self) { try await h.client.table("__operations").insert(Record(id: "x")) }
        await #expect(throws: SyncError.self) {
            try await h.client.table("notes").insert(Record(id: "typed", fields: ["n": "not an int"]))
        }
        #expect(try await h.client.queuedOperationCount() == 1)
    }

    @Test("events reach every subscriber")
    func multipleSubscribers() async throws {
        let h = try await Harness()
        let first = h.client.events(), second = h.client.events()
        try await h.client.table("notes").insert(Record(id: "a"))
        h.client.broadcaster.finish()
        var a: [String] = [], b: [String] = []
        for await event in first { a.append(name(event)) }
        for await event in second { b.append(name(event)) }
        #expect(a == ["enqueued(insert)", "outboxStatus(false)"])
        #expect(a == b)
    }

    @Test("a reset table restarts incremental pulls instead of leaving the client empty")
    func cursorReset() async throws {
        let h = try await Harness()
        let other = try await h.otherDevice()
        try await other.table("notes").insert(Record(id: "a"))
        try await other.push()
        try await h.client.pull("notes", queryId: "q")
        // A cursor from another incarnation of the table (for example a restored backup).
        try await h.client.store.write { txn in
            try SystemTables.setConfigValue(txn, table: "notes", key: ConfigRow.cursorKey("q"), keyType: "cursor",
                                            value: "old-epoch:99")
        }
        let summary = try await h.client.pull("notes", queryId: "q")
        #expect(summary.isFullSync)
        #expect(summary.received == 1)
    }
}

struct Todo: SyncModel, Equatable {
    static let tableName = "todos"
    var id: String
    var title: String
    var done: Bool
    var due: Date?
    var version: String?
}

@Suite("Typed tables")
struct TypedTableTests {
    @Test("models round-trip through a typed table and sync with their server version")
    func typedRoundTrip() async throws {
        let h = try await Harness()
        try await h.client.defineTable(TableSchema("todos", fields: [FieldDefinition("title", .string),
                                                                     FieldDefinition("done", .bool)]))
        let todos = h.client.table("todos", as: Todo.self)
        let due = Date(timeIntervalSince1970: 1_790_000_000.123)
        try await todos.insert(Todo(id: "t1", title: "Buy milk", done: false, due: due))
        try await todos.insert(Todo(id: "t2", title: "Call", done: true))
        #expect(try await todos.get("t1") == Todo(id: "t1", title: "Buy milk", done: false, due: due))
        #expect(try await todos.query(ModelQuery(ModelPredicate(Field("done") == true))).map(\.id) == ["t2"])
        try await h.client.push()
        let synced = try #require(try await todos.get("t1"))
        #expect(synced.version != nil)
        var changed = synced
        changed.done = true
        try await todos.update(changed)
        try await todos.delete(id: "t2")
        try await h.client.push()
        let other = try await h.otherDevice()
        try await other.defineTable(TableSchema("todos"))
        try await other.pull("todos")
        let remote = other.table("todos", as: Todo.self)
        #expect(try await remote.query().map(\.id) == ["t1"])
        #expect(try await remote.get("t1")?.done == true)
        #expect(try await remote.get("t1")?.due == due)
        await #expect(throws: SyncError.self) { try await todos.insert(Todo(id: "t1", title: "dup", done: false)) }
    }

    @Test("a stored record that does not fit the model is a SyncError naming the model and the field, the DecodingError kept")
    func decodingFailuresAreSyncErrors() async throws {
        let h = try await Harness()
        try await h.client.defineTable(TableSchema("todos"))
        _ = try await h.client.table("todos").insert(Record(id: "bad", fields: ["title": 7, "done": false]))
        _ = try await h.client.table("todos").insert(Record(id: "short", fields: ["title": "no done"]))
        let todos = h.client.table("todos", as: Todo.self)
        for (id, field) in [("bad", "title"), ("short", "done")] {
            do {
                _ = try await todos.get(id)
                Issue.record("'\(id)' decoded")
            } catch let error as SyncError {
                #expect(error.code == .typeMismatch)
                #expect(error.message.contains("Todo") && error.message.contains("'\(field)'"), "\(error.message)")
                #expect(error.underlying is DecodingError)
            }
        }
        var observed = todos.observe(id: "bad").makeAsyncIterator()
        await #expect(throws: SyncError.self) { _ = try await observed.next() }
        await #expect(throws: SyncError.self) { _ = try await todos.query() }
        await #expect(throws: SyncError.self) {
            try await h.client.transaction { txn in _ = try txn.get(Todo.self, id: "bad") }
        }
    }
}

actor ConflictLog {
    var titles: [String] = []
    func add(_ title: String) { titles.append(title) }
}
