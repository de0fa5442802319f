import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// Two identities whose texts differ only in Unicode normalisation are two users on every
/// route and through every grant: Swift's `String` equality would make them one.
@Suite("Identities are compared by their bytes: canonically equivalent spellings are two users")
struct IdentityExactnessTests {
    /// "josé" with é precomposed (U+00E9) and decomposed (e + U+0301): equal as Swift strings.
    static let composed = "jos\u{E9}", decomposed = "jose\u{301}"
    /// "Kate" and the same text with U+212A KELVIN SIGN, whose canonical decomposition is "K":
    /// equal as Swift strings, and both valid Cognito identity ids' look-alikes.
    static let plainK = "Kate", kelvinK = "\u{212A}ate"

    /// Owner, member (by id and by a field), identity-field and owner-of grants, over shared
    /// storage (one row per item, the owner in a column).
    static let rules = SyncRules(
        memberships: ["list_members": Membership(table: "list_members", member: "user_id", group: "list_id")],
        tables: [
            "lists": TableRules(read: [Grant(.owner), Grant(.member("list_members", key: SystemField.id, roles: nil))],
                                write: [Grant(.owner)]),
            "todos": TableRules(read: [Grant(.member("list_members", key: "list_id", roles: nil))],
                                write: [Grant(.member("list_members", key: "list_id", roles: nil))]),
            "list_members": TableRules(read: [Grant(.identityField("user_id")), Grant(.ownerOf("lists", key: "list_id"))],
                                       write: [Grant(.ownerOf("lists", key: "list_id"))]),
            "notes": TableRules(read: [Grant(.identityField("user_id"))], write: [Grant(.identityField("user_id"))]),
            "diary": TableRules(read: [Grant(.owner)], write: [Grant(.owner)]),
            "signals": TableRules(read: [Grant(.owner)], write: [Grant(.owner)]),
        ])

