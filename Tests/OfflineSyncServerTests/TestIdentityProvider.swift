import Crypto
import Foundation
import Hummingbird
import OfflineSyncServer
import OfflineSyncTestSupport
import Synchronization
import _CryptoExtras

/// A signing key of a test identity provider, generated per run, with its public JWK.
struct ProviderKey: Sendable {
    let kid: String
    /// The JWS `alg` the key signs with.
    let algorithm: String
    /// The public key as a JWK (a JSON object's members).
    let jwk: [String: String]
    let sign: @Sendable ([UInt8]) -> [UInt8]
    /// The public key's bytes as a verifier of an HMAC confusion attack would take them.
    let publicBytes: [UInt8]

    /// An RSA key (2048 bits) for `RS256`…`RS512` or `PS256`…`PS512`.
    static func rsa(kid: String, algorithm: String = "RS256") throws -> ProviderKey {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let primitives = try key.publicKey.getKeyPrimitives()
        let padding: _RSA.Signing.Padding = algorithm.hasPrefix("PS") ? .PSS : .insecurePKCS1v1_5
        return ProviderKey(kid: kid, algorithm: algorithm,
                           jwk: ["kty": "RSA", "n": base64url(primitives.modulus), "e": base64url(primitives.publicExponent)],
                           sign: { input in
                               let signature: _RSA.Signing.RSASignature
                               switch algorithm.suffix(3) {
                               case "384": signature = try! key.signature(for: SHA384.hash(data: input), padding: padding)
                               case "512": signature = try! key.signature(for: SHA512.hash(data: input), padding: padding)
                               default: signature = try! key.signature(for: SHA256.hash(data: input), padding: padding)
                               }
                               return Array(signature.rawRepresentation)
                           }, publicBytes: Array(key.publicKey.pemRepresentation.utf8))
    }

    /// A P-256 key for `ES256`.
    static func p256(kid: String) -> ProviderKey {
        let key = P256.Signing.PrivateKey()
        let point = Array(key.publicKey.x963Representation)
        return ProviderKey(kid: kid, algorithm: "ES256",
                           jwk: ["kty": "EC", "crv": "P-256", "x": base64url(point[1..<33]), "y": base64url(point[33...])],
                           sign: { Array(try! key.signature(for: SHA256.hash(data: $0)).rawRepresentation) },
                           publicBytes: Array(key.publicKey.pemRepresentation.utf8))
    }

    /// A P-384 key for `ES384`.
    static func p384(kid: String) -> ProviderKey {
        let key = P384.Signing.PrivateKey()
        let point = Array(key.publicKey.x963Representation)
        return ProviderKey(kid: kid, algorithm: "ES384",
                           jwk: ["kty": "EC", "crv": "P-384", "x": base64url(point[1..<49]), "y": base64url(point[49...])],
                           sign: { Array(try! key.signature(for: SHA384.hash(data: $0)).rawRepresentation) },
                           publicBytes: Array(key.publicKey.pemRepresentation.utf8))
    }

    /// An Ed25519 key for `EdDSA`.
    static func ed25519(kid: String) -> ProviderKey {
        let key = Curve25519.Signing.PrivateKey()
        return ProviderKey(kid: kid, algorithm: "EdDSA",
                           jwk: ["kty": "OKP", "crv": "Ed25519", "x": base64url(key.publicKey.rawRepresentation)],
                           sign: { Array(try! key.signature(for: $0)) },
                           publicBytes: Array(key.publicKey.rawRepresentation))
    }

    /// The same key under another JWK description (another `kid`, an `alg`, a `use`).
    func described(_ changes: [String: String]) -> ProviderKey {
        ProviderKey(kid: changes["kid"] ?? kid, algorithm: algorithm, jwk: jwk.merging(changes) { $1 }, sign: sign, publicBytes: publicBytes)
    }

    /// The JWK as published: its members plus `kid`.
    var published: [String: String] { ["kid": kid].merging(jwk) { $1 } }
}

