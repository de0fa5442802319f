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

            // Carol's own change (through another client of hers: a client does not hear its own
            // pushes) is the next thing she hears: nothing of alice's came before it.
            _ = try await (try await live.remote("carol")).push([Self.insert("n1", "notes", ["text": "mine"])])
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

    @Test("a large group's writes reach its connected members through the group's topic, and stop reaching a member who leaves")
    func largeGroupNotices() async throws {
        // A fan-out limit of 2: the list of four members is large, written once and announced once.
        try await LiveServer.with(rules: Self.rules, groupFanoutLimit: 2) { live in
            let alice = try await live.remote("alice"), bob = try await live.remote("bob")
            let carol = try await live.remote("carol"), dan = try await live.remote("dan"), erin = try await live.remote("erin")
            let aliceHeard = EventLog(alice.changes()), bobHeard = EventLog(bob.changes())
            let carolHeard = EventLog(carol.changes()), erinHeard = EventLog(erin.changes())
            for log in [aliceHeard, bobHeard, carolHeard, erinHeard] { #expect(await log.waitFor(.subscribed)) }

            // Connected before the list exists: bob and carol hear it once it is theirs.
            _ = try await alice.push([Self.insert("L1", "lists", ["name": "team"])] + ["alice", "bob", "carol", "dan"].map {
                Self.insert("m-\($0)", "list_members", ["list_id": "L1", "user_id": .string($0)])
            } + [Self.insert("t1", "todos", ["list_id": "L1", "title": "plan"])])
            let mode = try await live.store.read { try $0.records(in: "__srv_groups", matching: .all) }.map { $0["mode"] }
            #expect(mode == ["large"], "the list is large")
            #expect(await bobHeard.waitFor(.changed(table: "todos")))
            #expect(await carolHeard.waitFor(.changed(table: "todos")))

            // Dan connects once the list is large: his connection listens to it from the start.
            let danHeard = EventLog(dan.changes())
            #expect(await danHeard.waitFor(.subscribed))
            _ = try await bob.push([Self.insert("t2", "todos", ["list_id": "L1", "title": "build"])])
            for log in [aliceHeard, carolHeard, danHeard] { #expect(await log.waitFor(.changed(table: "todos"))) }

            // Erin is in no list: her own change (through another client, as a client does not
            // hear its own pushes) is the first thing she hears.
            _ = try await (try await live.remote("erin")).push([Self.insert("n1", "notes", ["text": "mine"])])
            #expect(await erinHeard.consume(through: .changed(table: "notes")) == [], "erin heard of a list she cannot read")

            // Carol leaves: she hears her move-out, then nothing more of the list. (Her own change
            // first drains what she heard so far: joining told her of the todos twice, by her own
            // log's event and as a group she started to hear.)
            _ = try await (try await live.remote("carol")).push([Self.insert("n0", "notes", ["text": "carol's"])])
            #expect(await carolHeard.waitFor(.changed(table: "notes")))
            _ = try await alice.push([PushOperation(id: "op-remove-carol", table: "list_members", itemId: "m-carol", kind: .delete,
                                                    item: nil, baseVersion: nil)])
            #expect(await carolHeard.waitFor(.changed(table: "todos")))
            _ = try await bob.push([PushOperation(id: "op-edit-t2", table: "todos", itemId: "t2", kind: .update,
                                                  item: Record(id: "t2", fields: ["list_id": "L1", "title": "ship"]), baseVersion: nil)])
            #expect(await danHeard.waitFor(.changed(table: "todos")))
            _ = try await (try await live.remote("carol")).push([Self.insert("n2", "notes", ["text": "carol's"])])
            let beforeOwn = await carolHeard.consume(through: .changed(table: "notes"))
            #expect(beforeOwn?.contains(.changed(table: "todos")) == false, "carol heard of a list she left")
            for log in [aliceHeard, bobHeard, carolHeard, danHeard, erinHeard] { await log.stop() }
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
