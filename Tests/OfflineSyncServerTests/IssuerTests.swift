import Crypto
import Foundation
import AsyncHTTPClient
import JWTKit
import Logging
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import OfflineSyncWire
import Synchronization
import Testing
import _CryptoExtras

/// Tokens of an identity provider (a real JWKS endpoint on loopback, keys generated per run)
/// accepted and refused by a live server.
@Suite("Identity providers: tokens verified against the issuer's published keys")
struct IssuerTests {
    static let rules = """
        version: 1
        tables:
          notices:
            read: everyone
            write:
              - everyone: true
                when: { roles: admin }
          plans:
            read: everyone
            write:
              - everyone: true
                when: { tier: gold }
        """

    /// Runs `body` with a provider publishing `keys` and a server accepting its tokens.
    static func with(keys: [ProviderKey], policy: KeyRefreshPolicy = .init(), cacheControl: String? = "max-age=3600",
                     issuer configure: @escaping @Sendable (inout TokenIssuer) -> Void = { _ in },
                     _ body: (TestIdentityProvider, LiveServer) async throws -> Void) async throws {
        let provider = try await TestIdentityProvider.start(keys: keys)
        provider.setCacheControl(cacheControl)
        try await stopping(provider) {
            try await LiveServer.with(rules: try SyncRules(yaml: rules), configure: { configuration in
                var issuer = TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL),
                                         rolesClaim: "realm_access.roles")
                configure(&issuer)
                configuration.issuers = [issuer]
                configuration.keyRefresh = policy
            }) { live in try await body(provider, live) }
        }
    }

    /// The status of a native pull with `token`.
    static func pullStatus(_ live: LiveServer, _ token: String, client: HTTPClient = .shared) async throws -> Int {
        try await http(.POST, live.baseURL + "/v1/pull", headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                       body: Array(#"{"table":"todos","limit":10}"#.utf8), client: client).status
    }

    @Test("RSA, RSA-PSS, ECDSA and EdDSA tokens reach the native API, the tables API and the change channel as their identity")
    func everyKeyTypeEveryRoute() async throws {
        let keys = [try ProviderKey.rsa(kid: "rs", algorithm: "RS256"), try ProviderKey.rsa(kid: "ps", algorithm: "PS384"),
                    ProviderKey.p256(kid: "es"), ProviderKey.p384(kid: "es384"), ProviderKey.ed25519(kid: "ed")]
        try await Self.with(keys: keys) { provider, live in
            for key in keys {
                let identity = "user-\(key.kid)"
                let token = signedToken(provider.claims(identity), key: key)
                let remote = HTTPRemoteStore(baseURL: live.baseURL, token: { token })
                let results = try await remote.push([PushOperation(id: "op-\(key.kid)", table: "todos", itemId: "t-\(key.kid)",
                                                                   kind: .insert, item: Record(id: "t-\(key.kid)"), baseVersion: nil)])
                #expect(results.count == 1)
                let page = try await remote.pull(PullRequest(table: "todos", limit: 10))
                #expect(page.records.map(\.id) == ["t-\(key.kid)"], "\(key.algorithm): the identity's own rows only")
                let tables = try await http(.GET, live.baseURL + "/tables/todos", headers: [("Authorization", "Bearer \(token)"), ("ZUMO-API-VERSION", "3.0.0")])
                #expect(tables.status == 200, "\(key.algorithm) on the tables API")
                #expect(tables.text.contains("t-\(key.kid)"))
                var events = remote.changes().makeAsyncIterator()
                #expect(await events.next() == .subscribed, "\(key.algorithm) on the change channel")
            }
            #expect(try await live.server.service.record(identity: "user-ed", table: "todos", id: "t-ed") != nil)
        }
    }

    @Test("tokens signed by jwt-kit (an independent JWS implementation) verify")
    func jwtKitTokens() async throws {
        let rsa = try ProviderKey.rsa(kid: "kit-rs"), pss = try ProviderKey.rsa(kid: "kit-ps", algorithm: "PS256")
        let ec = ProviderKey.p256(kid: "kit-es"), ed = ProviderKey.ed25519(kid: "kit-ed")
        // jwt-kit signs with its own copies of the private keys; the provider publishes the public halves.
        let rsaKey = try _RSA.Signing.PrivateKey(keySize: .bits2048), pssKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let ecKey = P256.Signing.PrivateKey(), edKey = Curve25519.Signing.PrivateKey()
        let signers = JWTKeyCollection()
        await signers.add(rsa: try Insecure.RSA.PrivateKey(backing: rsaKey), digestAlgorithm: .sha256, kid: "kit-rs")
        await signers.add(pss: try Insecure.RSA.PrivateKey(backing: pssKey), digestAlgorithm: .sha256, kid: "kit-ps")
        await signers.add(ecdsa: try ES256PrivateKey(backing: ecKey), kid: "kit-es")
        await signers.add(eddsa: EdDSA.PrivateKey(backing: edKey), kid: "kit-ed")
        func rsaJWK(_ key: _RSA.Signing.PrivateKey) throws -> [String: String] {
            let primitives = try key.publicKey.getKeyPrimitives()
            return ["kty": "RSA", "n": base64url(primitives.modulus), "e": base64url(primitives.publicExponent)]
        }
        let point = Array(ecKey.publicKey.x963Representation)
        let published = [
            rsa.described(try rsaJWK(rsaKey)), pss.described(try rsaJWK(pssKey)),
            ec.described(["x": base64url(point[1..<33]), "y": base64url(point[33...])]),
            ed.described(["x": base64url(edKey.publicKey.rawRepresentation)]),
        ]
        try await Self.with(keys: published) { provider, live in
            for kid in ["kit-rs", "kit-ps", "kit-es", "kit-ed"] {
                let payload = KitClaims(iss: .init(value: provider.issuer), sub: .init(value: "kit-user"), aud: .init(value: ["app"]),
                                        exp: .init(value: Date().addingTimeInterval(600)))
                let token = try await signers.sign(payload, kid: JWKIdentifier(string: kid))
                #expect(try await Self.pullStatus(live, token) == 200, "\(kid)")
            }
        }
    }

    @Test("roles from realm_access.roles and a passed-through claim decide the rules' when: conditions")
    func claimsReachTheRules() async throws {
        let key = ProviderKey.p256(kid: "k1")
        try await Self.with(keys: [key]) { provider, live in
            func push(_ claims: [String: Any], table: String, id: String) async throws -> PushOutcome {
                let token = signedToken(claims, key: key)
                let remote = HTTPRemoteStore(baseURL: live.baseURL, token: { token })
                return try await remote.push([PushOperation(id: "op-\(id)", table: table, itemId: id, kind: .insert,
                                                            item: Record(id: id), baseVersion: nil)])[0].outcome
            }
            let admin = provider.claims("alice", extra: ["realm_access": ["roles": ["admin", "offline_access"]]])
            let user = provider.claims("bob", extra: ["realm_access": ["roles": ["offline_access"]]])
            guard case .applied = try await push(admin, table: "notices", id: "n1") else { Issue.record("an admin may write notices"); return }
            guard case .rejected = try await push(user, table: "notices", id: "n2") else { Issue.record("a non-admin may not"); return }
            guard case .applied = try await push(provider.claims("carol", extra: ["tier": "gold"]), table: "plans", id: "p1") else {
                Issue.record("a gold-tier token may write plans"); return
            }
            guard case .rejected = try await push(provider.claims("dave", extra: ["tier": "silver"]), table: "plans", id: "p2") else {
                Issue.record("a silver-tier token may not"); return
            }
        }
    }

    @Test("Cognito's cognito:groups as roles, and client_id as the audience of its access tokens")
    func cognitoShapes() async throws {
        let key = try ProviderKey.rsa(kid: "cognito")
        try await Self.with(keys: [key], issuer: { $0.rolesClaim = "cognito:groups"; $0.audienceClaim = "client_id"; $0.audiences = ["client-123"] }) { provider, live in
            var claims = provider.claims("erin", extra: ["cognito:groups": ["admin"], "client_id": "client-123", "token_use": "access"])
            claims["aud"] = nil
            let token = signedToken(claims, key: key)
            let remote = HTTPRemoteStore(baseURL: live.baseURL, token: { token })
            let outcome = try await remote.push([PushOperation(id: "c1", table: "notices", itemId: "c1", kind: .insert, item: Record(id: "c1"), baseVersion: nil)])[0].outcome
            guard case .applied = outcome else { Issue.record("a Cognito admin may write notices: \(outcome)"); return }
            claims["client_id"] = "another-client"
            #expect(try await Self.pullStatus(live, signedToken(claims, key: key)) == 401)
        }
    }

    @Test("a rotated key is used on its first token: one fetch, and the request that caused it succeeds")
    func rotation() async throws {
        let old = ProviderKey.ed25519(kid: "2026-old"), new = ProviderKey.ed25519(kid: "2026-new")
        try await Self.with(keys: [old]) { provider, live throws in
            #expect(try await Self.pullStatus(live, signedToken(provider.claims("frank"), key: old)) == 200)
            let before = provider.jwksFetches
            provider.publish([old, new])
            #expect(try await Self.pullStatus(live, signedToken(provider.claims("frank"), key: new)) == 200)
            #expect(provider.jwksFetches == before + 1)
            // The old key, still published, keeps working without another fetch.
            #expect(try await Self.pullStatus(live, signedToken(provider.claims("frank"), key: old)) == 200)
            #expect(provider.jwksFetches == before + 1)
        }
    }

    @Test("10,000 requests with made-up key ids cost the provider one fetch per interval; each is refused, and the server stays up")
    func unknownKeyFlood() async throws {
        let key = try ProviderKey.rsa(kid: "real")
        let interval = Duration.seconds(1)
        try await Self.with(keys: [key], policy: KeyRefreshPolicy(minimumRefetchInterval: interval)) { provider, live in
            #expect(try await Self.pullStatus(live, signedToken(provider.claims("gina"), key: key)) == 200)
            let before = provider.jwksFetches
            let started = ContinuousClock.now
            // Each waits for a key set fetched after it arrived: 500 at a time, one fetch a second.
            let refused = try await withWideClient(connections: 500) { client in
                try await withThrowingTaskGroup(of: Int.self) { group in
                    var count = 0
                    for worker in 0..<500 {
                        group.addTask {
                            var refused = 0
                            for i in stride(from: worker, to: 10_000, by: 500) {
                                let forged = signedToken(provider.claims("gina"), key: key.described(["kid": "kid-\(UUID().uuidString)-\(i)"]))
                                if try await Self.pullStatus(live, forged, client: client) == 401 { refused += 1 }
                            }
                            return refused
                        }
                    }
                    for try await part in group { count += part }
                    return count
                }
            }
            let elapsed = ContinuousClock.now - started
            #expect(refused == 10_000)
            let allowed = 2 + Int(elapsed / interval)
            #expect(provider.jwksFetches - before <= allowed, "\(provider.jwksFetches - before) fetches in \(elapsed)")
            #expect(provider.jwksFetches - before >= 1, "an unknown key id is looked for")
            #expect(try await Self.pullStatus(live, signedToken(provider.claims("gina"), key: key)) == 200)
        }
    }

    @Test("a provider down at start: tokens are refused, the server runs, and the keys arrive when it comes back")
    func downAtStart() async throws {
        let key = ProviderKey.p384(kid: "k")
        let provider = try await TestIdentityProvider.start(keys: [key])
        provider.setUp(false)
        let lines = Box<[String]>([])
        try await stopping(provider) { try await LiveServer.with(configure: { configuration in
            configuration.issuers = [TokenIssuer(issuer: provider.issuer, audiences: ["app"], keys: .jwks(provider.jwksURL))]
            configuration.keyRefresh = KeyRefreshPolicy(minimumRefetchInterval: .milliseconds(200))
            configuration.logger = Logger(label: "capture") { _ in CapturingLogHandler(lines: lines) }
        }) { live throws in
            let token = signedToken(provider.claims("hank"), key: key)
            // Not refused: its keys cannot be had, and a retry may pass.
            #expect(try await Self.pullStatus(live, token) == 503)
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)
            // Several fetches fail while it is down (one per 200 ms at most), logged once.
            let before = provider.jwksFetches
            #expect(await eventually(timeout: .seconds(60)) {
                _ = try? await Self.pullStatus(live, token)
                return provider.jwksFetches >= before + 3
            })
            let warnings = lines.value.filter { $0.contains("cannot fetch the identity provider's keys") }
            #expect(warnings.count == 1, "\(warnings)")
            provider.setUp(true)
            #expect(await eventually(timeout: .seconds(60)) { (try? await Self.pullStatus(live, token)) == 200 })
            #expect(lines.value.filter { $0.contains("keys fetched again") }.count == 1)
            // Down again: the cached keys keep working.
            provider.setUp(false)
            let fetches = provider.jwksFetches
            for _ in 0..<20 { #expect(try await Self.pullStatus(live, token) == 200) }
            #expect(provider.jwksFetches == fetches, "a key in hand needs no fetch")
        } }
    }

    @Test("discovery: the key set is found through /.well-known/openid-configuration, by `offline-sync serve --issuer FILE`, beside a second issuer")
    func discoveryAndTwoIssuersThroughTheCLI() async throws {
        let first = try ProviderKey.rsa(kid: "one", algorithm: "PS256"), second = ProviderKey.ed25519(kid: "two")
        let one = try await TestIdentityProvider.start(keys: [first])
        let two = try await TestIdentityProvider.start(keys: [second])
        try await stopping(one, two) { try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("issuers.yaml")
            try """
                issuers:
                  - issuer: \(one.issuer)
                    audiences: [app]
                    discovery_url: \(one.discoveryURL.absoluteString)
                    algorithms: [PS256]
                    identity_prefix: "one:"
                  - issuer: \(two.issuer)
                    audiences: app
                    jwks_url: \(two.jwksURL.absoluteString)
                    roles_claim: groups
                    identity_prefix: "two:"
                """.write(to: file, atomically: true, encoding: .utf8)
            let server = try await ServerProcess.start(data: directory.appendingPathComponent("data"), extraArguments: ["--issuer", file.path])
            defer { _ = server.stop() }
            let url = server.baseURL + "/v1/pull"
            func pull(_ token: String) async throws -> Int {
                try await http(.POST, url, headers: [("Authorization", "Bearer \(token)")], body: Array(#"{"table":"todos","limit":1}"#.utf8)).status
            }
            #expect(try await pull(signedToken(one.claims("ivy"), key: first)) == 200)
            #expect(one.discoveryFetches >= 1)
            #expect(try await pull(signedToken(two.claims("jack"), key: second)) == 200)
            // The same subject at both providers is two identities: a row one's "sam" writes is
            // not two's "sam"'s.
            let oneSam = HTTPRemoteStore(baseURL: server.baseURL, token: { signedToken(one.claims("sam"), key: first) })
            let twoSam = HTTPRemoteStore(baseURL: server.baseURL, token: { signedToken(two.claims("sam"), key: second) })
            _ = try await oneSam.push([PushOperation(id: "s1", table: "todos", itemId: "mine", kind: .insert, item: Record(id: "mine"), baseVersion: nil)])
            #expect(try await oneSam.pull(PullRequest(table: "todos", limit: 10)).records.map(\.id) == ["mine"])
            #expect(try await twoSam.pull(PullRequest(table: "todos", limit: 10)).records.isEmpty)
            // A key of one issuer does not verify a token claiming the other.
            #expect(try await pull(signedToken(one.claims("ivy"), key: second.described(["kid": "one"]))) == 401)
            #expect(try await pull(signedToken(two.claims("jack"), key: first.described(["kid": "two"]))) == 401)
            #expect(await server.stopped() == 0)
        } }
    }

    @Test("a change channel is closed when its token expires, and the client reconnects with a fresh token")
    func expiredSocketIsClosed() async throws {
        let key = ProviderKey.p256(kid: "short")
        try await Self.with(keys: [key]) { provider, live in
            let now = Int(Date().timeIntervalSince1970)
            let short = signedToken(provider.claims("kim", extra: ["exp": now + 2]), key: key)
            let fresh = signedToken(provider.claims("kim"), key: key)
            let calls = Box(0)
            let remote = HTTPRemoteStore(baseURL: live.baseURL, configuration: .init(initialBackoff: .milliseconds(50)),
                                         token: { calls.withLock { $0 += 1; return $0 == 1 ? short : fresh } })
            var events = remote.changes().makeAsyncIterator()
            #expect(await events.next() == .subscribed)
            #expect(await events.next() == .disconnected, "closed at the token's expiry")
            #expect(await events.next() == .subscribed, "back, with the fresh token")
            #expect(calls.value == 2)
        }
    }

    @Test("the server closes the channel with close code 4401 when the token expires")
    func expiryCloseCode() async throws {
        let key = ProviderKey.ed25519(kid: "code")
        try await Self.with(keys: [key]) { provider, live in
            let now = Int(Date().timeIntervalSince1970)
            let token = signedToken(provider.claims("lou", extra: ["exp": now + 1]), key: key)
            let connection = try LoopbackSocket(port: live.running.port)
            defer { connection.hangUp() }
            try connection.send(LoopbackSocket.changeChannelRequest(port: live.running.port, token: token))
            // The server writes the upgrade, the subscription, then at expiry a close frame and
            // ends the connection: everything up to the end of the stream.
            let bytes = try await connection.readAll()
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 101"))
            // A close frame: 0x88, a length, then the status code 4401 (0x11 0x31) and the reason.
            guard let close = bytes.firstIndex(of: 0x88), bytes.count >= close + 4 else {
                Issue.record("no close frame in \(bytes.count) bytes"); return
            }
            #expect(Array(bytes[(close + 2)...(close + 3)]) == [0x11, 0x31])
            #expect(text.contains("token expired"))
        }
    }

    @Test("max-age=0 does not make every request a fetch: the set is kept for the minimum lifetime")
    func noCacheIsNotRefetchedPerRequest() async throws {
        let key = ProviderKey.p256(kid: "cached")
        try await Self.with(keys: [key], cacheControl: "no-cache, max-age=0") { provider, live throws in
            let token = signedToken(provider.claims("max"), key: key)
            #expect(await eventually(timeout: .seconds(60)) { (try? await Self.pullStatus(live, token)) == 200 })
            let fetched = provider.jwksFetches
            for _ in 0..<20 { #expect(try await Self.pullStatus(live, token) == 200) }
            // A refresh would have begun inside one of those requests; the 5-minute minimum
            // lifetime cannot have passed.
            #expect(provider.jwksFetches == fetched)
        }
    }

    @Test("a day's max-age is cut to the maximum lifetime: past it, a request is answered from the cache and the set is fetched again behind it")
    func longMaxAgeIsClamped() async throws {
        let key = ProviderKey.p256(kid: "cached")
        let policy = KeyRefreshPolicy(minimumLifetime: .milliseconds(100), maximumLifetime: .milliseconds(300),
                                      minimumRefetchInterval: .milliseconds(100))
        try await Self.with(keys: [key], policy: policy, cacheControl: "public, max-age=86400") { provider, live in
            let token = signedToken(provider.claims("max"), key: key)
            #expect(await eventually(timeout: .seconds(60)) { (try? await Self.pullStatus(live, token)) == 200 })
            let fetched = provider.jwksFetches
            // The provider goes down: a refresh must not cost the request its answer.
            provider.setUp(false)
            try await Task.sleep(for: .milliseconds(400))
            #expect(try await Self.pullStatus(live, token) == 200)
            // Each request past the lifetime answers from the cache and may start a refresh.
            let answered = Box(true)
            #expect(await eventually(timeout: .seconds(60)) {
                if (try? await Self.pullStatus(live, token)) != 200 { answered.withLock { $0 = false } }
                return provider.jwksFetches > fetched
            }, "refreshed after 300 ms, not a day")
            #expect(answered.value, "every request past the lifetime was answered from the cache")
        }
    }
}

