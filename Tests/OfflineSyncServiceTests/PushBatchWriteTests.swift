import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A pushed batch writes its rows, their group-log entries and its outcomes in chunks after
/// deciding them (`PendingWrites`), and writes them out before any operation that reads the
/// store itself. One batch that crosses several chunks, repeats items and an operation id,
/// refuses operations (two of them just after a chunk was written), changes memberships
/// between shared writes and puts shared operations between owner-only ones must leave the same rows and answers on SQLite (rows written by position,
/// multi-row statements) as on the in-memory store (one upsert per record), and a replay must
/// be answered with exactly the first answers.
@Suite("A pushed batch's deferred writes")
struct PushBatchWriteTests {
    static func batch() throws -> [PushOperation] {
        func op(_ id: String, _ table: String, _ item: String, _ kind: OperationKind, _ fields: [String: Value]?) -> PushOperation {
            PushOperation(id: id, table: table, itemId: item, kind: kind, item: fields.map { Record(id: item, fields: $0) }, baseVersion: nil)
        }
        var operations: [PushOperation] = []
        let missing = try Attachment(sha256: String(repeating: "ab", count: 32), size: 10, contentType: "image/png")
        for i in 0..<150 {
            // Refused after its row was held, when the held rows had just made a chunk and
            // were written: the row is taken back, and only it.
            if i == 64 { operations.append(op("att", "notes", "no-file", .insert, ["photo": missing.value])) }
            // Refused when its row is checked: a system property's name as a field.
            if i == 100 { operations.append(op("bad-field", "notes", "bad", .insert, ["version": "x"])) }
            operations.append(op("ins-\(i)", "notes", "n\(i)", .insert, ["text": .string("first \(i)"), "n": .int(Int64(i))]))
            // A shared list (its rules read the store) between owner-only writes, and a
            // membership of that list naming its owner, so the list's todo can be written.
            if i == 70 { operations.append(op("list", "lists", "L", .insert, ["name": "groceries"])) }
            if i == 71 { operations.append(op("member", "list_members", "m-L", .insert, ["list_id": "L", "user_id": "alice"])) }
            if i == 72 { operations.append(op("todo", "todos", "t1", .insert, ["list_id": "L", "title": "milk"])) }
            // A second member (a membership: held rows are written out before it), then the
            // list's todos, held with their group-log entries: 64 of them make a chunk.
            if i == 75 { operations.append(op("member-bob", "list_members", "m-L-bob", .insert, ["list_id": "L", "user_id": "bob"])) }
            // Refused by the rules when 64 todos were held (they are written first, the
            // refused one taken back), and refused for a missing file.
            if i == 144 { operations.append(op("todo-forbidden", "todos", "t-elsewhere", .insert, ["list_id": "M", "title": "x"])) }
            if i == 145 { operations.append(op("todo-att", "todos", "t-no-file", .insert, ["list_id": "L", "photo": missing.value])) }
            if i >= 80 { operations.append(op("todo-\(i)", "todos", "t\(i)", .insert, ["list_id": "L", "title": .string("first \(i)")])) }
        }
        // Items the batch inserted, changed again in the same batch (the later write wins).
        for i in stride(from: 0, to: 150, by: 7) {
            operations.append(op("upd-\(i)", "notes", "n\(i)", .update, ["text": .string("second \(i)")]))
        }
        for i in stride(from: 80, to: 150, by: 9) {
            operations.append(op("upd-todo-\(i)", "todos", "t\(i)", .update, ["list_id": "L", "title": .string("second \(i)")]))
        }
        operations.append(op("del-3", "notes", "n3", .delete, nil))
        // An operation id sent twice in one batch, and an update of an item that does not exist.
        operations.append(op("ins-5", "notes", "n5", .insert, ["text": "first 5", "n": 5]))
        operations.append(op("upd-missing", "notes", "nowhere", .update, ["text": "x"]))
        return operations
    }