/// Unpadded base64url, written here independently of the server's own codec.
func base64url<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A JSON text from a dictionary (for tokens' headers and claims).
func jsonText(_ object: [String: Any]) -> String {
    String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
}

/// A compact JWS of `claims`, with `header` members added to `alg` and `kid`.
func signedToken(_ claims: [String: Any], key: ProviderKey, header: [String: Any] = [:]) -> String {
    let head = (["alg": key.algorithm, "typ": "JWT", "kid": key.kid] as [String: Any]).merging(header) { $1 }
    return signedToken(headerJSON: jsonText(head), claimsJSON: jsonText(claims), sign: key.sign)
}

/// A compact JWS of raw JSON texts (which may be malformed on purpose) signed by `sign`.
func signedToken(headerJSON: String, claimsJSON: String, sign: ([UInt8]) -> [UInt8]) -> String {
    let input = base64url(Array(headerJSON.utf8)) + "." + base64url(Array(claimsJSON.utf8))
    return input + "." + base64url(sign(Array(input.utf8)))
}

/// An OpenID Connect provider on a loopback port, as far as a resource server sees one: a
/// discovery document and a JWKS endpoint, whose keys, `Cache-Control` and availability a
/// test changes while it runs, and which counts the key set's fetches.
final class TestIdentityProvider: Sendable {
    private struct State {
        var keys: [ProviderKey] = []
        var cacheControl: String? = "max-age=3600"
        var up = true
        var jwksFetches = 0
        var discoveryFetches = 0
    }

    private let state = Mutex(State())
    private let running: (port: Int, stop: @Sendable () async throws -> Void)

    /// `http://127.0.0.1:<port>`, also the issuer's `iss`.
    var issuer: String { "http://127.0.0.1:\(running.port)" }
    var jwksURL: URL { URL(string: issuer + "/jwks.json")! }
    var discoveryURL: URL { URL(string: issuer + "/.well-known/openid-configuration")! }

    private init(keys: [ProviderKey], running: (port: Int, stop: @Sendable () async throws -> Void)) {
        self.running = running
        state.withLock { $0.keys = keys }
    }

    /// Starts a provider publishing `keys`.
    static func start(keys: [ProviderKey]) async throws -> TestIdentityProvider {
        let box = Box<TestIdentityProvider?>(nil)
        let router = Router()
        router.get("jwks.json") { _, _ -> Response in
            guard let provider = box.value else { return Response(status: .serviceUnavailable) }
            return provider.serveKeys()
        }
        router.get(".well-known/openid-configuration") { _, _ -> Response in
            guard let provider = box.value else { return Response(status: .serviceUnavailable) }
            return provider.serveDiscovery()
        }
        let app = try await LoopbackApp.start(router)
        let provider = TestIdentityProvider(keys: keys, running: (app.port, { await app.stop() }))
        box.value = provider
        return provider
    }

    func stop() async throws { try await running.stop() }

    /// Replaces the published keys.
    func publish(_ keys: [ProviderKey]) { state.withLock { $0.keys = keys } }
    /// Answers 503 to everything while `false`.
    func setUp(_ up: Bool) { state.withLock { $0.up = up } }
    /// The key set's `Cache-Control` (none when `nil`).
    func setCacheControl(_ value: String?) { state.withLock { $0.cacheControl = value } }
    /// How many times the key set was fetched.
    var jwksFetches: Int { state.withLock { $0.jwksFetches } }
    var discoveryFetches: Int { state.withLock { $0.discoveryFetches } }

    private func serveKeys() -> Response {
        let (keys, cacheControl, up) = state.withLock { state in
            state.jwksFetches += 1
            return (state.keys, state.cacheControl, state.up)
        }
        guard up else { return Response(status: .serviceUnavailable) }
        var headers: HTTPFields = [.contentType: "application/json"]
        if let cacheControl { headers[.cacheControl] = cacheControl }
        let body = jsonText(["keys": keys.map(\.published)])
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    private func serveDiscovery() -> Response {
        let up = state.withLock { state in
            state.discoveryFetches += 1
            return state.up
        }
        guard up else { return Response(status: .serviceUnavailable) }
        let body = jsonText(["issuer": issuer, "jwks_uri": jwksURL.absoluteString, "id_token_signing_alg_values_supported": ["RS256"]])
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    /// Claims of a valid token for `identity`, for `audience`, issued now and valid an hour,
    /// with `extra` claims.
    func claims(_ identity: String, audience: Any = "app", extra: [String: Any] = [:]) -> [String: Any] {
        let now = Int(Date().timeIntervalSince1970)
        return (["iss": issuer, "sub": identity, "aud": audience, "iat": now, "exp": now + 3600] as [String: Any]).merging(extra) { $1 }
    }
}

/// Runs `body`, then stops `providers`, whether `body` threw or not.
func stopping(_ providers: TestIdentityProvider..., body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch {
        for provider in providers { try? await provider.stop() }
        throw error
    }
    for provider in providers { try await provider.stop() }
}