extension IssuerTests {
    @Test("an issuers document that cannot be used is refused with its line; two issuers must not share identities")
    func invalidConfigurations() async throws {
        func problem(_ yaml: String) -> String? {
            do { _ = try TokenIssuer.issuers(yaml: yaml, source: "issuers.yaml"); return nil } catch let error as SyncError {
                return error.code == .invalidConfiguration ? error.message : "code \(error.code)"
            } catch { return "\(error)" }
        }
        let good = "  - issuer: https://id.example.com/\n    audiences: [app]\n    jwks_url: https://id.example.com/jwks.json\n"
        #expect(problem("issuers:\n" + good) == nil)
        #expect(problem("issuers:\n" + good + "    colour: blue\n")?.hasPrefix("issuers.yaml:5: unknown key 'colour'") == true)
        #expect(problem("issuers:\n  - issuer: https://a.example/\n    jwks_url: https://a.example/k\n")?.contains("audiences") == true)
        #expect(problem("issuers:\n  - issuer: https://a.example/\n    any_audience: true\n    jwks_url: https://a.example/k\n") == nil)
        #expect(problem("issuers:\n  - issuer: https://a.example/\n    audiences: x\n    jwks_url: http://a.example/k\n")?.contains("https") == true)
        #expect(problem("issuers:\n  - issuer: https://a.example/\n    audiences: x\n    jwks_url: http://127.0.0.1:9/k\n") == nil)
        #expect(problem("issuers:\n  - issuer: https://a.example/\n    audiences: x\n") != nil, "no key source")
        #expect(problem("issuers:\n  - issuer: https://a.example/\n    audiences: x\n    jwks_file: /k\n    jwks_url: https://a.example/k\n") != nil)
        #expect(problem("issuers:\n  - issuer: offline-sync\n    audiences: x\n    jwks_file: /k\n") != nil, "the development issuer")
        #expect(problem("issuers:\n  - issuer: https://a.example/\n    audiences: x\n    jwks_file: /k\n    algorithms: [HS256]\n")?.contains("unknown algorithm 'HS256'") == true)
        #expect(problem("issuers:\n" + good + good)?.contains("appears twice") == true)

        // Two issuers need prefixes, none the beginning of another's.
        let a = TokenIssuer(issuer: "https://a.example/", audiences: ["x"], keys: .file("/a"))
        let b = TokenIssuer(issuer: "https://b.example/", audiences: ["x"], keys: .file("/b"))
        func configured(_ issuers: [TokenIssuer]) async -> SyncError.Code? {
            await syncErrorCode {
                try await LiveServer.with(configure: { $0.issuers = issuers }) { _ in }
            }
        }
        #expect(await configured([a, b]) == .invalidConfiguration)
        var ga = a, gb = b
        ga.identityPrefix = "google:"; gb.identityPrefix = "goo"
        #expect(await configured([ga, gb]) == .invalidConfiguration, "'goo' begins 'google:'")
        gb.identityPrefix = "kc:"
        #expect(await configured([ga, gb]) == nil)
    }

