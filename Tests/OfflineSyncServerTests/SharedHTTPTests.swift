import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// Shared lists through the live server: the native routes pass the token's claims to the
/// rules, notifications reach every identity whose view changed and no other.
@Suite("Shared data over HTTP: rules on the native routes, notifications to every reader")
struct SharedHTTPTests {
    static let rules = sharedListsRules(ownerReadsMembers: true)

    static func insert(_ id: String, _ table: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    @Test("bob hears of a list alice shares with him and pulls it; carol hears nothing and pulls nothing; bob's removal reaches him as removed ids")
    func shareOverHTTP() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            let alice = try await live.remote("alice"), bob = try await live.remote("bob"), carol = try await live.remote("carol")
            var bobEvents = bob.changes().makeAsyncIterator(), carolEvents = carol.changes().makeAsyncIterator()
            #expect(await bobEvents.next() == .subscribed)
            #expect(await carolEvents.next() == .subscribed)

            let results = try await alice.push([
                Self.insert("L1", "lists", ["name": "groceries"]),
                Self.insert("m-bob", "list_members", ["list_id": "L1", "user_id": "bob"]),
                Self.insert("m-alice", "list_members", ["list_id": "L1", "user_id": "alice"]),
                Self.insert("t1", "todos", ["list_id": "L1", "title": "milk"]),
            ])
            #expect(results.allSatisfy { if case .applied = $0.outcome { true } else { false } })
            #expect(await bobEvents.next() == .changed(table: "list_members"))
            #expect(await bobEvents.next() == .changed(table: "lists"))
            #expect(await bobEvents.next() == .changed(table: "todos"))

            let page = try await bob.pull(PullRequest(table: "todos"))
            #expect(page.records.map(\.id) == ["t1"])
            #expect(page.records.first?["title"] == "milk")
            #expect(try await carol.pull(PullRequest(table: "todos")).records.isEmpty)
            #expect(try await carol.pull(PullRequest(table: "lists")).records.isEmpty)

            // Carol's own change is the next thing she hears: nothing of alice's came before it.
            _ = try await carol.push([Self.insert("n1", "notes", ["text": "mine"])])
            #expect(await carolEvents.next() == .changed(table: "notes"))

            // Carol may not write into a list she is not in: a 403 that carries nothing.
            let refused = try await carol.push([Self.insert("t2", "todos", ["list_id": "L1", "title": "spam"])])
            guard case let .rejected(reason, status) = refused.first?.outcome else { Issue.record("not refused"); return }
            #expect(status == 403)
            #expect(!reason.contains("milk") && !reason.contains("groceries"))

            // Alice removes bob: he hears of it, and his next pull of todos says t1 left his view.
            _ = try await alice.push([PushOperation(id: "op-remove-bob", table: "list_members", itemId: "m-bob", kind: .delete,
                                                    item: nil, baseVersion: nil)])
            #expect(await bobEvents.next() == .changed(table: "list_members"))
            let after = try await bob.pull(PullRequest(table: "todos", cursor: page.nextCursor))
            #expect(after.records.isEmpty)
            #expect(after.removed == ["t1"])
        }
    }

    @Test("the tables API serves a shared table as the caller's data view: lists, counts, reads and writes stay inside it")
    func tablesDataView() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            let alice = try await live.remote("alice")
            _ = try await alice.push([
                Self.insert("L1", "lists", ["name": "shared"]), Self.insert("L2", "lists", ["name": "private"]),
                Self.insert("m-alice-1", "list_members", ["list_id": "L1", "user_id": "alice"]),
                Self.insert("m-bob", "list_members", ["list_id": "L1", "user_id": "bob"]),
                Self.insert("m-alice-2", "list_members", ["list_id": "L2", "user_id": "alice"]),
                Self.insert("t1", "todos", ["list_id": "L1", "title": "milk"]),
                Self.insert("t2", "todos", ["list_id": "L2", "title": "secret"]),
            ])
            let bob = TablesClient(baseURL: live.baseURL, token: try await live.token("bob"))
            let carol = TablesClient(baseURL: live.baseURL, token: try await live.token("carol"))
            let listed = try await bob.list("$count=true")
            #expect(listed.response.status == 200)
            #expect(listed.ids == ["t1"])
            #expect(listed.count == 1, "the count holds only rows bob may read")
            #expect(try await bob.list("$filter=" + encode("title eq 'secret'") + "&$count=true").count == 0)
            #expect(try await carol.list("$count=true").count == 0)

            // A hidden row and a missing one get the same answer.
            let hidden = try await bob.send(.GET, "/tables/todos/t2"), missing = try await bob.send(.GET, "/tables/todos/t9")
            #expect(hidden.status == 404 && missing.status == 404)
            #expect(!hidden.text.contains("secret"))
            #expect(try await bob.send(.PUT, "/tables/todos/t2", json: #"{"id":"t2","list_id":"L2","title":"x"}"#).status == 404)
            #expect(try await bob.send(.DELETE, "/tables/todos/t2").status == 404)

            // Writes inside the view work; writes the rules refuse are 403s that carry nothing.
            let edited = try await bob.send(.PUT, "/tables/todos/t1", json: #"{"id":"t1","list_id":"L1","title":"oat milk"}"#)
            #expect(edited.status == 200)
            #expect(edited.string("title") == "oat milk")
            let intoPrivate = try await bob.send(.POST, "/tables/todos", json: #"{"id":"t3","list_id":"L2","title":"spam"}"#)
            #expect(intoPrivate.status == 403)
            #expect(intoPrivate.errorCode == "forbidden")
            #expect(!intoPrivate.text.contains("secret") && !intoPrivate.text.contains("private"))
            let created = try await bob.send(.POST, "/tables/todos", json: #"{"id":"t4","list_id":"L1","title":"bread"}"#)
            #expect(created.status == 201)
            #expect(try await alice.pull(PullRequest(table: "todos")).records.map(\.id).sorted() == ["t1", "t2", "t4"])
            #expect(try await bob.send(.DELETE, "/tables/todos/t4").status == 204)
            #expect(try await bob.list("__includedeleted=true").ids == ["t1", "t4"], "a tombstone in view is listed on request")

            // Alice removes bob: the view empties, and the rows he could read are now hidden.
            _ = try await alice.push([PushOperation(id: "op-remove-bob", table: "list_members", itemId: "m-bob", kind: .delete,
                                                    item: nil, baseVersion: nil)])
            #expect(try await bob.list("$count=true").count == 0)
            #expect(try await bob.send(.GET, "/tables/todos/t1").status == 404)
        }
    }
}
