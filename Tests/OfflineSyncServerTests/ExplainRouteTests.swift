import Foundation
import OfflineSync
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// `POST /v1/admin/explain` over a live server: only the admin key asks, and its answer is the
/// service's explanation, which says what the rules decide for the pulls of the same server.
@Suite("Server: the rules explainer's admin route")
struct ExplainRouteTests {
    static func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    @Test("without the admin key it is 401; with it, each identity's answer agrees with what that identity pulls")
    func explainsOverHTTP() async throws {
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: false)) { live in
            _ = try await live.remote("alice").push([
                Self.insert("lists", "L1", ["name": "groceries"]),
                Self.insert("list_members", "m-bob", ["list_id": "L1", "user_id": "bob"]),
            ])
            _ = try await live.remote("bob").push([Self.insert("todos", "T1", ["list_id": "L1", "title": "milk"])])
            func ask(_ identity: String, headers: [(String, String)] = [("X-Admin-Key", testAdminKey)], body: String? = nil) async throws -> RawResponse {
                try await http(.POST, live.baseURL + "/v1/admin/explain", headers: headers,
                               body: Array((body ?? #"{"identity":"\#(identity)","table":"todos","id":"T1"}"#).utf8))
            }
            for headers in [[], [("X-Admin-Key", "wrong")], [("Authorization", "Bearer \(try await live.token("bob"))")]] {
                #expect(try await ask("bob", headers: headers).status == 401)
            }
            #expect(try await ask("bob", body: #"{"identity":"bob","table":"todos"}"#).status == 400)
            #expect(try await ask("bob", body: #"{"identity":"bob","table":"todos","id":"T1","roles":"admin"}"#).status == 400)
            for identity in ["alice", "bob", "carol"] {
                let answer = try await ask(identity)
                #expect(answer.status == 200)
                let document = try JSON.parse(answer.body)
                guard case .array(let decisions)? = document["decisions"], case .bool(let readable)? = decisions.first?["allowed"] else {
                    Issue.record("\(identity): \(answer.text)")
                    continue
                }
                #expect(decisions.first?["operation"] == .string("read"))
                let pulled = try await live.remote(identity).pull(PullRequest(table: "todos"))
                #expect(readable == pulled.records.contains { $0.id == "T1" }, "\(identity): \(answer.text)")
                let expected = try await live.server.service.explain(claims: Claims(identity: try Identity(identity)), table: "todos", id: "T1")
                #expect(decisions.count == expected.decisions.count)
                for (decision, wanted) in zip(decisions, expected.decisions) {
                    #expect(decision["allowed"] == .bool(wanted.allowed))
                    guard case .array(let grants)? = decision["grants"] else { Issue.record("no grants"); continue }
                    #expect(grants.map { $0["reason"] } == wanted.grants.map { .string($0.reason) })
                }
            }
            let carol = try JSON.parse(try await ask("carol").body)
            guard case .array(let decisions)? = carol["decisions"], case .array(let grants)? = decisions.first?["grants"] else {
                Issue.record("no decisions for carol"); return
            }
            #expect(grants.first?["reason"] == .string("no live row of 'list_members' has 'user_id' = 'carol' and 'list_id' = 'L1'"))
        }
    }
}
