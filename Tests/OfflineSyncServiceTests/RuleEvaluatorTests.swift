import OfflineSync
@testable import OfflineSyncService
import OfflineSyncStoreKit
import Testing

/// Single-row decisions under the shared-lists rules of Docs/SyncRules.md, over stored rows
/// in a real (in-memory) store.
@Suite("Sync rules: who may read and write a stored row")
struct RuleEvaluatorTests {
    static let rules = SyncRules(
        memberships: ["list_members": Membership(table: "list_members", member: "user_id", group: "list_id", role: "role")],
        tables: [
            "lists": TableRules(read: [Grant(.owner), Grant(.member("list_members", key: SystemField.id, roles: nil))],
                                write: [Grant(.owner), Grant(.member("list_members", key: SystemField.id, roles: ["editor"]), operations: [.update])]),
            "todos": TableRules(read: [Grant(.member("list_members", key: "list_id", roles: nil))],
                                write: [Grant(.member("list_members", key: "list_id", roles: nil))]),
            "list_members": TableRules(read: [Grant(.member("list_members", key: "list_id", roles: nil)), Grant(.identityField("user_id"))],
                                       write: [Grant(.ownerOf("lists", key: "list_id"))]),
            "announcements": TableRules(read: [Grant(.everyone)],
                                        write: [Grant(.everyone, when: [Condition(claim: "roles", values: ["admin"])])]),
        ])

    static let alice = Claims(identity: "alice"), bob = Claims(identity: "bob"), carol = Claims(identity: "carol")

    /// A stored row as the service keeps it in a shared table.
    static func row(_ id: String, owner: String, _ fields: [String: Value], deleted: Bool = false) -> Record {
        var all = fields
        all[OfflineSyncService.Meta.owner] = .string(owner)
        all[OfflineSyncService.Meta.item] = .string(id)
        all[OfflineSyncService.Meta.sequence] = 1
        return Record(id: id, fields: all, version: "v", updatedAt: Timestamp(millisecondsSince1970: 1), deleted: deleted)
    }

    func reads(_ evaluator: RuleEvaluator, _ row: Record, _ table: String, _ claims: Claims, _ store: InMemoryStore) async throws -> Bool {
        try await store.read { txn in try evaluator.canRead(row, in: table, claims: claims, txn) }
    }

    func writes(_ evaluator: RuleEvaluator, _ kind: OperationKind, _ table: String, _ current: Record?, _ proposed: Record?,
                _ claims: Claims, _ store: InMemoryStore) async throws -> Bool {
        try await store.read { txn in try evaluator.canWrite(kind, in: table, current: current, proposed: proposed, claims: claims, txn) }
    }

    /// A store with alice's list L1 (bob a member, carol an editor, dave no longer) and bob's
    /// list L2 (bob its only member).
    func lists() async throws -> (RuleEvaluator, InMemoryStore) {
        let store = InMemoryStore()
        for table in ["lists", "todos", "list_members", "announcements"] { try await store.defineTable(TableSchema(table)) }
        try await store.write { txn in
            try txn.upsert(Self.row("L1", owner: "alice", ["name": "groceries"]), in: "lists")
            try txn.upsert(Self.row("L2", owner: "bob", ["name": "bob's"]), in: "lists")
            try txn.upsert(Self.row("m1", owner: "alice", ["list_id": "L1", "user_id": "bob", "role": "viewer"]), in: "list_members")
            try txn.upsert(Self.row("m2", owner: "alice", ["list_id": "L1", "user_id": "carol", "role": "editor"]), in: "list_members")
            try txn.upsert(Self.row("m3", owner: "alice", ["list_id": "L1", "user_id": "dave"], deleted: true), in: "list_members")
            try txn.upsert(Self.row("m4", owner: "bob", ["list_id": "L2", "user_id": "bob"]), in: "list_members")
            try txn.upsert(Self.row("t1", owner: "bob", ["list_id": "L1", "title": "milk"]), in: "todos")
            try txn.upsert(Self.row("t2", owner: "bob", ["list_id": "L2", "title": "bob only"]), in: "todos")
        }
        return (RuleEvaluator(rules: Self.rules) { _, item, _ in item }, store)
    }

