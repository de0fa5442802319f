import Foundation
import OfflineSync

// The `sharedRules` group: a backend serving the shared-lists rules (see
// `RemoteStoreConformance.sharedListsRules`) must move rows in and out of views as
// memberships change, keep a row while any membership admits it, refuse writes the rules do
// not allow with a 403 that carries nothing, and let nothing unreadable out.

extension RemoteStoreConformance {
    /// The rules the ``Group/sharedRules`` cases assume, as a rules document: a list's owner
    /// and its members read it, only its owner writes it; members read and write the list's
    /// todos; members, and the member a row names, read a list's memberships, and the list's
    /// owner writes them. Hand it (or the same rules as a value) to the backend that
    /// `makeSharedListsBackend` builds.
    public static let sharedListsRules = """
        version: 1
        memberships:
          list_members: { table: list_members, member: user_id, group: list_id }
        tables:
          lists:
            read: [owner, { member: list_members, key: id }]
            write: [owner]
          todos:
            read: [{ member: list_members, key: list_id }]
            write: [{ member: list_members, key: list_id }]
          list_members:
            read: [{ member: list_members, key: list_id }, { identity: user_id }]
            write: [{ owner_of: lists, key: list_id }]

        """

    static let rulesCases: [RemoteCase] = [
        ("a row moves into a new member's view although it did not change, and out when the membership ends", { backend in
            let alice = try await backend.remote("alice"), bob = try await backend.remote("bob")
            try await makeList(alice, "L1", members: ["alice"], todos: ["t1": "milk", "t2": "bread"])
            let before = try await pullAll(bob, table: "todos")
            try expectEqual(before.records.count, 0, "bob's todos before he is a member")
            _ = try await applyOne(alice, member("bob", of: "L1"))
            let movedIn = try await pullChanges(bob, table: "todos", cursor: before.cursor)
            try expectEqual(movedIn.records.map(\.id).sorted(), ["t1", "t2"], "the todos moved in on the delta pull")
            try expectEqual(movedIn.records.first { $0.id == "t1" }?.fields["title"], "milk", "a moved-in row's fields")
            try expectEqual(try await pullAll(bob, table: "lists").records.map(\.id), ["L1"], "the list moved in")
            _ = try await applyOne(alice, makeOperation(.delete, "m-L1-bob", table: "list_members"))
            let movedOut = try await pullChanges(bob, table: "todos", cursor: movedIn.cursor)
            try expectEqual(movedOut.removed.sorted(), ["t1", "t2"], "the todos left bob's view as removed ids")
            try expectEqual(movedOut.records.count, 0, "nothing of the list is sent after the move-out")
        }),
        ("a row visible through two memberships stays while either remains", { backend in
            let alice = try await backend.remote("alice"), bob = try await backend.remote("bob")
            try await makeList(alice, "L1", members: ["alice", "bob"], todos: ["t1": "milk"])
            _ = try await applyOne(alice, makeOperation(.insert, "m-L1-bob-again", ["list_id": "L1", "user_id": "bob"],
                                                        table: "list_members"))
            let first = try await pullAll(bob, table: "todos")
            try expectEqual(first.records.map(\.id), ["t1"], "bob's view")
            _ = try await applyOne(alice, makeOperation(.delete, "m-L1-bob", table: "list_members"))
            let one = try await pullChanges(bob, table: "todos", cursor: first.cursor)
            try expect(!one.removed.contains("t1"), "t1 left bob's view although a second membership admits it")
            try expectEqual(try await pullAll(bob, table: "todos").records.map(\.id), ["t1"], "a full pull still has t1")
            _ = try await applyOne(alice, makeOperation(.delete, "m-L1-bob-again", table: "list_members"))
            let none = try await pullChanges(bob, table: "todos", cursor: one.cursor)
            try expectEqual(none.removed, ["t1"], "with no membership left, t1 leaves")
        }),
        ("writes the rules refuse are 403s that carry nothing and change nothing", { backend in
            let alice = try await backend.remote("alice"), bob = try await backend.remote("bob"), carol = try await backend.remote("carol")
            try await makeList(alice, "L1", members: ["alice", "bob"], todos: ["t1": "milk"])
            let list = try await pullAll(bob, table: "lists").records.first
            // Bob reads the list but may not rename it; carol is no member at all.
            try await expectRefused(bob, makeOperation(.update, "L1", ["name": "mine"], base: list?.version, table: "lists"))
            try await expectRefused(carol, makeOperation(.insert, "t9", ["list_id": "L1", "title": "spam"], table: "todos"))
            try await expectRefused(carol, makeOperation(.update, "t1", ["list_id": "L1", "title": "spam"], table: "todos"))
            try await expectRefused(carol, makeOperation(.delete, "t1", table: "todos"))
            // An insert on an id carol cannot see is refused, never a conflict with the row.
            try await expectRefused(carol, makeOperation(.insert, "t1", ["list_id": "L1", "title": "mine"], table: "todos"))
            // Bob, not the list's owner, may not add members.
            try await expectRefused(bob, member("carol", of: "L1"))
            let todos = try await pullAll(alice, table: "todos").records
            try expectEqual(todos.map(\.id), ["t1"], "alice's todos after the refusals")
            try expectEqual(todos.first?.fields["title"], "milk", "the refused writes changed nothing")
            try expectEqual(try await pullAll(alice, table: "lists").records.first?.fields["name"], "L1", "the list's name")
        }),
        ("an identity outside a list sees nothing of it: pages, counts, removals, predicates", { backend in
            let alice = try await backend.remote("alice"), carol = try await backend.remote("carol")
            try await makeList(alice, "L1", members: ["alice"], todos: ["t1": "milk", "t2": "secret"])
            for table in ["lists", "todos", "list_members"] {
                let page = try await must(await carol.pull(PullRequest(table: table, limit: 1)), "carol's pull of \(table)")
                try expectEqual(page.records.count, 0, "carol's \(table)")
                try expectEqual(page.remaining, 0, "the remaining count of carol's \(table) pull")
                try expectEqual(page.removed.count, 0, "removed ids carol never saw in \(table)")
            }
            let filtered = try await pullAll(carol, table: "todos", predicate: Field("title") == "secret")
            try expectEqual(filtered.records.count, 0, "a predicate cannot reach an unreadable row")
            try await expectThrows(anyOf: [.invalidQuery, .rejected], "a predicate naming a reserved column") {
                try await carol.pull(PullRequest(table: "todos", predicate: Field("__owner") == "alice", limit: 10))
            }
        }),
    ]

