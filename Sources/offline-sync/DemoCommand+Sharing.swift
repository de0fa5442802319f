import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncServer

// The sharing scene: alice shares a list with bob under the server's sync rules, bob edits
// it, alice hears of the edit, alice removes bob, and bob's device loses the list while his
// offline edit ends as a refused operation he can inspect.

extension Demo {
    /// The demo server's rules: Docs/SyncRules.md's shared todo lists, with the list's todos
    /// in `list_todos` (the first scenes' `todos` stay owner-only, the default).
    static let rulesDocument = """
        version: 1
        memberships:
          list_members: { table: list_members, member: user_id, group: list_id }
        tables:
          lists:
            read: [owner, { member: list_members, key: id }]
            write: [owner]
          list_todos:
            read: [{ member: list_members, key: list_id }]
            write: [{ member: list_members, key: list_id }]
          list_members:
            read: [{ member: list_members, key: list_id }, { identity: user_id }, { owner_of: lists, key: list_id }]
            write: [{ owner_of: lists, key: list_id }]

        """

    static let sharedTables = ["lists", "list_members", "list_todos"]

    /// One person's device in the sharing scene.
    struct Person {
        let name: String
        let context: SyncContext
        let store: SQLiteStore
        let network: DemoNetwork
        let remote: HTTPRemoteStore

        func sync() async throws { try await context.sync(Demo.sharedTables) }
        func todos() async throws -> [Record] { try await context.table("list_todos").query() }
    }

    func person(_ name: String, server: ServerProcess, tokens: TokenAuthority) async throws -> Person {
        let token = try await tokens.mint(identity: name)
        let remote = HTTPRemoteStore(baseURL: server.baseURL, token: { token })
        let network = DemoNetwork(remote)
        let store = try await SQLiteStore(path: root.appendingPathComponent("\(name).sqlite").path)
        // Conflicts follow the demo's policy; a write the rules refuse is compensated, so
        // the device goes back to what the server lets it see.
        let resolver = ClosureConflictResolver({ [policy] conflict in await policy.resolve(conflict) },
                                               refusal: { _ in .compensate })
        let context = try await SyncContext(store: store, remote: network, options: SyncOptions(conflictResolver: resolver))
        for table in Demo.sharedTables { try await context.defineTable(TableSchema(table)) }
        return Person(name: name, context: context, store: store, network: network, remote: remote)
    }

    func showTodos(_ person: Person) async throws {
        let todos = try await person.todos()
        if todos.isEmpty { say("   \(person.name) has no todos of shared lists") }
        for todo in todos {
            say("   \(person.name): \(todo.id) in \(todo["list_id"].stringValue ?? "?"): \(todo["title"].stringValue ?? "")")
        }
    }

    /// Steps 9 to 13; `true` when every device ends as the rules say.
    func sharingScenario(server: ServerProcess, secret: String) async throws -> Bool {
        let tokens = try await TokenAuthority(secret: Array(secret.utf8))
        let alice = try await person("alice", server: server, tokens: tokens)
        let bob = try await person("bob", server: server, tokens: tokens)
        let watchers = [watch("bob", bob.context)]
        defer { for watcher in watchers { watcher.cancel() } }

        step("9. Sharing (server rules: \(root.path)/rules.yaml). alice creates a list, adds bob as a member, and syncs")
        try await alice.context.transaction { tx in
            try tx.insert(Record(id: "groceries", fields: ["name": "Groceries"]), into: "lists")
            try tx.insert(Record(id: "m-alice", fields: ["list_id": "groceries", "user_id": "alice"]), into: "list_members")
            try tx.insert(Record(id: "m-bob", fields: ["list_id": "groceries", "user_id": "bob"]), into: "list_members")
            try tx.insert(Record(id: "g-1", fields: ["list_id": "groceries", "title": "Bread"]), into: "list_todos")
            try tx.insert(Record(id: "g-2", fields: ["list_id": "groceries", "title": "Apples"]), into: "list_todos")
            try tx.insert(Record(id: "g-3", fields: ["list_id": "groceries", "title": "Coffee"]), into: "list_todos")
        }
        try await alice.sync()

        step("10. bob syncs: the list's todos move into his view")
        try await bob.sync()
        await settle()
        try await showTodos(bob)

        step("11. bob edits a todo and syncs; alice is notified and pulls the edit")
        var aliceHears = alice.remote.changes().makeAsyncIterator()
        guard await aliceHears.next() == .subscribed else {
            say("   unexpected: alice's notification channel did not open")
            return false
        }
        _ = try await bob.context.table("list_todos").update(Record(id: "g-2", fields: ["list_id": "groceries", "title": "Green apples"]))
        try await bob.sync()
        while let event = await aliceHears.next() {
            if case .changed(let table) = event {
                say("   alice notified: '\(table)' changed on the server")
                if table == "list_todos" { break }
            }
        }
        try await alice.sync()
        try await showTodos(alice)
        let aliceSawEdit = try await alice.context.table("list_todos").get("g-2")?["title"] == "Green apples"

        step("12. bob goes offline and edits a todo; alice removes bob from the list")
        bob.network.setOnline(false)
        _ = try await bob.context.table("list_todos").update(Record(id: "g-3", fields: ["list_id": "groceries", "title": "Decaf coffee"]))
        try await alice.context.table("list_members").delete(id: "m-bob")
        try await alice.sync()

        step("13. bob comes back online and syncs: his edit is refused, and the list leaves his device")
        bob.network.setOnline(true)
        try await bob.sync()
        await settle()
        try await showTodos(bob)
        let refused = try await bob.context.operationErrors()
        for error in refused {
            say("   bob's refused operation: \(error.kind.rawValue) \(error.table)/\(error.itemId), \(error.code) (status \(error.status.map(String.init) ?? "-")), compensated: \(error.compensated)")
            say("     his edit, kept for him to see: \(error.clientRecord?["title"].stringValue ?? "-")")
        }
        let bobRows = try await bob.todos().count + bob.context.table("lists").count() + bob.context.table("list_members").count()
        let aliceTodo = try await alice.context.table("list_todos").get("g-3")?["title"].stringValue
        say("   bob's rows of the list: \(bobRows); alice's g-3 is still '\(aliceTodo ?? "-")'")
        alice.context.finishEvents()
        bob.context.finishEvents()
        try await alice.context.close()
        try await bob.context.close()
        return aliceSawEdit && bobRows == 0 && refused.count == 1 && refused.first?.code == .forbidden && aliceTodo == "Coffee"
    }
}
