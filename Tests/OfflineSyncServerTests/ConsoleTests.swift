import AsyncHTTPClient
import Foundation
import NIOCore
import OfflineSync
import OfflineSyncConformance
@testable import OfflineSyncServer
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

    /// Signs in with `key` (and `headers`); returns the answer and its session cookie
    /// (`name=value`), if any. The client does not follow the redirection, which would drop
    /// the cookie.
    static func signIn(_ base: String, key: String, headers: [(String, String)] = []) async throws -> (RawResponse, String?) {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        let answer: RawResponse
        do {
            answer = try await http(.POST, base + "/admin/login", headers: [("Content-Type", "application/x-www-form-urlencoded")] + headers,
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
            // Signed with the key but ended, or not ended but signed with another key; the same
            // cookie signed with the key opens the page, so the format is the one refused above.
            let ended = ConsoleSession(expiry: 1, id: String(repeating: "a", count: 32))
            let endedCookie = "osync_console=1.\(ended.id).\(ended.signature(adminKey: testAdminKey))"
            #expect(try await http(.GET, base + "/admin", headers: [("Cookie", endedCookie)]).status == 401)
            let later = ConsoleSession(expiry: 9_999_999_999, id: String(repeating: "b", count: 32))
            let foreign = "osync_console=9999999999.\(later.id).\(later.signature(adminKey: "another key"))"
            #expect(try await http(.GET, base + "/admin", headers: [("Cookie", foreign)]).status == 401)
            let signed = "osync_console=9999999999.\(later.id).\(later.signature(adminKey: testAdminKey))"
            #expect(try await http(.GET, base + "/admin", headers: [("Cookie", signed)]).status == 200)
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

    /// Whether an answer's `Set-Cookie` carries the `Secure` attribute.
    static func isSecure(_ answer: RawResponse) throws -> Bool {
        let cookie = try #require(answer.header("Set-Cookie"))
        return cookie.split(separator: ";").contains { $0.trimmingCharacters(in: .whitespaces) == "Secure" }
    }

    @Test("the session cookie is Secure over TLS, from a trusted proxy saying https, or as configured; never for a header from anyone else")
    func secureCookie() async throws {
        let https = [("X-Forwarded-Proto", "https")]
        try await LiveServer.with { (live: LiveServer) async throws -> Void in
            let plain = try await Self.signIn(live.baseURL, key: testAdminKey).0
            #expect(plain.status == 303)
            #expect(try !Self.isSecure(plain))
            // Loopback is no trusted proxy here, and whoever connects can write the header.
            let claimed = try await Self.signIn(live.baseURL, key: testAdminKey, headers: https).0
            #expect(try !Self.isSecure(claimed))
        }
        let loopback = try TrustedProxies(["127.0.0.0/8", "::1"])
        try await LiveServer.with(configure: { $0.trustedProxies = loopback }) { (live: LiveServer) async throws -> Void in
            let proxied = try await Self.signIn(live.baseURL, key: testAdminKey, headers: https)
            #expect(try Self.isSecure(proxied.0))
            let overHTTP = try await Self.signIn(live.baseURL, key: testAdminKey, headers: [("X-Forwarded-Proto", "http")]).0
            #expect(try !Self.isSecure(overHTTP))
            // A client's own "https" before the value the proxy wrote is not believed.
            let spoofed = try await Self.signIn(live.baseURL, key: testAdminKey, headers: [("X-Forwarded-Proto", "https, http")]).0
            #expect(try !Self.isSecure(spoofed))
            let direct = try await Self.signIn(live.baseURL, key: testAdminKey).0
            #expect(try !Self.isSecure(direct))
            // Signing out clears the cookie with the same attribute.
            let session = try #require(proxied.1)
            let out = try await http(.POST, live.baseURL + "/admin/logout", headers: [("Cookie", session)] + https)
            #expect(out.status == 200)
            #expect(try Self.isSecure(out))
        }
        try await LiveServer.with(configure: { $0.consoleSecureCookie = .always }) { (live: LiveServer) async throws -> Void in
            let answer = try await Self.signIn(live.baseURL, key: testAdminKey).0
            #expect(try Self.isSecure(answer))
        }
        try await LiveServer.with(configure: {
            $0.trustedProxies = loopback
            $0.consoleSecureCookie = .never
        }) { (live: LiveServer) async throws -> Void in
            let answer = try await Self.signIn(live.baseURL, key: testAdminKey, headers: https).0
            #expect(try !Self.isSecure(answer))
        }
        // Over TLS the HTTP layer gives the request the scheme https (this server's listener is
        // plain HTTP, so that case is checked on the decision itself).
        #expect(Routes.consoleCookieIsSecure(.auto, scheme: "https", fromTrustedProxy: false, forwardedProto: []))
        #expect(!Routes.consoleCookieIsSecure(.auto, scheme: "http", fromTrustedProxy: false, forwardedProto: ["https"]))
        // The proxy that connected appends its own value: the last one is what the server can
        // believe; one further left is whatever reached that proxy (a client can write it).
        #expect(Routes.consoleCookieIsSecure(.auto, scheme: "http", fromTrustedProxy: true, forwardedProto: ["http, https"]))
        #expect(!Routes.consoleCookieIsSecure(.auto, scheme: "http", fromTrustedProxy: true, forwardedProto: ["https, http"]))
        #expect(Routes.consoleCookieIsSecure(.auto, scheme: "http", fromTrustedProxy: true, forwardedProto: ["http", "https"]))
        #expect(!Routes.consoleCookieIsSecure(.auto, scheme: "http", fromTrustedProxy: true, forwardedProto: ["https", "http"]))
        #expect(!Routes.consoleCookieIsSecure(.auto, scheme: "http", fromTrustedProxy: true, forwardedProto: ["https,"]))
        #expect(!Routes.consoleCookieIsSecure(.never, scheme: "https", fromTrustedProxy: true, forwardedProto: ["https"]))
    }

    @Test("signing out ends the session: a copy of its cookie is refused, also by a server restarted over the same store, and other sessions live on")
    func signOutRevokesTheSession() async throws {
        try await withTemporaryDirectory { directory in
            var signedOut = "", kept = ""
            let first = try await LiveServer.start(in: directory)
            do {
                let signedInA = try await Self.signIn(first.baseURL, key: testAdminKey)
                let signedInB = try await Self.signIn(first.baseURL, key: testAdminKey)
                let a = try #require(signedInA.1), b = try #require(signedInB.1)
                #expect(a != b)
                #expect(try await http(.GET, first.baseURL + "/admin", headers: [("Cookie", a)]).status == 200)
                let out = try await http(.POST, first.baseURL + "/admin/logout", headers: [("Cookie", a)])
                #expect(out.status == 200)
                #expect(out.header("Set-Cookie")?.hasPrefix("osync_console=;") == true)
                // The browser forgets the cookie; a copy of it (another tab's, a thief's) is refused from now on.
                #expect(try await http(.GET, first.baseURL + "/admin", headers: [("Cookie", a)]).status == 401)
                #expect(try await http(.POST, first.baseURL + "/admin/logout", headers: [("Cookie", a)]).status == 401)
                #expect(try await http(.GET, first.baseURL + "/admin", headers: [("Cookie", b)]).status == 200)
                signedOut = a
                kept = b
                try await first.stop()
            } catch {
                try? await first.stop()
                throw error
            }
            // Another server over the same store file: the revocation is in the store, not in memory.
            let second = try await LiveServer.start(in: directory)
            do {
                #expect(try await http(.GET, second.baseURL + "/admin", headers: [("Cookie", signedOut)]).status == 401)
                #expect(try await http(.GET, second.baseURL + "/admin", headers: [("Cookie", kept)]).status == 200)
                try await second.stop()
            } catch {
                try? await second.stop()
                throw error
            }
        }
    }

    @Test("failed sign-ins are limited per client address: 429 with Retry-After and the key unchecked, counted by reason")
    func signInLimitPerAddress() async throws {
        let limits = ConsoleSignInLimits(perAddress: 3, addressWindow: .seconds(300), overall: 1000, overallWindow: .seconds(60))
        try await LiveServer.with(configure: { $0.consoleSignIns = limits }) { (live: LiveServer) async throws -> Void in
            let base = live.baseURL
            for _ in 0..<2 { #expect(try await Self.signIn(base, key: "a guess").0.status == 401) }
            // A sign-in that offers no key is no guess: it is not counted.
            let empty = try await http(.POST, base + "/admin/login", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: [])
            #expect(empty.status == 401)
            #expect(try await Self.signIn(base, key: "a third guess").0.status == 401)
            let limited = try await Self.signIn(base, key: "a fourth guess").0
            #expect(limited.status == 429)
            let retry = try #require(limited.header("Retry-After").flatMap { Int($0) })
            #expect((1...300).contains(retry))
            #expect(limited.text.contains("Too many failed sign-ins"))
            // Past the limit even the right key is not checked.
            let (right, cookie) = try await Self.signIn(base, key: testAdminKey)
            #expect(right.status == 429 && cookie == nil)
            // X-Forwarded-For from a peer that is no trusted proxy changes nothing.
            #expect(try await Self.signIn(base, key: testAdminKey, headers: [("X-Forwarded-For", "198.51.100.7")]).0.status == 429)
            // Every door that takes the key shares the limit: a script's X-Admin-Key is not
            // checked either, on the console or on /metrics.
            let page = try await http(.GET, base + "/admin", headers: [("X-Admin-Key", testAdminKey)])
            #expect(page.status == 429 && page.header("Retry-After") != nil)
            let scrape = try await http(.GET, base + "/metrics", headers: [("X-Admin-Key", testAdminKey)])
            #expect(scrape.status == 429 && scrape.errorCode == "unavailable")
            let metrics = try PrometheusText(String(decoding: live.server.metrics.exposition(), as: UTF8.self))
            #expect(metrics.value("offline_sync_console_signin_refused_total", ["reason": "wrong_key"]) == 3)
            #expect(metrics.value("offline_sync_console_signin_refused_total", ["reason": "rate_limited"]) == 5)
        }
    }

    @Test("behind a trusted proxy each client is counted by its forwarded address; past the overall limit only addresses that failed themselves wait")
    func signInLimitOverall() async throws {
        let proxies = try TrustedProxies(["127.0.0.1"])
        let limits = ConsoleSignInLimits(perAddress: 2, addressWindow: .seconds(300), overall: 4, overallWindow: .seconds(60))
        try await LiveServer.with(configure: {
            $0.consoleSignIns = limits
            $0.trustedProxies = proxies
        }) { (live: LiveServer) async throws -> Void in
            func signIn(from address: String, _ key: String) async throws -> Int {
                try await Self.signIn(live.baseURL, key: key, headers: [("X-Forwarded-For", address)]).0.status
            }
            #expect(try await signIn(from: "203.0.113.1", "guess") == 401)
            #expect(try await signIn(from: "203.0.113.1", "guess") == 401)
            #expect(try await signIn(from: "203.0.113.1", testAdminKey) == 429)
            // Another client behind the same proxy is not locked out by the first.
            #expect(try await signIn(from: "203.0.113.2", testAdminKey) == 303)
            #expect(try await signIn(from: "203.0.113.3", "guess") == 401)
            #expect(try await signIn(from: "2001:db8::1", "guess") == 401)
            // Four failures from all addresses together: an address that failed lately waits,
            // under its own limit though it is; one that did not (the operator's) is let in.
            #expect(try await signIn(from: "203.0.113.3", testAdminKey) == 429)
            #expect(try await signIn(from: "203.0.113.4", testAdminKey) == 303)
            #expect(try await signIn(from: "203.0.113.5", "guess") == 401)
            #expect(try await signIn(from: "203.0.113.5", testAdminKey) == 429)
        }
    }

    @Test("every door that compares a key shares one limit per address: X-Admin-Key on an operator route and the console, the metrics key, a forged session cookie; a request with no key is not counted")
    func everyKeyDoorIsLimited() async throws {
        let metricsKey = "metrics-key-for-scrapers-only-0123"
        let limits = ConsoleSignInLimits(perAddress: 4, addressWindow: .seconds(300), overall: 1000, overallWindow: .seconds(60))
        let proxies = try TrustedProxies(["127.0.0.1"])
        try await LiveServer.with(configure: {
            $0.consoleSignIns = limits
            $0.trustedProxies = proxies
            $0.metricsKey = metricsKey
        }) { (live: LiveServer) async throws -> Void in
            let base = live.baseURL, json = [("Content-Type", "application/json")]
            let prune = Array(#"{"olderThanSeconds":3155760000}"#.utf8)
            func from(_ address: String) -> [(String, String)] { [("X-Forwarded-For", address)] }
            let guesser = from("203.0.113.9")
            // A cookie of the console's form, unexpired, whose HMAC is not the admin key's:
            // checking it answers a guess at the key.
            let forged = "osync_console=9999999999.\(String(repeating: "c", count: 32)).\(String(repeating: "0", count: 64))"
            // Three wrong keys at three doors.
            #expect(try await http(.POST, base + "/v1/admin/prune", headers: guesser + json + [("X-Admin-Key", "guess-1")], body: prune).status == 401)
            #expect(try await http(.GET, base + "/metrics", headers: guesser + [("Authorization", "Bearer guess-2")]).status == 401)
            #expect(try await http(.GET, base + "/admin", headers: guesser + [("X-Admin-Key", "guess-3")]).status == 401)
            // Requests that offer no key (or an empty one) are no guesses: never counted.
            for _ in 0..<3 {
                #expect(try await http(.POST, base + "/v1/admin/prune", headers: guesser + json, body: prune).status == 401)
                #expect(try await http(.POST, base + "/v1/admin/prune", headers: guesser + json + [("X-Admin-Key", "")], body: prune).status == 401)
                #expect(try await http(.GET, base + "/metrics", headers: guesser).status == 401)
                #expect(try await http(.GET, base + "/admin", headers: guesser).status == 401)
            }
            // The right key from that address still passes (3 of 4), and does not clear the count.
            #expect(try await http(.POST, base + "/v1/admin/prune", headers: guesser + json + [("X-Admin-Key", testAdminKey)], body: prune).status == 200)
            #expect(try await http(.GET, base + "/admin", headers: guesser + [("Cookie", forged)]).status == 401)
            // Four wrong: the right key is no longer checked at any door.
            let limited = try await http(.POST, base + "/v1/admin/prune", headers: guesser + json + [("X-Admin-Key", testAdminKey)], body: prune)
            #expect(limited.status == 429 && limited.errorCode == "unavailable")
            let retry = try #require(limited.header("Retry-After").flatMap { Int($0) })
            #expect((1...300).contains(retry))
            #expect(try await http(.GET, base + "/metrics", headers: guesser + [("Authorization", "Bearer \(metricsKey)")]).status == 429)
            #expect(try await http(.GET, base + "/admin", headers: guesser + [("X-Admin-Key", testAdminKey)]).status == 429)
            #expect(try await Self.signIn(base, key: testAdminKey, headers: guesser).0.status == 429)
            // Still no count for a request without a key: 401, not 429.
            #expect(try await http(.GET, base + "/metrics", headers: guesser).status == 401)
            // Another address is not held back.
            let other = from("203.0.113.10")
            #expect(try await http(.GET, base + "/metrics", headers: other + [("Authorization", "Bearer \(metricsKey)")]).status == 200)
            #expect(try await http(.POST, base + "/v1/admin/prune", headers: other + json + [("X-Admin-Key", testAdminKey)], body: prune).status == 200)
            let metrics = try PrometheusText(String(decoding: live.server.metrics.exposition(), as: UTF8.self))
            #expect(metrics.value("offline_sync_console_signin_refused_total", ["reason": "wrong_key"]) == 4)
            #expect(metrics.value("offline_sync_console_signin_refused_total", ["reason": "rate_limited"]) == 4)
        }
    }

    @Test("a server listening beyond loopback warns at start when its console's cookie can never be Secure")
    func secureCookieWarning() throws {
        func warning(host: String, _ change: (inout SyncServer.Configuration) -> Void = { _ in }) -> String? {
            var configuration = SyncServer.Configuration(host: host, port: 0, tokenSecret: testSecret, adminKey: testAdminKey)
            change(&configuration)
            return SyncServer.secureCookieWarning(configuration)
        }
        #expect(warning(host: "0.0.0.0")?.contains("--trusted-proxy") == true)
        #expect(warning(host: "10.1.2.3") != nil)
        #expect(warning(host: "::") != nil)
        for loopback in ["127.0.0.1", "127.1.2.3", "::1", "localhost"] { #expect(warning(host: loopback) == nil, "\(loopback)") }
        let proxy = try TrustedProxies(["10.0.0.7"])
        #expect(warning(host: "0.0.0.0") { $0.trustedProxies = proxy } == nil)
        #expect(warning(host: "0.0.0.0") { $0.consoleSecureCookie = .always } == nil)
        #expect(warning(host: "0.0.0.0") { $0.adminKey = nil } == nil)
    }

    @Test("the metrics key reads /metrics and nothing else: it mints no token, opens no console and is no bearer token")
    func metricsKeyScope() async throws {
        let key = "metrics-key-for-scrapers-only-0123"
        try await LiveServer.with(configure: { $0.metricsKey = key }) { (live: LiveServer) async throws -> Void in
            let base = live.baseURL
            let bearer = [("Authorization", "Bearer \(key)")]
            let first = try await http(.GET, base + "/metrics", headers: bearer)
            #expect(first.status == 200)
            #expect(try await http(.GET, base + "/metrics", headers: [("X-Admin-Key", testAdminKey)]).status == 200)
            for headers in [[], [("Authorization", "Bearer \(key)x")], [("Authorization", "Bearer \(testAdminKey)")], [("X-Admin-Key", key)]] {
                #expect(try await http(.GET, base + "/metrics", headers: headers).status == 401)
            }
            let json = [("Content-Type", "application/json")]
            for headers in [[("X-Admin-Key", key)], bearer] {
                let minted = try await http(.POST, base + "/v1/admin/tokens", headers: headers + json, body: Array(#"{"identity":"mallory"}"#.utf8))
                #expect(minted.status == 401)
                let explained = try await http(.POST, base + "/v1/admin/explain", headers: headers + json,
                                               body: Array(#"{"identity":"alice","table":"todos","id":"T1"}"#.utf8))
                #expect(explained.status == 401)
                #expect(try await http(.GET, base + "/admin", headers: headers).status == 401)
                #expect(try await http(.POST, base + "/v1/pull", headers: headers + json, body: Array(#"{"table":"todos"}"#.utf8)).status == 401)
            }
            let (refusedSignIn, cookie) = try await Self.signIn(base, key: key)
            #expect(refusedSignIn.status == 401 && cookie == nil)
            // A scrape with the key is not counted as a refused token.
            let before = try PrometheusText(try await http(.GET, base + "/metrics", headers: bearer).text)
            let after = try PrometheusText(try await http(.GET, base + "/metrics", headers: bearer).text)
            #expect(after.value("offline_sync_token_verifications_total", ["result": "refused"])
                        == before.value("offline_sync_token_verifications_total", ["result": "refused"]))
        }
    }

    @Test("hostile identities, tables, item ids and claims are escaped on the page, and bidirectional controls shown as code points")
    func hostileValuesAreEscaped() async throws {
        let hostile = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)></td></tr>\u{202E}gnp.exe\u{2066}"
        let table = "t</td><script>alert(3)</script>\u{202E}"
        // A quote and a combining mark are one Character; escaped by Character, the quote would end the attribute.
        let combining = "x\"\u{338} autofocus onfocus=alert(4) y=\"\u{338}"
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: false)) { (live: LiveServer) async throws -> Void in
            _ = try await live.remote("alice").push([Self.insert("lists", "L1", ["name": "groceries"])])
            let refused = try await live.remote(hostile).push([Self.insert("todos", hostile, ["list_id": "L1"])])
            guard case .rejected(_, 403) = refused.first?.outcome else { Issue.record("the hostile write was not refused"); return }
            let stored = try await live.remote("alice").push([Self.insert(table, "r1", ["n": 1])])
            guard case .applied = stored.first?.outcome else { Issue.record("the hostile table was not written"); return }
            // ASCII letters and digits only: `.alphanumerics` would leave a combining mark unencoded.
            let plain = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
            func encoded(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: plain)! }
            let query = "identity=\(encoded(combining))&table=\(encoded(table))&id=\(encoded(hostile))&roles=\(encoded(hostile))"
            let page = try await http(.GET, live.baseURL + "/admin?" + query, headers: [("X-Admin-Key", testAdminKey)])
            #expect(page.status == 200)
            let html = page.text
            #expect(!html.contains("<script"), "a raw <script")
            #expect(!html.contains("<img"), "a raw <img")
            #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&gt;&lt;img src=x onerror=alert(2)&gt;&lt;/td&gt;&lt;/tr&gt;"))
            #expect(html.contains("<span class=\"ctl\">[U+202E]</span>gnp.exe<span class=\"ctl\">[U+2066]</span>"))
            #expect(!html.unicodeScalars.contains("\u{202E}") && !html.unicodeScalars.contains("\u{2066}"), "a raw bidirectional control")
            #expect(html.utf8.firstRange(of: Array("\"\u{338}".utf8)) == nil, "a raw quote before a combining mark")
            #expect(html.contains("id=\"identity\" value=\"\(ConsolePage.attribute(combining))\""))
            // Claims that are not name=value come back in the error, escaped.
            let claims = try await http(.GET, live.baseURL + "/admin?identity=bob&table=todos&id=T1&claims=" + encoded("<script>x</script>"),
                                        headers: [("X-Admin-Key", testAdminKey)])
            #expect(claims.text.contains("a claim is name=value, not &#39;&lt;script&gt;x&lt;/script&gt;&#39;"))
            #expect(!claims.text.contains("<script"))
        }
    }
}

@Suite("Server: the console's escaping, trusted proxies and sign-in limiter")
struct ConsoleGuardTests {
    @Test("escaping works by Unicode scalar, and shows disguising characters as code points in text and as references in attributes")
    func escaping() {
        #expect(ConsolePage.text("<b>\"'&") == "&lt;b&gt;&quot;&#39;&amp;")
        #expect(ConsolePage.text("a\u{202E}b") == "a<span class=\"ctl\">[U+202E]</span>b")
        #expect(ConsolePage.text("\u{1}\u{2028}") == "<span class=\"ctl\">[U+0001]</span><span class=\"ctl\">[U+2028]</span>")
        #expect(ConsolePage.attribute("a\u{2066}b\u{202E}") == "a&#x2066;b&#x202E;")
        #expect(Array(ConsolePage.attribute("\"\u{338}").unicodeScalars) == Array("&quot;\u{338}".unicodeScalars))
        #expect(Array(ConsolePage.text("<\u{338}x>").unicodeScalars) == Array("&lt;\u{338}x&gt;".unicodeScalars))
        // Right-to-left text that is no control stays as it is.
        #expect(ConsolePage.text("שלום") == "שלום")
    }

    @Test("trusted proxies: addresses and networks, IPv4-mapped peers, the client read from X-Forwarded-For's right end")
    func trustedProxies() throws {
        let proxies = try TrustedProxies(["10.0.0.0/8", "192.168.1.7", "fd00::/8"])
        func peer(_ text: String) throws -> SocketAddress { try SocketAddress(ipAddress: text, port: 4000) }
        #expect(proxies.trusts(try peer("10.200.3.4")))
        #expect(proxies.trusts(try peer("::ffff:10.0.0.1")))
        #expect(proxies.trusts(try peer("192.168.1.7")))
        #expect(!proxies.trusts(try peer("192.168.1.8")))
        #expect(proxies.trusts(try peer("fd12::1")))
        #expect(!proxies.trusts(try peer("fe80::1")))
        #expect(!proxies.trusts(nil))
        for bad in ["example.com", "10.0.0.0/33", "::1/129", "10.0.0.1:80", "", "10.0.0.0/-1", "10.0.0.0/"] {
            #expect(throws: SyncError.self, "\(bad)") { try TrustedProxies([bad]) }
        }
        let proxy = try peer("10.0.0.1")
        #expect(proxies.client(peer: proxy, forwardedFor: ["203.0.113.5, 10.0.0.2"]) == [203, 0, 113, 5])
        #expect(proxies.client(peer: proxy, forwardedFor: ["198.51.100.1", "203.0.113.5:5555, 10.0.0.2"]) == [203, 0, 113, 5])
        #expect(proxies.client(peer: proxy, forwardedFor: ["[2001:db8::7]:443"]) == TrustedProxies.address("2001:db8::7"))
        // A hop that is not an address stops the walk at the proxy that wrote it.
        #expect(proxies.client(peer: proxy, forwardedFor: ["203.0.113.5, unknown"]) == [10, 0, 0, 1])
        // From a peer that is no trusted proxy, or with no proxy trusted, the header is ignored.
        #expect(proxies.client(peer: try peer("198.51.100.9"), forwardedFor: ["203.0.113.5"]) == [198, 51, 100, 9])
        #expect(TrustedProxies().client(peer: proxy, forwardedFor: ["203.0.113.5"]) == [10, 0, 0, 1])
    }

    @Test("the limiter counts failures in windows, per address (IPv6 by its /64) and overall, and remembers a bounded number of addresses")
    func signInLimiter() throws {
        let limits = ConsoleSignInLimits(perAddress: 3, addressWindow: .seconds(300), overall: 1000, overallWindow: .seconds(60),
                                         addressesRemembered: 8)
        let limiter = SignInLimiter()
        let start = ContinuousClock.now
        let client: [UInt8] = [203, 0, 113, 1]
        for _ in 0..<3 {
            #expect(limiter.wait(for: client, limits: limits, now: start) == nil)
            limiter.failed(client, limits: limits, now: start)
        }
        #expect(limiter.wait(for: client, limits: limits, now: start + .seconds(1)) == Duration.seconds(299))
        #expect(limiter.wait(for: client, limits: limits, now: start + .seconds(300)) == nil)
        #expect(limiter.wait(for: [203, 0, 113, 2], limits: limits, now: start + .seconds(1)) == nil)
        // Two addresses of one /64 are one client.
        let near = try #require(TrustedProxies.address("2001:db8:1:2::a")), far = try #require(TrustedProxies.address("2001:db8:1:2:ffff::b"))
        for _ in 0..<3 { limiter.failed(near, limits: limits, now: start) }
        #expect(limiter.wait(for: far, limits: limits, now: start) != nil)
        // A success forgets its address's failures.
        limiter.succeeded(far)
        #expect(limiter.wait(for: near, limits: limits, now: start) == nil)
        // However many addresses fail, at most `addressesRemembered` are kept.
        for index in 0..<200 {
            limiter.failed([198, 51, UInt8(index / 256), UInt8(index % 256)], limits: limits, now: start + .milliseconds(index))
        }
        #expect(limiter.addressCount <= 8)

        // Past the overall limit only an address that failed within its own window waits: a
        // flood from others never locks out one that did not (the operator's).
        let overall = ConsoleSignInLimits(perAddress: 100, addressWindow: .seconds(300), overall: 5, overallWindow: .seconds(60))
        let shared = SignInLimiter()
        for index in 0..<5 { shared.failed([192, 0, 2, UInt8(index)], limits: overall, now: start) }
        #expect(shared.wait(for: [192, 0, 2, 200], limits: overall, now: start + .seconds(10)) == nil)
        #expect(shared.wait(for: [192, 0, 2, 0], limits: overall, now: start + .seconds(10)) == Duration.seconds(50))
        #expect(shared.wait(for: [192, 0, 2, 0], limits: overall, now: start + .seconds(60)) == nil)
        // The clean address fails once: from then on the overall limit holds it too.
        shared.failed([192, 0, 2, 200], limits: overall, now: start + .seconds(10))
        #expect(shared.wait(for: [192, 0, 2, 200], limits: overall, now: start + .seconds(20)) == Duration.seconds(40))
        // Once its own window ends it is clean again, whatever the others do.
        for index in 0..<5 { shared.failed([192, 0, 2, UInt8(index)], limits: overall, now: start + .seconds(300)) }
        #expect(shared.wait(for: [192, 0, 2, 200], limits: overall, now: start + .seconds(311)) == nil)
    }
}
