import AsyncHTTPClient
import Foundation
import Logging
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncTestSupport
import Synchronization
import Testing

/// What a production server accepts as credentials: development tokens only where they are
/// on and never for a provider's user, the token types an issuer requires, and keys that a
/// flood of made-up key ids or a failing provider cannot turn into refusals of good tokens
/// (nor keep in use for ever).
@Suite("The production token policy")
struct TokenPolicyTests {
    /// The status and `Retry-After` of a native pull with `token`.
    static func pull(_ live: LiveServer, _ token: String, client: HTTPClient = .shared) async throws -> (status: Int, retryAfter: String?) {
        let response = try await http(.POST, live.baseURL + "/v1/pull",
                                      headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                                      body: Array(#"{"table":"todos","limit":10}"#.utf8), client: client)
        return (response.status, response.header("Retry-After"))
    }

    static func mint(_ live: LiveServer, _ identity: String) async throws -> RawResponse {
        try await http(.POST, live.baseURL + "/v1/admin/tokens", headers: [("X-Admin-Key", testAdminKey), ("Content-Type", "application/json")],
                       body: Array(jsonText(["identity": identity]).utf8))
    }

    /// A provider publishing `keys` and a server accepting its tokens under `configure`.
    static func with(keys: [ProviderKey], configure: @escaping @Sendable (inout SyncServer.Configuration, TestIdentityProvider) -> Void,
                     _ body: (TestIdentityProvider, LiveServer) async throws -> Void) async throws {
        let provider = try await TestIdentityProvider.start(keys: keys)
        try await stopping(provider) {
            try await LiveServer.with(configure: { configure(&$0, provider) }) { live in try await body(provider, live) }
        }
    }

    @Test("with an issuer configured, development tokens are off unless turned on, and then never name a provider's user")
    func developmentTokens() async throws {
        let key = ProviderKey.p256(kid: "k")
        let lines = Box<[String]>([])
        // The default beside an issuer: off. Before, a development token for the provider's
        // user "alice" (the admin key can mint one) read and wrote alice's rows.
        try await Self.with(keys: [key], configure: { configuration, provider in
            configuration.issuers = [TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL))]
            configuration.logger = Logger(label: "capture") { _ in CapturingLogHandler(lines: lines) }
        }) { provider, live throws in
            #expect(try await Self.pull(live, signedToken(provider.claims("alice"), key: key)).status == 200)
            #expect(try await Self.pull(live, live.token("alice")).status == 401)
            let minted = try await Self.mint(live, "alice")
            #expect(minted.status == 403 && minted.text.contains("development tokens are off"))
            // The start-up log names each token source.
            #expect(lines.value.contains { $0.contains("token source: development tokens are off") })
            #expect(lines.value.contains { $0.contains("token source: issuer \(provider.issuer) (identities '…'") })
        }

        // On beside an issuer without a prefix: the server does not start.
        await #expect(throws: SyncError.self) {
            try await Self.with(keys: [key], configure: { configuration, provider in
                configuration.issuers = [TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL))]
                configuration.developmentTokens = .on
            }) { _, _ in }
        }

        // On beside an issuer with a prefix: development identities live outside it.
        try await Self.with(keys: [key], configure: { configuration, provider in
            configuration.issuers = [TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL), identityPrefix: "idp:")]
            configuration.developmentTokens = .on
        }) { provider, live throws in
            #expect(try await Self.pull(live, signedToken(provider.claims("alice"), key: key)).status == 200)
            #expect(try await Self.pull(live, live.token("bob")).status == 200)
            // Minted by whoever holds the secret: refused all the same.
            #expect(try await Self.pull(live, live.token("idp:alice")).status == 401)
            let minted = try await Self.mint(live, "idp:alice")
            #expect(minted.status == 400 && minted.text.contains("identity of issuer"))
            #expect(try await Self.mint(live, "bob").status == 200)
        }

        // Off with no issuer at all: nothing is accepted but refused tokens.
        try await LiveServer.with(configure: { $0.developmentTokens = .off }) { live throws in
            #expect(try await Self.pull(live, live.token("bob")).status == 401)
        }
    }

    @Test("an issuer may require a header typ (at+jwt, as RFC 7515 compares media types) and claims (token_use: access)")
    func tokenTypes() async throws {
        let key = try ProviderKey.rsa(kid: "typed")
        try await Self.with(keys: [key], configure: { configuration, provider in
            configuration.issuers = [TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL),
                                                 requiredType: "at+jwt", requiredClaims: ["token_use": "access"])]
        }) { provider, live throws in
            let access = provider.claims("mia", extra: ["token_use": "access"])
            for typ in ["at+jwt", "application/at+jwt", "AT+JWT"] {
                #expect(try await Self.pull(live, signedToken(access, key: key, header: ["typ": typ])).status == 200, "\(typ)")
            }
            // Before, each of these was accepted: an ID token where an access token is meant.
            #expect(try await Self.pull(live, signedToken(access, key: key, header: ["typ": "JWT"])).status == 401)
            #expect(try await Self.pull(live, signedToken(access, key: key, header: ["typ": 1])).status == 401)
            let id = provider.claims("mia", extra: ["token_use": "id"])
            #expect(try await Self.pull(live, signedToken(id, key: key, header: ["typ": "at+jwt"])).status == 401)
            #expect(try await Self.pull(live, signedToken(provider.claims("mia"), key: key, header: ["typ": "at+jwt"])).status == 401)
            let untyped = signedToken(headerJSON: jsonText(["alg": "RS256", "kid": "typed"]), claimsJSON: jsonText(access), sign: key.sign)
            #expect(try await Self.pull(live, untyped).status == 401)
        }
        let yaml = """
            issuers:
              - issuer: https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc
                audiences: [client]
                audience_claim: client_id
                jwks_url: https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc/.well-known/jwks.json
                token_type: at+jwt
                required_claims: { token_use: access }
            """
        let issuer = try #require(try TokenIssuer.issuers(yaml: yaml).first)
        #expect(issuer.requiredType == "at+jwt" && issuer.requiredClaims == ["token_use": "access"])
        #expect(throws: SyncError.self) { try TokenIssuer.issuers(yaml: yaml.replacingOccurrences(of: "{ token_use: access }", with: "[access]")) }
    }

    @Test("made-up key ids during a rotation: the first token signed with the new key passes, and the provider sees one fetch per interval")
    func floodDuringRotation() async throws {
        let old = ProviderKey.ed25519(kid: "old"), new = ProviderKey.ed25519(kid: "new")
        let interval = Duration.seconds(2)
        try await Self.with(keys: [old], configure: { configuration, provider in
            configuration.issuers = [TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL))]
            configuration.keyRefresh = KeyRefreshPolicy(minimumRefetchInterval: interval)
        }) { provider, live throws in
            #expect(try await Self.pull(live, signedToken(provider.claims("nina"), key: old)).status == 200)
            let before = provider.jwksFetches
            let started = ContinuousClock.now
            let flooding = Box(true)
            let refused = Box(0)
            // 400 made-up key ids, 100 at a time, sent until the legitimate request is answered.
            let flood = Task {
                try await withWideClient(connections: 100) { client in try await withThrowingTaskGroup(of: Void.self) { group in
                    for worker in 0..<100 {
                        group.addTask {
                            var sent = 0
                            while flooding.value || sent < 4 {
                                let forged = signedToken(provider.claims("nina"), key: old.described(["kid": "made-up-\(worker)-\(sent)"]))
                                let status = try await Self.pull(live, forged, client: client).status
                                #expect(status == 401, "a made-up key id after a fresh fetch is refused")
                                refused.withLock { $0 += 1 }
                                sent += 1
                            }
                        }
                    }
                    try await group.waitForAll()
                } }
            }
            #expect(await eventually(timeout: .seconds(30)) { refused.value >= 100 })
            // The provider publishes a new key, and a user's first token signed with it
            // arrives inside the interval of the flood's last fetch. Before, it was refused
            // (401), and the client, given the same token again, halted.
            provider.publish([old, new])
            let remote = HTTPRemoteStore(baseURL: live.baseURL, token: { signedToken(provider.claims("nina"), key: new) })
            let page = try await remote.pull(PullRequest(table: "todos", limit: 10))
            #expect(page.records.isEmpty)
            flooding.withLock { $0 = false }
            try await flood.value
            let elapsed = ContinuousClock.now - started
            let fetches = provider.jwksFetches - before
            #expect(refused.value >= 400)
            #expect(fetches >= 1 && fetches <= 2 + Int(elapsed / interval), "\(fetches) fetches in \(elapsed)")
        }
    }

    @Test("past the bound on waiting requests, a made-up key id is answered 503 with Retry-After at once; the good token still passes")
    func waitingIsBounded() async throws {
        let key = ProviderKey.p256(kid: "real")
        try await Self.with(keys: [key], configure: { configuration, provider in
            configuration.issuers = [TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL))]
            configuration.keyRefresh = KeyRefreshPolicy(minimumRefetchInterval: .seconds(10), maximumWaitingRequests: 4)
        }) { provider, live throws in
            // A made-up key id starts a fetch now; the next is allowed 10 s later, and the 20
            // requests below all arrive before it.
            #expect(try await Self.pull(live, signedToken(provider.claims("otto"), key: key.described(["kid": "first"]))).status == 401)
            let answers = try await withWideClient(connections: 20) { client in
                try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                    for i in 0..<20 {
                        group.addTask {
                            try await Self.pull(live, signedToken(provider.claims("otto"), key: key.described(["kid": "x\(i)"])), client: client)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            let waited = answers.filter { $0.0 == 401 }.count
            let turnedAway = answers.filter { $0.0 == 503 }
            #expect(waited == 4, "\(answers)")
            #expect(turnedAway.count == 16 && turnedAway.allSatisfy { ($0.1.flatMap(Int.init) ?? 0) >= 1 }, "\(answers)")
            #expect(try await Self.pull(live, signedToken(provider.claims("otto"), key: key)).status == 200)
        }
    }

    @Test("a key set whose refreshes keep failing is dropped past the staleness bound (503, logged), and comes back with the provider")
    func staleKeysAreDropped() async throws {
        let key = ProviderKey.ed25519(kid: "k")
        let lines = Box<[String]>([])
        try await Self.with(keys: [key], configure: { configuration, provider in
            configuration.issuers = [TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL))]
            configuration.keyRefresh = KeyRefreshPolicy(minimumLifetime: .milliseconds(300), maximumLifetime: .milliseconds(300),
                                                        defaultLifetime: .milliseconds(300), minimumRefetchInterval: .milliseconds(100),
                                                        maximumStaleness: .seconds(10))
            configuration.logger = Logger(label: "capture") { _ in CapturingLogHandler(lines: lines) }
        }) { provider, live throws in
            let token = signedToken(provider.claims("pia"), key: key)
            #expect(try await Self.pull(live, token).status == 200)
            provider.setUp(false)
            // Stale, refreshes failing: still accepted until the bound passes, then 503. (The
            // bound is 10 s: under the whole suite's load a 3 s bound passed before this pull.)
            #expect(try await Self.pull(live, token).status == 200)
            #expect(await eventually(timeout: .seconds(60)) { (try? await Self.pull(live, token).status) == 503 })
            #expect(lines.value.contains { $0.contains("identity provider keys dropped") })
            // A 503 is not a refusal: the client keeps its credentials and reports a transient failure.
            let remote = HTTPRemoteStore(baseURL: live.baseURL, configuration: .init(maxAttempts: 1), token: { token })
            let code = await syncErrorCode { _ = try await remote.pull(PullRequest(table: "todos", limit: 1)) }
            #expect(code != nil && code != .authenticationFailed, "\(String(describing: code))")
            provider.setUp(true)
            #expect(await eventually(timeout: .seconds(30)) { (try? await Self.pull(live, token).status) == 200 })
        }
    }
}