    @Test("HTTPRemoteStore asks its token provider again after a 401 and sends again; a provider that fails is authenticationFailed and the queue stays")
    func clientRefreshesItsToken() async throws {
        let key = ProviderKey.ed25519(kid: "client")
        try await Self.with(keys: [key]) { provider, live in
            let now = Int(Date().timeIntervalSince1970)
            let expired = signedToken(provider.claims("lena", extra: ["exp": now - 600]), key: key)
            let fresh = signedToken(provider.claims("lena"), key: key)
            // The app's identity SDK: its cached access token has expired; asked again, it refreshes.
            let calls = Box(0)
            let remote = HTTPRemoteStore(baseURL: live.baseURL, token: {
                calls.withLock { $0 += 1; return $0 == 1 ? expired : fresh }
            })
            let page = try await remote.pull(PullRequest(table: "todos", limit: 10))
            #expect(page.records.isEmpty)
            #expect(calls.value == 2, "asked once, then once more after the 401")

            // A provider that cannot give a token: the push fails as authenticationFailed, and
            // the local queue keeps the operation.
            struct SignedOut: Error {}
            let failing = HTTPRemoteStore(baseURL: live.baseURL, token: { throw SignedOut() })
            #expect(await syncErrorCode { _ = try await failing.pull(PullRequest(table: "todos", limit: 1)) } == .authenticationFailed)
            try await withTemporaryDirectory { directory in
                let store = try await SQLiteStore(path: directory.appendingPathComponent("c.sqlite").path)
                let context = try await SyncContext(store: store, remote: failing)
                try await context.defineTable(TableSchema("todos"))
                _ = try await context.table("todos").insert(Record(id: "kept"))
                #expect(await syncErrorCode { try await context.push() } == .authenticationFailed)
                #expect(try await context.queuedOperationCount() == 1)
                try await store.close()
            }
            // A provider that keeps returning a refused token: the second 401 ends the call.
            let refusedCalls = Box(0)
            let refused = HTTPRemoteStore(baseURL: live.baseURL, token: { refusedCalls.withLock { $0 += 1 }; return expired })
            #expect(await syncErrorCode { _ = try await refused.pull(PullRequest(table: "todos", limit: 1)) } == .authenticationFailed)
            #expect(refusedCalls.value == 2)
        }
    }
}

/// The claims jwt-kit signs in ``IssuerTests/jwtKitTokens()``.
struct KitClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    func verify(using algorithm: some JWTAlgorithm) throws {}
}