    static func insert(_ id: String, _ table: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    static func applied(_ results: [PushResult]) -> Bool {
        results.allSatisfy { if case .applied = $0.outcome { true } else { false } }
    }

    @Test("the spellings are one Swift string but two identities")
    func spellings() throws {
        #expect(Self.composed == Self.decomposed && Self.plainK == Self.kelvinK, "the fixtures must be canonically equivalent")
        #expect(try Identity(Self.composed) != Identity(Self.decomposed))
        #expect(try Identity(Self.plainK) != Identity(Self.kelvinK))
        #expect(try Set([Identity(Self.composed), Identity(Self.decomposed)]).count == 2)
        #expect(try Claims(identity: Identity(Self.composed)) != Claims(identity: Identity(Self.decomposed)))
        for bad in ["", "a\u{0}b", "tab\there", "del\u{7F}", "c1\u{85}", String(repeating: "x", count: 257)] {
            #expect(throws: SyncError.self) { try Identity(bad) }
        }
        #expect(try Identity(String(repeating: "é", count: 128)).text.utf8.count == 256)
    }

    @Test("native pulls and pushes, through owner, member, identity-field and owner-of grants, keep the spellings apart")
    func nativeRoutes() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            let first = try await live.remote(Self.composed), second = try await live.remote(Self.decomposed)
            #expect(Self.applied(try await first.push([
                Self.insert("L1", "lists", ["name": "groceries"]),
                Self.insert("m1", "list_members", ["list_id": "L1", "user_id": .string(Self.composed)]),
                Self.insert("t1", "todos", ["list_id": "L1", "title": "milk"]),
                Self.insert("n1", "notes", ["user_id": .string(Self.composed), "text": "private"]),
                Self.insert("d1", "diary", ["text": "dear diary"]),
            ])))
            for table in ["lists", "todos", "list_members", "notes", "diary"] {
                #expect(try await first.pull(PullRequest(table: table)).records.count == 1, "the owner reads its \(table)")
                #expect(try await second.pull(PullRequest(table: table)).records.isEmpty, "the other spelling read \(table)")
            }

            // Writes through each grant: an update of the owner's list, of a member's todo, of an
            // identity-field note, and a membership added to a list the caller does not own.
            let attempts: [PushOperation] = [
                PushOperation(id: "w1", table: "lists", itemId: "L1", kind: .update, item: Record(id: "L1", fields: ["name": "taken"]), baseVersion: nil),
                PushOperation(id: "w2", table: "todos", itemId: "t1", kind: .update,
                              item: Record(id: "t1", fields: ["list_id": "L1", "title": "taken"]), baseVersion: nil),
                PushOperation(id: "w3", table: "notes", itemId: "n1", kind: .update,
                              item: Record(id: "n1", fields: ["user_id": .string(Self.decomposed), "text": "taken"]), baseVersion: nil),
                Self.insert("m2", "list_members", ["list_id": "L1", "user_id": .string(Self.decomposed)]),
                PushOperation(id: "w5", table: "notes", itemId: "n1", kind: .delete, item: nil, baseVersion: nil),
            ]
            for attempt in attempts {
                let result = try await second.push([attempt])
                if case .applied = result.first?.outcome { Issue.record("the other spelling's \(attempt.id) was applied") }
            }
            #expect(try await first.pull(PullRequest(table: "lists")).records.first?["name"] == "groceries")
            #expect(try await first.pull(PullRequest(table: "todos")).records.first?["title"] == "milk")
            #expect(try await first.pull(PullRequest(table: "notes")).records.first?["text"] == "private")
            #expect(try await first.pull(PullRequest(table: "list_members")).records.map(\.id) == ["m1"])
            #expect(try await second.pull(PullRequest(table: "todos")).records.isEmpty)
        }
    }

    @Test("the tables API keeps the spellings apart: reads, counts and writes")
    func tablesRoutes() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            let first = try await live.remote(Self.composed)
            #expect(Self.applied(try await first.push([
                Self.insert("L1", "lists", ["name": "groceries"]),
                Self.insert("n1", "notes", ["user_id": .string(Self.composed), "text": "private"]),
            ])))
            let second = TablesClient(baseURL: live.baseURL, token: try await live.token(Self.decomposed))
            let read = try await second.send(.GET, "/tables/lists/L1")
            #expect(read.status == 404)
            #expect(!read.text.contains("groceries"))
            let listed = try await second.send(.GET, "/tables/notes?$count=true")
            #expect(listed.status == 200)
            #expect(!listed.text.contains("private"))
            if let json = try? JSON.parse(listed.body), case .number(let count)? = json["count"] { #expect(count == "0") }
            #expect(try await second.send(.PUT, "/tables/lists/L1", json: #"{"id":"L1","name":"taken"}"#).status == 404)
            #expect(try await second.send(.DELETE, "/tables/notes/n1").status == 404)
            #expect(try await first.pull(PullRequest(table: "lists")).records.first?["name"] == "groceries")
            #expect(try await first.pull(PullRequest(table: "notes")).records.first?["text"] == "private")
        }
    }

    @Test("change notices reach only the identity spelled as the writer's: owner-only storage and shared storage")
    func notices() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            let second = try await live.remote(Self.decomposed)
            let heard = EventLog(second.changes())
            #expect(await heard.waitFor(.subscribed))
            let first = try await live.remote(Self.composed)
            #expect(Self.applied(try await first.push([
                Self.insert("d1", "diary", ["text": "dear diary"]),
                Self.insert("n1", "notes", ["user_id": .string(Self.composed), "text": "private"]),
            ])))
            // The second spelling's own change, through another client of its own, is the next
            // thing it hears: nothing of the first's came before it.
            _ = try await (try await live.remote(Self.decomposed)).push([Self.insert("s1", "signals", ["text": "mine"])])
            let before = await heard.consume(through: .changed(table: "signals"))
            #expect(before == [], "the other spelling heard of the first's writes")
            await heard.stop()
        }
    }

    @Test("the Cognito routes refuse a token whose identity only looks like the path's")
    func cognitoRoutes() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            let pool = "us-east-1:00000000-0000-0000-0000-0000000000bb"
            let owner = try await live.token(Self.plainK), lookalike = try await live.token(Self.kelvinK)
            let path = "/identitypools/\(encode(pool))/identities/\(encode(Self.plainK))/datasets/settings"
            let session = try await http(.GET, live.baseURL + path + "/records", headers: [("Authorization", "Bearer \(owner)")])
            #expect(session.status == 200)
            let listed = try await http(.GET, live.baseURL + "/identitypools/\(encode(pool))/identities/\(encode(Self.plainK))/datasets",
                                        headers: [("Authorization", "Bearer \(lookalike)")])
            #expect(listed.status == 403, "a look-alike identity reached another's datasets (\(listed.status))")
            let records = try await http(.GET, live.baseURL + path + "/records", headers: [("Authorization", "Bearer \(lookalike)")])
            #expect(records.status == 403)
        }
    }
}
