import AsyncHTTPClient
import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// The operator's console (`/admin`) over a live server, read as HTML. The headless browser
/// test (`make console-test`) drives the same page through Chromium.
@Suite("Server: the operator's console")
struct ConsoleTests {
    static func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    /// Signs in with `key`; returns the answer and its session cookie, if any. The client
    /// does not follow the redirection, which would drop the cookie.
    static func signIn(_ base: String, key: String) async throws -> (RawResponse, String?) {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        let answer: RawResponse
        do {
            answer = try await http(.POST, base + "/admin/login", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                    body: Array("key=\(key.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)".utf8),
                                    client: client)
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
        let cookie = answer.headers.first { $0.0.lowercased() == "set-cookie" }?.1.split(separator: ";").first.map(String.init)
        return (answer, cookie)
    }

    @Test("it refuses without the key, signs in with it, and shows channels, counters, tables and refusals, never a row's fields")
    func signInAndDashboard() async throws {
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: false)) { live in
            let base = live.baseURL
            _ = try await live.remote("alice").push([
                Self.insert("lists", "L1", ["name": "groceries"]),
                Self.insert("list_members", "m-bob", ["list_id": "L1", "user_id": "bob"]),
            ])
            _ = try await live.remote("bob").push([Self.insert("todos", "T1", ["list_id": "L1", "title": "milk"])])
            let refused = try await live.remote("carol").push([Self.insert("todos", "T2", ["list_id": "L1", "title": "secret"])])
            guard case .rejected(_, 403) = refused.first?.outcome else { Issue.record("carol's write was not refused"); return }

            let anonymous = try await http(.GET, base + "/admin")
            #expect(anonymous.status == 401)
            #expect(anonymous.text.contains("action=\"/admin/login\""))
            #expect(anonymous.headers.contains { $0.0.lowercased() == "content-security-policy" })
            let (wrong, noCookie) = try await Self.signIn(base, key: "not the key")
            #expect(wrong.status == 401 && noCookie == nil)
            #expect(wrong.text.contains("That is not the admin key."))
            let (right, cookie) = try await Self.signIn(base, key: testAdminKey)
            #expect(right.status == 303)
            let session = try #require(cookie)

            let page = try await http(.GET, base + "/admin", headers: [("Cookie", session)])
            #expect(page.status == 200)
            let html = page.text
            #expect(html.contains("<tr><td>todos</td><td class=\"num\">1</td><td class=\"num\">0</td></tr>"))
            #expect(html.contains("<tr><td>lists</td><td class=\"num\">1</td>"))
            #expect(html.contains("<td>carol</td><td>todos</td><td>insert</td><td>T2</td>"))
            #expect(html.contains("rule refusals (403)</td><td class=\"num\">1</td>"))
            #expect(html.contains("pushed operations: applied</td><td class=\"num\">3</td>"))
            for content in ["groceries", "milk", "secret"] { #expect(!html.contains(content), "the page shows a row's field: \(content)") }
            // The admin key itself opens it too (a script's way); a forged or foreign cookie does not.
            #expect(try await http(.GET, base + "/admin", headers: [("X-Admin-Key", testAdminKey)]).status == 200)
            let forged = session.replacingOccurrences(of: ".", with: ".0")
            #expect(try await http(.GET, base + "/admin", headers: [("Cookie", forged)]).status == 401)
            let expired = "osync_console=1.\(String(repeating: "0", count: 64))"
            #expect(try await http(.GET, base + "/admin", headers: [("Cookie", expired)]).status == 401)
        }
    }

    @Test("a server without an admin key has no console")
    func noAdminKeyNoConsole() async throws {
        try await LiveServer.with(configure: { $0.adminKey = nil }) { (live: LiveServer) async throws -> Void in
            let page = try await http(.GET, live.baseURL + "/admin")
            let signIn = try await Self.signIn(live.baseURL, key: "anything").0
            #expect(page.status == 404 && signIn.status == 404)
        }
    }

    /// The seeded differential test's workload (`sharedListsRandomStep`) for four identities,
    /// then every identity asked about every stored row: the console's read decision is
    /// exactly whether the rules' independent oracle lets that identity read the row.
    @Test("the console's explainer agrees with the rules on the differential test's seeded data, for every identity and row")
    func explainerMatchesTheRules() async throws {
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: false)) { live in
            let identities = ["ann", "ben", "cat", "dan"]
            var clients: [SyncContext] = []
            for identity in identities {
                let context = try await SyncContext(store: InMemoryStore(), remote: try await live.remote(identity))
                for table in sharedListsTables { try await context.defineTable(TableSchema(table)) }
                clients.append(context)
            }
            var random = SplitMix64(seed: 7)
            var lists: [String] = []
            for step in 0..<60 {
                let index = step % identities.count
                if try await !sharedListsRandomStep(clients[index], who: identities[index], identities: identities, step: step,
                                                    lists: &lists, random: &random) {
                    try await sharedListsSync(clients[index])
                }
            }
            for client in clients { try await sharedListsSync(client) }
            let stored = try await live.store.read { txn in
                try sharedListsTables.flatMap { table in
                    try txn.records(in: table, matching: .all).filter { !$0.deleted }.map { (table, $0.id) }
                }
            }
            #expect(stored.count > 10, "the seeded workload stored \(stored.count) rows")
            for identity in identities {
                let readable = try await sharedListsOracle(serverStore: live.store, identity: identity)
                for (table, id) in stored {
                    let query = "identity=\(identity)&table=\(table)&id=\(id)"
                    let page = try await http(.GET, live.baseURL + "/admin?" + query, headers: [("X-Admin-Key", testAdminKey)]).text
                    let expected = readable[table]?[id] != nil
                    #expect(page.contains("<tr data-operation=\"read\" data-allowed=\"\(expected)\">"), "\(identity), \(table)/\(id)")
                }
            }
            for client in clients { try await client.close() }
        }
    }
}
