import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Docs/SyncRules.md's worked examples, read from the file as written and played as their
/// stories say against a live server, so the document cannot drift from what the server does.
@Suite("Docs/SyncRules.md's worked examples, exactly as written, against a live server")
struct SyncRulesDocTests {
    /// The YAML block under the heading `### title` of Docs/SyncRules.md.
    static func example(_ title: String) throws -> SyncRules {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let doc = try String(contentsOf: here.appendingPathComponent("../../Docs/SyncRules.md").standardized, encoding: .utf8)
        let section = try #require(doc.range(of: "### \(title)\n"), "no section '\(title)'")
        let open = try #require(doc.range(of: "```yaml\n", range: section.upperBound..<doc.endIndex))
        let close = try #require(doc.range(of: "```", range: open.upperBound..<doc.endIndex))
        return try SyncRules(yaml: String(doc[open.upperBound..<close.lowerBound]), source: "SyncRules.md (\(title))")
    }

    /// A device of `identity` holding `tables`, over HTTP with a token carrying `roles`.
    static func device(_ live: LiveServer, _ identity: String, roles: Set<String> = [],
                       tables: [TableSchema]) async throws -> SyncContext {
        let token = try await live.server.tokens.mint(identity: identity, roles: roles)
        let context = try await SyncContext(store: InMemoryStore(), remote: HTTPRemoteStore(baseURL: live.baseURL, token: { token }))
        for table in tables { try await context.defineTable(table) }
        return context
    }

    static func ids(_ context: SyncContext, _ table: String) async throws -> [String] {
        try await context.table(table).query().map(\.id)
    }

    static let listTables = [TableSchema("lists", fields: [FieldDefinition("name", .string)]),
                             TableSchema("todos", fields: [FieldDefinition("list_id", .string), FieldDefinition("title", .string)]),
                             TableSchema("list_members", fields: [FieldDefinition("list_id", .string), FieldDefinition("user_id", .string),
                                                                  FieldDefinition("role", .string)])]