    /// The batch pushed twice by alice; the answers and her rows of every table.
    static func push(on store: any LocalStore) async throws -> (first: [PushResult], replay: [PushResult], rows: [String: [Record]]) {
        let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false))
        let alice = service.remote(for: "alice")
        let first = try await alice.push(try batch())
        let replay = try await alice.push(try batch())
        var rows: [String: [Record]] = [:]
        let bob = service.remote(for: "bob")
        for (name, remote, table) in [("notes", alice, "notes"), ("lists", alice, "lists"), ("list_members", alice, "list_members"),
                                      ("todos", alice, "todos"), ("bob's todos", bob, "todos")] {
            var cursor: String?
            repeat {
                let page = try await remote.pull(PullRequest(table: table, cursor: cursor))
                rows[name, default: []] += page.records
                cursor = page.remaining > 0 ? page.nextCursor : nil
            } while cursor != nil
        }
        // Every todo the server stores, whoever may read it: a refused one is not among them.
        rows["stored todos"] = try await store.read { txn in try txn.records(in: "todos", matching: .all) }
        try await store.close()
        return (first, replay, rows)
    }

    /// A result with its record's version and stamp taken out: the two stores' epochs differ.
    static func comparable(_ result: PushResult) -> String {
        func strip(_ record: Record) -> Record { Record(id: record.id, fields: record.fields, deleted: record.deleted) }
        switch result.outcome {
        case .applied(let record): return "\(result.operationId) applied \(strip(record))"
        case .conflict(let record): return "\(result.operationId) conflict \(strip(record))"
        case let .rejected(reason, status): return "\(result.operationId) rejected \(status.map(String.init) ?? "-") \(reason)"
        }
    }

    @Test("SQLite's multi-row writes leave what one upsert per row leaves, and a replay gets the first answers")
    func sameAsOneByOne() async throws {
        try await withTemporaryDirectory { directory in
            let sqlite = try await Self.push(on: try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path))
            let memory = try await Self.push(on: InMemoryStore())
            let operations = try Self.batch()
            #expect(sqlite.first.map(\.operationId) == operations.map(\.id))
            #expect(sqlite.replay == sqlite.first, "a replayed batch is answered with its first answers, versions included")
            #expect(memory.replay == memory.first)
            #expect(sqlite.first.map(Self.comparable) == memory.first.map(Self.comparable))
            let applied = sqlite.first.filter { if case .applied = $0.outcome { return true } else { return false } }.count
            #expect(applied == operations.count - 5, "every operation but the update of a missing item and the four refused inserts is applied")
            let refused = Dictionary(uniqueKeysWithValues: sqlite.first.compactMap { result -> (String, Int)? in
                guard case .rejected(_, let status?) = result.outcome else { return nil }
                return (result.operationId, status)
            })
            #expect(refused == ["att": 409, "bad-field": 400, "upd-missing": 404, "todo-forbidden": 403, "todo-att": 409])
            guard case .rejected(_, 404)? = sqlite.first.last?.outcome else {
                Issue.record("the update of a missing item: \(String(describing: sqlite.first.last))")
                return
            }
            // The repeated id is answered with the first insert's record, not applied again
            // (which would be a conflict with the row it wrote).
            let fives = sqlite.first.filter { $0.operationId == "ins-5" }
            #expect(fives.count == 2 && fives[0] == fives[1])
            for table in ["notes", "lists", "list_members", "todos", "bob's todos"] {
                let a = (sqlite.rows[table] ?? []).map { Record(id: $0.id, fields: $0.fields, deleted: $0.deleted) }
                let b = (memory.rows[table] ?? []).map { Record(id: $0.id, fields: $0.fields, deleted: $0.deleted) }
                #expect(a.sorted { $0.id < $1.id } == b.sorted { $0.id < $1.id }, "alice's \(table)")
            }
            let notes = Dictionary(uniqueKeysWithValues: (sqlite.rows["notes"] ?? []).map { ($0.id, $0) })
            #expect(notes.count == 150)
            #expect(notes["n7"]?["text"] == "second 7", "the update later in the batch wins")
            #expect(notes["n8"]?["text"] == "first 8")
            #expect(notes["n3"]?.deleted == true)
            let todos = ["t1"] + (80..<150).map { "t\($0)" }
            #expect(sqlite.rows["todos"]?.map(\.id).sorted() == todos.sorted(), "the todos written after their membership in the same batch")
            #expect(sqlite.rows["bob's todos"]?.map(\.id).sorted() == todos.sorted(), "a member added in the batch reads the list's todos")
            #expect(sqlite.rows["stored todos"]?.map(\.id).sorted() == todos.sorted(), "the refused todos were taken back")
            #expect(memory.rows["stored todos"]?.map(\.id).sorted() == todos.sorted())
            let todo = Dictionary(uniqueKeysWithValues: (sqlite.rows["todos"] ?? []).map { ($0.id, $0) })
            #expect(todo["t89"]?["title"] == "second 89" && todo["t90"]?["title"] == "first 90")
        }
    }

    /// Whether the caller may read a file an item references is decided from the rows that
    /// reference it, which earlier operations of the batch may have written: those are in the
    /// store by then.
    @Test("a file the caller may read only through a row the same batch wrote is allowed in a later row")
    func attachmentThroughBatchRow() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false))
            func op(_ id: String, _ table: String, _ item: String, _ kind: OperationKind, _ fields: [String: Value]) -> PushOperation {
                PushOperation(id: id, table: table, itemId: item, kind: kind, item: Record(id: item, fields: fields), baseVersion: nil)
            }
            func applied(_ results: [PushResult]) -> Bool { results.allSatisfy { if case .applied = $0.outcome { true } else { false } } }
            // Bob uploads a photo and shares it with alice through a todo of his list.
            let bytes: [UInt8] = Array("a photo".utf8), hash = AttachmentHasher.hash(bytes)
            let bob = Claims(identity: "bob")
            _ = try await service.beginAttachmentUpload(claims: bob, hash: hash, length: Int64(bytes.count))
            _ = try await service.appendAttachment(claims: bob, hash: hash, offset: 0, bytes: bytes)
            _ = try await service.finishAttachmentUpload(claims: bob, hash: hash)
            let photo = try Attachment(sha256: hash, size: Int64(bytes.count), contentType: "image/png").value
            let setup = try await service.remote(for: "bob").push([
                op("list", "lists", "L", .insert, ["name": "trip"]),
                op("m-bob", "list_members", "m-L-bob", .insert, ["list_id": "L", "user_id": "bob"]),
                op("m-alice", "list_members", "m-L-alice", .insert, ["list_id": "L", "user_id": "alice"]),
                op("t0", "todos", "t0", .insert, ["list_id": "L", "photo": photo]),
            ])
            #expect(applied(setup), "\(setup)")
            // Alice references it from a new todo, drops it from bob's, and references it again:
            // by then only her first todo lets her read it.
            let batch = try await service.remote(for: "alice").push([
                op("t1", "todos", "t1", .insert, ["list_id": "L", "photo": photo]),
                op("t0-drop", "todos", "t0", .update, ["list_id": "L"]),
                op("t2", "todos", "t2", .insert, ["list_id": "L", "photo": photo]),
            ])
            #expect(applied(batch), "\(batch)")
            try await store.close()
        }
    }

    /// A table that a write grant's `owner_of` names (and no read grant): its rows are what
    /// the next operation's write check reads, so they are not held.
    @Test("a row that an owner_of write grant checks is written before the next operation's check, in the same batch")
    func writeGrantTargetNotHeld() async throws {
        try await withTemporaryDirectory { directory in
            let rules = SyncRules(tables: [
                "projects": TableRules(read: [Grant(.everyone)], write: [Grant(.owner)]),
                "tasks": TableRules(read: [Grant(.everyone)], write: [Grant(.ownerOf("projects", key: "project_id"))]),
            ])
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let service = try await OfflineSyncService(store: store, rules: rules)
            let results = try await service.remote(for: "alice").push([
                PushOperation(id: "p", table: "projects", itemId: "P", kind: .insert, item: Record(id: "P", fields: ["name": "x"]), baseVersion: nil),
                PushOperation(id: "t", table: "tasks", itemId: "T", kind: .insert, item: Record(id: "T", fields: ["project_id": "P"]), baseVersion: nil),
            ])
            #expect(results.allSatisfy { if case .applied = $0.outcome { true } else { false } }, "\(results)")
            try await store.close()
        }
    }
}