    /// Alice's list `id` with memberships for `members` and `todos` (id → title), in one push.
    static func makeList(_ owner: any RemoteStore, _ id: String, members: [String], todos: [String: String]) async throws {
        var operations = [makeOperation(.insert, id, ["name": .string(id)], table: "lists")]
        operations += members.map { member($0, of: id) }
        operations += todos.sorted { $0.key < $1.key }.map {
            makeOperation(.insert, $0.key, ["list_id": .string(id), "title": .string($0.value)], table: "todos")
        }
        let results = try await must(await owner.push(operations), "making list \(id)")
        for result in results {
            guard case .applied = result.outcome else { throw failure("making list \(id): \(result.outcome)") }
        }
    }

    static func member(_ identity: String, of list: String) -> PushOperation {
        makeOperation(.insert, "m-\(list)-\(identity)", ["list_id": .string(list), "user_id": .string(identity)], table: "list_members")
    }

    /// Every page after `cursor`, with the removed ids gathered.
    static func pullChanges(_ remote: any RemoteStore, table: String,
                            cursor: String?) async throws -> (records: [Record], removed: [String], cursor: String?) {
        var records: [Record] = [], removed: [String] = [], cursor = cursor
        for _ in 0..<1000 {
            let page = try await must(await remote.pull(PullRequest(table: table, cursor: cursor, limit: 100)), "pull of \(table)")
            records += page.records
            removed += page.removed
            cursor = page.nextCursor
            if page.remaining == 0 { return (records, removed, cursor) }
        }
        throw failure("the pull of \(table) did not finish after 1,000 pages")
    }

    /// The operation is refused with status 403, and the reason names no field value.
    static func expectRefused(_ remote: any RemoteStore, _ operation: PushOperation) async throws {
        let outcome = try await pushOne(remote, operation)
        guard case let .rejected(reason, status) = outcome else {
            throw failure("\(operation.kind.rawValue) of \(operation.table)/\(operation.itemId): expected a 403, got \(outcome)")
        }
        try expectEqual(status, 403, "the status of a refused \(operation.kind.rawValue) of \(operation.table)/\(operation.itemId)")
        for secret in ["milk", "secret", "spam"] where reason.contains(secret) {
            throw failure("the refusal's reason carries a field value: \(reason)")
        }
    }
}