    @Test("shared todo lists: the owner writes her own todos, shares, and the member moves in, then out with his offline edit refused")
    func sharedTodoLists() async throws {
        try await LiveServer.with(rules: try Self.example("Shared todo lists")) { live in
            let alice = try await Self.device(live, "alice", tables: Self.listTables)
            let bob = try await Self.device(live, "bob", tables: Self.listTables)
            let all = Self.listTables.map(\.name)
            // Alice creates list L1 and her own todo in it: both stay hers.
            _ = try await alice.table("lists").insert(Record(id: "L1", fields: ["name": "Groceries"]))
            _ = try await alice.table("todos").insert(Record(id: "T1", fields: ["list_id": "L1", "title": "Milk"]))
            try await alice.sync(all)
            #expect(try await alice.operationErrors().isEmpty, "the owner writes todos into her own list")
            #expect(try await Self.ids(alice, "todos") == ["T1"], "and keeps them")
            // She shares it with bob, as an editor.
            _ = try await alice.table("list_members").insert(Record(id: "m-bob", fields: ["list_id": "L1", "user_id": "bob", "role": "editor"]))
            try await alice.sync(all)
            #expect(try await alice.operationErrors().isEmpty, "the owner adds members")
            // Bob's next pull brings the list, its todos and its members (move-in).
            try await bob.sync(all)
            #expect(try await Self.ids(bob, "lists") == ["L1"])
            #expect(try await Self.ids(bob, "todos") == ["T1"])
            #expect(try await Self.ids(bob, "list_members") == ["m-bob"])
            // Members change todos; editors rename the list.
            var todo = try #require(try await bob.table("todos").get("T1"))
            todo["title"] = "Oat milk"
            _ = try await bob.table("todos").update(todo)
            var list = try #require(try await bob.table("lists").get("L1"))
            list["name"] = "Shopping"
            _ = try await bob.table("lists").update(list)
            try await bob.sync(all)
            #expect(try await bob.operationErrors().isEmpty)
            try await alice.sync(all)
            #expect(try await alice.table("todos").get("T1")?["title"] == "Oat milk")
            #expect(try await alice.table("lists").get("L1")?["name"] == "Shopping")
            // Alice removes bob; bob, offline, edits the todo once more.
            try await alice.table("list_members").delete(id: "m-bob")
            try await alice.sync(all)
            todo = try #require(try await bob.table("todos").get("T1"))
            todo["title"] = "Soy milk"
            _ = try await bob.table("todos").update(todo)
            try await bob.sync(all)
            // The edit is refused with a 403 he can inspect, naming the table and the operation
            // and that no grant admitted it, and nothing of the row; his device drops the list.
            let refusal = try #require(try await bob.operationErrors().first)
            #expect(refusal.code == .forbidden && refusal.table == "todos" && refusal.kind == .update)
            #expect(refusal.message.contains("table 'todos'") && refusal.message.contains("update") && refusal.message.contains("no grant"),
                    "\(refusal.message)")
            #expect(!refusal.message.contains("milk") && !refusal.message.contains("Shopping"))
            #expect(try await Self.ids(bob, "lists").isEmpty)
            #expect(try await Self.ids(bob, "todos").isEmpty)
            try await alice.sync(all)
            #expect(try await alice.table("todos").get("T1")?["title"] == "Oat milk", "the refused edit changed nothing")
        }
    }

    static let teamTables = [TableSchema("teams", fields: [FieldDefinition("name", .string)]),
                             TableSchema("documents", fields: [FieldDefinition("team_id", .string), FieldDefinition("body", .string)]),
                             TableSchema("team_members", fields: [FieldDefinition("team_id", .string), FieldDefinition("user_id", .string),
                                                                  FieldDefinition("role", .string)]),
                             TableSchema("notes", fields: [FieldDefinition("text", .string)])]

    @Test("a team workspace: the token admin sets the team up, members write, only team admins delete, other tables are refused")
    func teamWorkspace() async throws {
        try await LiveServer.with(rules: try Self.example("A team workspace with an admin role")) { live in
            let root = try await Self.device(live, "root", roles: ["admin"], tables: Self.teamTables)
            let ann = try await Self.device(live, "ann", tables: Self.teamTables)
            let max = try await Self.device(live, "max", tables: Self.teamTables)
            let all = ["teams", "team_members", "documents"]
            _ = try await root.table("teams").insert(Record(id: "T", fields: ["name": "Core"]))
            _ = try await root.table("team_members").insert(Record(id: "m-ann", fields: ["team_id": "T", "user_id": "ann", "role": "admin"]))
            _ = try await root.table("team_members").insert(Record(id: "m-max", fields: ["team_id": "T", "user_id": "max", "role": "member"]))
            try await root.sync(all)
            #expect(try await root.operationErrors().isEmpty)
            try await max.sync(all)
            _ = try await max.table("documents").insert(Record(id: "D1", fields: ["team_id": "T", "body": "plan"]))
            try await max.sync(all)
            #expect(try await max.operationErrors().isEmpty, "members write documents")
            try await max.table("documents").delete(id: "D1")
            try await max.sync(all)
            #expect(try await max.operationErrors().map(\.code) == [.forbidden], "a member may not delete")
            try await ann.sync(all)
            #expect(try await Self.ids(ann, "documents") == ["D1"])
            try await ann.table("documents").delete(id: "D1")
            try await ann.sync(all)
            #expect(try await ann.operationErrors().isEmpty, "a team admin deletes")
            // default: deny — a table the document does not name is refused: its writes one by
            // one, and a pull of it as a whole.
            _ = try await ann.table("notes").insert(Record(id: "n", fields: ["text": "x"]))
            try await ann.push()
            #expect(try await ann.operationErrors().map(\.table) == ["notes"])
            await #expect { try await ann.pull("notes") } throws: { ($0 as? SyncError)?.code == .forbidden }
        }
    }

    static let catalogueTables = [TableSchema("products", fields: [FieldDefinition("name", .string)]),
                                  TableSchema("favourites", fields: [FieldDefinition("user_id", .string), FieldDefinition("product_id", .string)])]

    @Test("a public catalogue: everyone reads it, editors change it, favourites stay their user's")
    func publicCatalogue() async throws {
        try await LiveServer.with(rules: try Self.example("A public catalogue with per-user favourites")) { live in
            let editor = try await Self.device(live, "eve", roles: ["editor"], tables: Self.catalogueTables)
            let sam = try await Self.device(live, "sam", tables: Self.catalogueTables)
            let kim = try await Self.device(live, "kim", tables: Self.catalogueTables)
            let all = Self.catalogueTables.map(\.name)
            _ = try await editor.table("products").insert(Record(id: "P1", fields: ["name": "Kettle"]))
            try await editor.sync(all)
            #expect(try await editor.operationErrors().isEmpty)
            _ = try await sam.table("products").insert(Record(id: "P2", fields: ["name": "Spam"]))
            _ = try await sam.table("favourites").insert(Record(id: "F1", fields: ["user_id": "sam", "product_id": "P1"]))
            try await sam.sync(all)
            #expect(try await sam.operationErrors().map(\.table) == ["products"], "only editors change the catalogue")
            #expect(try await Self.ids(sam, "products") == ["P1"])
            try await kim.sync(all)
            #expect(try await Self.ids(kim, "products") == ["P1"], "everyone reads it")
            #expect(try await Self.ids(kim, "favourites").isEmpty, "sam's favourites are his")
        }
    }
}
