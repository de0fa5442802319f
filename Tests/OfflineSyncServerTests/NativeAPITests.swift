import Foundation
import JWTKit
import NIOHTTP1
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncWire
import Testing

@Suite("Server: native API, auth and limits")
struct NativeAPITests {
    static let pushBody = Array(#"{"operations":[{"id":"op-1","table":"todos","itemId":"a","kind":"insert","item":{"id":"a","fields":{"title":"x"}}}]}"#.utf8)
    static let pullBody = Array(#"{"table":"todos","limit":10}"#.utf8)

    @Test("health answers without credentials")
    func health() async throws {
        try await LiveServer.with { live in
            let response = try await http(.GET, live.baseURL + "/health")
            #expect(response.status == 200)
            #expect(response.text == #"{"status":"ok"}"#)
        }
    }

    @Test("push and pull need a valid token: missing, malformed, forged, expired, alg none, other issuer → 401")
    func tokens() async throws {
        try await LiveServer.with { live in
            let forger = try await TokenAuthority(secret: Array("another secret that is long enough!!".utf8))
            let forged = try await forger.mint(identity: "alice")
            let expired = try await live.server.tokens.mint(identity: "alice", lifetime: .seconds(60),
                                                            now: Date(timeIntervalSinceNow: -3600))
            let valid = try await live.token("alice")
            // An unsigned token with the same claims.
            let parts = valid.split(separator: ".")
            let none = Data(#"{"alg":"none","typ":"JWT"}"#.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            let unsigned = "\(none).\(parts[1])."
            // Right key, wrong issuer.
            let keys = JWTKeyCollection()
            await keys.add(hmac: HMACKey(from: testSecret), digestAlgorithm: .sha256)
            struct Claims: JWTPayload {
                var sub: SubjectClaim, iss: IssuerClaim, iat: IssuedAtClaim, exp: ExpirationClaim
                func verify(using algorithm: some JWTAlgorithm) async throws {}
            }
            let otherIssuer = try await keys.sign(Claims(sub: "alice", iss: "someone-else", iat: .init(value: Date()),
                                                         exp: .init(value: Date(timeIntervalSinceNow: 3600))))
            let headers: [[(String, String)]] = [
                [], [("Authorization", "Bearer")], [("Authorization", "Basic YWxpY2U6eA==")], [("Authorization", "Bearer garbage")],
                [("Authorization", "Bearer \(forged)")], [("Authorization", "Bearer \(expired)")],
                [("Authorization", "Bearer \(unsigned)")], [("Authorization", "Bearer \(otherIssuer)")],
            ]
            for (path, body) in [("/v1/push", Self.pushBody), ("/v1/pull", Self.pullBody)] {
                for header in headers {
                    let response = try await http(.POST, live.baseURL + path, headers: header, body: body)
                    #expect(response.status == 401, "\(path) with \(header.map(\.1))")
                    #expect(response.errorCode == "unauthorized")
                    #expect(response.header("WWW-Authenticate") == "Bearer")
                    #expect(response.text == #"{"error":{"code":"unauthorized","message":"missing or invalid credentials"}}"#,
                            "the same answer for every refusal: no detail leaks")
                }
                let ok = try await http(.POST, live.baseURL + path, headers: [("Authorization", "Bearer \(valid)")], body: body)
                #expect(ok.status == 200, "\(path): \(ok.text)")
            }
            // Nothing a refused request sent was applied.
            let page = try await live.remote("alice").pull(PullRequest(table: "todos"))
            #expect(page.records.map(\.id) == ["a"])
        }
    }

    @Test("limits: body, batch and page size are clear 4xx; bad JSON and bad shapes are 400")
    func limits() async throws {
        try await LiveServer.with(configure: { $0.maxBodyBytes = 4096; $0.maxBatchSize = 3; $0.maxPageSize = 50 }) { live in
            let auth = [("Authorization", "Bearer \(try await live.token("alice"))")]
            let big = Array(#"{"operations":[{"id":"1","table":"t","itemId":"a","kind":"insert","item":{"id":"a","s":""#.utf8)
                + Array(repeating: UInt8(ascii: "x"), count: 5000) + Array(#""}}]}"#.utf8)
            let tooBig = try await http(.POST, live.baseURL + "/v1/push", headers: auth, body: big)
            #expect(tooBig.status == 413)
            #expect(tooBig.errorCode == "bodyTooLarge")

            let ops = (1...4).map { #"{"id":"o\#($0)","table":"t","itemId":"i\#($0)","kind":"insert","item":{"id":"i\#($0)"}}"# }
            let batch = try await http(.POST, live.baseURL + "/v1/push", headers: auth,
                                       body: Array(#"{"operations":[\#(ops.joined(separator: ","))]}"#.utf8))
            #expect(batch.status == 413)
            #expect(batch.errorCode == "batchTooLarge")

            let page = try await http(.POST, live.baseURL + "/v1/pull", headers: auth, body: Array(#"{"table":"t","limit":51}"#.utf8))
            #expect(page.status == 400)
            #expect(page.errorCode == "pageSizeExceeded")

            for body in ["{", #"{"operations":"x"}"#, #"{"operations":[{"id":"1"}]}"#, "[1,2]", "\u{FF}"] {
                let response = try await http(.POST, live.baseURL + "/v1/push", headers: auth, body: Array(body.utf8))
                #expect(response.status == 400, "\(body): \(response.text)")
            }
            let duplicate = try await http(.POST, live.baseURL + "/v1/push", headers: auth,
                                           body: Array(#"{"operations":[\#(ops[0]),\#(ops[0])]}"#.utf8))
            #expect(duplicate.status == 400)
            let cursor = try await http(.POST, live.baseURL + "/v1/pull", headers: auth, body: Array(#"{"table":"t","cursor":"nope","limit":10}"#.utf8))
            #expect(cursor.status == 400)
            #expect(cursor.errorCode == "invalidCursor")
            // Nothing refused was applied.
            let remote = try await live.remote("alice")
            #expect(try await remote.pull(PullRequest(table: "t", limit: 10)).records.isEmpty)
            // The client maps refusals to typed errors.
            await #expect(throws: SyncError(.limitExceeded, "'limit' may be at most 50")) {
                try await remote.pull(PullRequest(table: "t", limit: 51))
            }
        }
    }

    @Test("operator routes need the admin key; a minted token works")
    func admin() async throws {
        try await LiveServer.with { live in
            let body = Array(#"{"identity":"carol","lifetimeSeconds":600}"#.utf8)
            for headers in [[], [("X-Admin-Key", "wrong")], [("X-Admin-Key", "")],
                            [("Authorization", "Bearer \(try await live.token("carol"))")]] {
                let refused = try await http(.POST, live.baseURL + "/v1/admin/tokens", headers: headers, body: body)
                #expect(refused.status == 401)
            }
            let minted = try await http(.POST, live.baseURL + "/v1/admin/tokens", headers: [("X-Admin-Key", testAdminKey)], body: body)
            #expect(minted.status == 200)
            guard case .string(let token)? = try JSON.parse(minted.body)["token"] else { Issue.record("no token"); return }
            let pull = try await http(.POST, live.baseURL + "/v1/pull", headers: [("Authorization", "Bearer \(token)")], body: Self.pullBody)
            #expect(pull.status == 200)
            let prune = try await http(.POST, live.baseURL + "/v1/admin/prune", headers: [("X-Admin-Key", testAdminKey)],
                                       body: Array(#"{"olderThanSeconds":0}"#.utf8))
            #expect(prune.status == 200)
            let noAdmin = try await LiveServer.with(configure: { $0.adminKey = nil }) { other in
                try await http(.POST, other.baseURL + "/v1/admin/tokens", headers: [("X-Admin-Key", "")], body: body)
            }
            #expect(noAdmin.status == 401)
        }
    }

    @Test("Prefer: return=minimal leaves out the records an applied insert or update echoes; without it, or for a delete, they are sent")
    func minimalPushAnswers() async throws {
        try await LiveServer.with { live in
            let auth = ("Authorization", "Bearer \(try await live.token("alice"))")
            func push(_ body: String, prefer: String?) async throws -> (RawResponse, [JSON]) {
                let headers = [auth] + (prefer.map { [("Prefer", $0)] } ?? [])
                let answer = try await http(.POST, live.baseURL + "/v1/push", headers: headers, body: Array(body.utf8))
                guard answer.status == 200, case .array(let results)? = try JSON.parse(answer.body)["results"] else {
                    Issue.record("push answered \(answer.status): \(answer.text)"); return (answer, [])
                }
                return (answer, results)
            }
            let insert = #"{"operations":[{"id":"op-1","table":"todos","itemId":"a","kind":"insert","item":{"id":"a","fields":{"title":"x é"}}},"#
                + #"{"id":"op-2","table":"todos","itemId":"a","kind":"insert","item":{"id":"a","fields":{"title":"y"}}}]}"#
            let (minimal, results) = try await push(insert, prefer: "respond-async, RETURN=minimal; x=1")
            #expect(minimal.header("Preference-Applied") == "return=minimal")
            #expect(results.map { $0["record"] != nil } == [false, true], "the conflict carries the server's copy")
            #expect(results.first?["version"] != nil && results.first?["deleted"] == .bool(false))
            // The same batch again: the stored outcomes, minimal again; without the preference, whole.
            let (_, replayed) = try await push(insert, prefer: "return=minimal")
            #expect(replayed.map { $0["record"] != nil } == [false, true])
            let (whole, wholeResults) = try await push(insert, prefer: nil)
            #expect(whole.header("Preference-Applied") == nil)
            #expect(wholeResults.map { $0["record"] != nil } == [true, true])
            #expect(wholeResults.first?["record"]?["version"] == results.first?["version"])
            let (_, deleted) = try await push(#"{"operations":[{"id":"op-3","table":"todos","itemId":"a","kind":"delete"}]}"#,
                                              prefer: "return=minimal")
            #expect(deleted.first?["record"]?["deleted"] == .bool(true), "a delete's record is the server's: always sent")
            // The client asks for it and rebuilds what the whole answer would have carried.
            let remote = try await live.remote("alice")
            let operation = PushOperation(id: "op-4", table: "todos", itemId: "b", kind: .insert,
                                          item: Record(id: "b", fields: ["title": .string("e\u{301}"), "n": .int(1)]), baseVersion: nil)
            let pushed = try await remote.push([operation])
            let again = try await http(.POST, live.baseURL + "/v1/push", headers: [auth], body: Wire.encode(operations: [operation]))
            guard case .array(let stored)? = try JSON.parse(again.body)["results"] else { Issue.record("no results"); return }
            #expect(try pushed == [Wire.result(stored[0])])
        }
    }

    @Test("an unreachable server is a transient error after the retries")
    func unreachable() async throws {
        // Bind and close a port so that nothing listens on it.
        let port = try await LiveServer.with { $0.running.port }
        let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(port)",
                                     configuration: .init(requestTimeout: .seconds(2), maxAttempts: 3, initialBackoff: .milliseconds(10)),
                                     token: { "x" })
        do {
            _ = try await remote.pull(PullRequest(table: "t"))
            Issue.record("a pull from a closed port succeeded")
        } catch let error as SyncError {
            #expect(error.code == .transient)
        }
    }

    @Test("change notifications reach the identity's subscribers only, and the channel reconnects")
    func notifications() async throws {
        try await LiveServer.with { live in
            let alice = try await live.remote("alice")
            let bob = try await live.remote("bob")
            var aliceEvents = alice.changes().makeAsyncIterator()
            var bobEvents = bob.changes().makeAsyncIterator()
            #expect(await aliceEvents.next() == .subscribed)
            #expect(await bobEvents.next() == .subscribed)
            // Each writes through another client of theirs: a client does not hear its own pushes.
            let aliceElsewhere = try await live.remote("alice"), bobElsewhere = try await live.remote("bob")
            _ = try await aliceElsewhere.push([PushOperation(id: "1", table: "todos", itemId: "a", kind: .insert, item: Record(id: "a"), baseVersion: nil)])
            _ = try await bobElsewhere.push([PushOperation(id: "2", table: "notes", itemId: "b", kind: .insert, item: Record(id: "b"), baseVersion: nil)])
            #expect(await aliceEvents.next() == .changed(table: "todos"))
            #expect(await bobEvents.next() == .changed(table: "notes"), "bob never hears of alice's table")
            // A push that changes nothing (a conflict) announces nothing.
            _ = try await aliceElsewhere.push([PushOperation(id: "3", table: "todos", itemId: "a", kind: .insert, item: Record(id: "a"), baseVersion: nil)])
            _ = try await aliceElsewhere.push([PushOperation(id: "4", table: "later", itemId: "c", kind: .insert, item: Record(id: "c"), baseVersion: nil)])
            #expect(await aliceEvents.next() == .changed(table: "later"))
        }
    }
}