    @Test("members read a list's rows, others do not; the owner reads a list it is no member of")
    func readThroughMembership() async throws {
        let (evaluator, store) = try await lists()
            let t1 = Self.row("t1", owner: "bob", ["list_id": "L1", "title": "milk"])
            let t2 = Self.row("t2", owner: "bob", ["list_id": "L2", "title": "bob only"])
            let l1 = Self.row("L1", owner: "alice", ["name": "groceries"])
            do {
                #expect(try await reads(evaluator, t1, "todos", Self.bob, store))
                #expect(try await reads(evaluator, t1, "todos", Self.carol, store))
                #expect(try await reads(evaluator, t1, "todos", Self.alice, store) == false, "alice owns the list but is no member")
                #expect(try await reads(evaluator, l1, "lists", Self.alice, store))
                #expect(try await reads(evaluator, l1, "lists", Self.bob, store))
                #expect(try await reads(evaluator, t2, "todos", Self.carol, store) == false)
                #expect(try await reads(evaluator, t1, "todos", Claims(identity: "dave"), store) == false, "a deleted membership grants nothing")
                let noList = Self.row("t3", owner: "bob", ["title": "no list"])
                #expect(try await reads(evaluator, noList, "todos", Self.bob, store) == false, "a row without the key matches no group")
            }
    }

    @Test("membership rows are read by the list's members and by the member they name")
    func membershipRows() async throws {
        let (evaluator, store) = try await lists()
            let m1 = Self.row("m1", owner: "alice", ["list_id": "L1", "user_id": "bob", "role": "viewer"])
            let other = Self.row("m9", owner: "erin", ["list_id": "L9", "user_id": "frank"])
            do {
                #expect(try await reads(evaluator, m1, "list_members", Self.carol, store))
                #expect(try await reads(evaluator, other, "list_members", Self.bob, store) == false)
                #expect(try await reads(evaluator, other, "list_members", Claims(identity: "frank"), store))
            }
    }

    @Test("writes: an update must be allowed for the row as stored and as written; roles and ops narrow grants")
    func writes() async throws {
        let (evaluator, store) = try await lists()
            let t1 = Self.row("t1", owner: "bob", ["list_id": "L1", "title": "milk"])
            let moved = Self.row("t1", owner: "bob", ["list_id": "L2", "title": "milk"])
            let l1 = Self.row("L1", owner: "alice", ["name": "groceries"])
            let renamed = Self.row("L1", owner: "alice", ["name": "food"])
            let member = Self.row("m5", owner: "bob", ["list_id": "L1", "user_id": "erin"])
            let note = Self.row("a1", owner: "bob", ["text": "hello"])
            do {
                #expect(try await writes(evaluator, .update, "todos", t1, t1, Self.carol, store))
                #expect(try await writes(evaluator, .update, "todos", t1, moved, Self.carol, store) == false,
                        "carol may not move a todo into a list she is not in")
                #expect(try await writes(evaluator, .update, "todos", t1, moved, Self.bob, store))
                #expect(try await writes(evaluator, .update, "lists", l1, renamed, Self.carol, store), "an editor")
                #expect(try await writes(evaluator, .update, "lists", l1, renamed, Self.bob, store) == false, "a viewer")
                #expect(try await writes(evaluator, .delete, "lists", l1, nil, Self.carol, store) == false, "ops: update only")
                #expect(try await writes(evaluator, .delete, "lists", l1, nil, Self.alice, store))
                #expect(try await writes(evaluator, .insert, "list_members", nil, member, Self.bob, store) == false,
                        "only the list's owner adds members")
                #expect(try await writes(evaluator, .insert, "list_members", nil, member, Self.alice, store))
                #expect(try await writes(evaluator, .insert, "announcements", nil, note, Self.bob, store) == false)
                #expect(try await writes(evaluator, .insert, "announcements", nil, note, Claims(identity: "bob", roles: ["admin"]), store))
                #expect(try await reads(evaluator, note, "announcements", Self.carol, store))
            }
    }

    @Test("tables the rules do not name are owner-only by default, and closed under default: deny")
    func unnamedTables() async throws {
        let (evaluator, store) = try await lists()
            let mine = Self.row("n1", owner: "alice", ["text": "private"])
            var deny = Self.rules
            deny.defaultAccess = .deny
            let closed = RuleEvaluator(rules: deny) { _, item, _ in item }
            do {
                #expect(try await reads(evaluator, mine, "notes", Self.alice, store))
                #expect(try await reads(evaluator, mine, "notes", Self.bob, store) == false)
                #expect(try await writes(evaluator, .insert, "notes", nil, mine, Self.alice, store))
                #expect(try await reads(closed, mine, "notes", Self.alice, store) == false)
                #expect(try await writes(closed, .insert, "notes", nil, mine, Self.alice, store) == false)
            }
    }
}
