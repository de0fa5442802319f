import Crypto
import Foundation
import Logging
import OfflineSync
import OfflineSyncServer
import _CryptoExtras

/// `auth-verify`: bearer tokens verified per second on one core. Our side verifies 10,000
/// identity-provider tokens each of RS256 (2048-bit RSA), ES256 and EdDSA through the
/// server's verifier (parsing, key lookup, signature, claims), with the issuer's key set
/// already cached; the baseline verifies 30,000 of the server's own HS256 development tokens
/// through the same verifier. Metrics: tokens per second per algorithm. Nothing is cached
/// between two verifications of the same token: each is verified in full.
enum AuthVerify: BenchWorkload {
    static let name = "auth-verify"
    static let baseline = "hs256-development-tokens"
    static let perAlgorithm = 10_000
    static var fixedRecords: Int? { perAlgorithm * 3 }
    /// Distinct tokens per algorithm, verified in turn.
    static let distinct = 100
    static let secret = Array("auth-verify bench secret, 32 bytes or more".utf8)
    static let issuer = "https://issuer.bench.invalid/"

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048), ec = P256.Signing.PrivateKey(), ed = Curve25519.Signing.PrivateKey()
        let primitives = try rsa.publicKey.getKeyPrimitives()
        let point = Array(ec.publicKey.x963Representation)
        let keys: [[String: String]] = [
            ["kid": "rs", "kty": "RSA", "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent)],
            ["kid": "es", "kty": "EC", "crv": "P-256", "x": Base64URL.encode(point[1..<33]), "y": Base64URL.encode(point[33...])],
            ["kid": "ed", "kty": "OKP", "crv": "Ed25519", "x": Base64URL.encode(ed.publicKey.rawRepresentation)],
        ]
        let file = directory.appendingPathComponent("jwks.json")
        try JSONSerialization.data(withJSONObject: ["keys": keys]).write(to: file)
        let verifier = try TokenVerifier(
            development: nil,
            issuers: [TokenIssuer(issuer: issuer, audiences: ["bench"], keys: .file(file.path))],
            policy: KeyRefreshPolicy(), logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
        let signers: [(kid: String, alg: String, sign: ([UInt8]) throws -> [UInt8])] = [
            ("rs", "RS256", { Array(try rsa.signature(for: SHA256.hash(data: $0), padding: .insecurePKCS1v1_5).rawRepresentation) }),
            ("es", "ES256", { Array(try ec.signature(for: SHA256.hash(data: $0)).rawRepresentation) }),
            ("ed", "EdDSA", { Array(try ed.signature(for: $0)) }),
        ]
        var total = 0.0
        for signer in signers {
            let tokens = try (0..<distinct).map { i in try token(kid: signer.kid, alg: signer.alg, identity: "user-\(i)", sign: signer.sign) }
            _ = try await verifier.verify(tokens[0])   // loads the key set
            let seconds = try await LocalWrites.measure {
                for i in 0..<perAlgorithm { _ = try await verifier.verify(tokens[i % distinct]) }
            }
            BenchMetrics.shared.set("\(signer.alg)PerSecond", Double(perAlgorithm) / seconds)
            total += seconds
        }
        return total
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let authority = try await TokenAuthority(secret: secret)
        let verifier = try TokenVerifier(development: authority, issuers: [], policy: KeyRefreshPolicy(),
                                         logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
        var tokens: [String] = []
        for i in 0..<distinct { tokens.append(try await authority.mint(identity: "user-\(i)")) }
        let count = perAlgorithm * 3
        let seconds = try await LocalWrites.measure {
            for i in 0..<count { _ = try await verifier.verify(tokens[i % distinct]) }
        }
        BenchMetrics.shared.set("HS256PerSecond", Double(count) / seconds)
        return seconds
    }

    static func token(kid: String, alg: String, identity: String, sign: ([UInt8]) throws -> [UInt8]) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        let header = try JSONSerialization.data(withJSONObject: ["alg": alg, "typ": "JWT", "kid": kid], options: .sortedKeys)
        let claims = try JSONSerialization.data(withJSONObject: [
            "iss": issuer, "sub": identity, "aud": "bench", "iat": now, "exp": now + 3600,
        ] as [String: Any], options: .sortedKeys)
        let input = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
    }
}
