import Crypto
import Foundation
import OfflineSyncWire
import _CryptoExtras

/// A public key from an issuer's JSON Web Key Set, bound to the algorithms it may verify.
///
/// A key verifies only what its type allows (RSA: `RS*` and `PS*`; an EC key: the one `ES*`
/// of its curve; an Ed25519 key: `EdDSA`), and only the algorithm it names when its JWK has
/// an `alg`: the token's header never widens what a key is for. That is what makes
/// algorithm confusion impossible — an `HS256` token "signed" with a published RSA or EC key
/// has no key to be checked against, since symmetric (`oct`) keys are never loaded from a
/// key set.
struct VerificationKey: Sendable {
    enum Material: Sendable {
        case rsa(_RSA.Signing.PublicKey)
        case p256(P256.Signing.PublicKey)
        case p384(P384.Signing.PublicKey)
        case p521(P521.Signing.PublicKey)
        case ed25519(Curve25519.Signing.PublicKey)
    }

    /// The JWK's `kid`, if it has one.
    let id: String?
    /// The JWK's `alg`, if it names one: then it is the only algorithm the key verifies.
    let algorithm: TokenIssuer.Algorithm?
    let material: Material

    /// Whether this key may verify a token signed with `algorithm`.
    func verifies(_ algorithm: TokenIssuer.Algorithm) -> Bool {
        if let own = self.algorithm, own != algorithm { return false }
        switch (material, algorithm) {
        case (.rsa, .rs256), (.rsa, .rs384), (.rsa, .rs512), (.rsa, .ps256), (.rsa, .ps384), (.rsa, .ps512): return true
        case (.p256, .es256), (.p384, .es384), (.p521, .es512), (.ed25519, .edDSA): return true
        default: return false
        }
    }

    /// Whether `signature` is this key's signature of `input` under `algorithm` (which
    /// ``verifies(_:)`` must allow).
    func isValidSignature(_ signature: [UInt8], of input: [UInt8], algorithm: TokenIssuer.Algorithm) -> Bool {
        guard verifies(algorithm) else { return false }
        switch material {
        case .rsa(let key):
            let rsaSignature = _RSA.Signing.RSASignature(rawRepresentation: signature)
            let padding: _RSA.Signing.Padding = [.ps256, .ps384, .ps512].contains(algorithm) ? .PSS : .insecurePKCS1v1_5
            switch algorithm {
            case .rs256, .ps256: return key.isValidSignature(rsaSignature, for: SHA256.hash(data: input), padding: padding)
            case .rs384, .ps384: return key.isValidSignature(rsaSignature, for: SHA384.hash(data: input), padding: padding)
            case .rs512, .ps512: return key.isValidSignature(rsaSignature, for: SHA512.hash(data: input), padding: padding)
            default: return false
            }
        case .p256(let key):
            guard let value = try? P256.Signing.ECDSASignature(rawRepresentation: signature), signature.count == 64 else { return false }
            return key.isValidSignature(value, for: SHA256.hash(data: input))
        case .p384(let key):
            guard let value = try? P384.Signing.ECDSASignature(rawRepresentation: signature), signature.count == 96 else { return false }
            return key.isValidSignature(value, for: SHA384.hash(data: input))
        case .p521(let key):
            guard let value = try? P521.Signing.ECDSASignature(rawRepresentation: signature), signature.count == 132 else { return false }
            return key.isValidSignature(value, for: SHA512.hash(data: input))
        case .ed25519(let key):
            return signature.count == 64 && key.isValidSignature(signature, for: input)
        }
    }
}

/// The keys of one JSON Web Key Set (RFC 7517) that can verify signatures.
package struct KeySet: Sendable {
    /// The usable keys, in the document's order.
    let keys: [VerificationKey]
    /// How many keys the document held that were left out (encryption keys, symmetric keys,
    /// unknown types or curves, RSA keys under 2048 bits, malformed entries).
    package let skipped: Int
    /// How many keys were kept.
    package var usableCount: Int { keys.count }

    /// Reads a JWKS document. Throws ``TokenRefusal`` when it is not a JSON object with a
    /// `keys` array; a key that cannot be used for verification is skipped, not fatal, so
    /// one exotic key (an encryption key, a post-quantum key) does not take the others down.
    package init(document: JSON) throws(TokenRefusal) {
        guard case .array(let entries)? = document["keys"] else { throw TokenRefusal("the key set has no 'keys' array") }
        var keys: [VerificationKey] = []
        for entry in entries {
            if let key = Self.key(entry) { keys.append(key) }
        }
        self.keys = keys
        self.skipped = entries.count - keys.count
    }

    /// The keys that may verify a token with `algorithm` and key id `keyId`: those with that
    /// `kid`, or — for a token without one — every key when the set has exactly one that
    /// fits (more would make the token choose among them by trial).
    func candidates(keyId: String?, algorithm: TokenIssuer.Algorithm) -> [VerificationKey] {
        let fitting = keys.filter { $0.verifies(algorithm) }
        guard let keyId else { return fitting.count == 1 ? fitting : [] }
        return fitting.filter { $0.id == keyId }
    }

    /// Whether the set has a key with id `keyId`, for any algorithm.
    func contains(keyId: String) -> Bool { keys.contains { $0.id == keyId } }

    private static func key(_ entry: JSON) -> VerificationKey? {
        guard case .object = entry, case .string(let type)? = entry["kty"] else { return nil }
        if let use = entry["use"] {
            guard case .string("sig") = use else { return nil }
        }
        if let operations = entry["key_ops"] {
            guard case .array(let items) = operations, items.contains(.string("verify")) else { return nil }
        }
        var id: String?
        if let kid = entry["kid"] {
            guard case .string(let text) = kid else { return nil }
            id = text
        }
        var algorithm: TokenIssuer.Algorithm?
        if let alg = entry["alg"] {
            guard case .string(let name) = alg, let known = TokenIssuer.Algorithm(rawValue: name) else { return nil }
            algorithm = known
        }
        func bytes(_ name: String) -> [UInt8]? {
            guard case .string(let text)? = entry[name] else { return nil }
            return Base64URL.decode(text.utf8)
        }
        let material: VerificationKey.Material
        switch type {
        case "RSA":
            guard let n = bytes("n"), let e = bytes("e"), let key = try? _RSA.Signing.PublicKey(n: n, e: e) else { return nil }
            material = .rsa(key)
        case "EC":
            guard case .string(let curve)? = entry["crv"], let x = bytes("x"), let y = bytes("y") else { return nil }
            let point = [0x04] + x + y
            switch curve {
            case "P-256": guard x.count == 32, y.count == 32, let key = try? P256.Signing.PublicKey(x963Representation: point) else { return nil }
                material = .p256(key)
            case "P-384": guard x.count == 48, y.count == 48, let key = try? P384.Signing.PublicKey(x963Representation: point) else { return nil }
                material = .p384(key)
            case "P-521": guard x.count == 66, y.count == 66, let key = try? P521.Signing.PublicKey(x963Representation: point) else { return nil }
                material = .p521(key)
            default: return nil
            }
        case "OKP":
            guard case .string("Ed25519")? = entry["crv"], let x = bytes("x"), x.count == 32,
                  let key = try? Curve25519.Signing.PublicKey(rawRepresentation: x) else { return nil }
            material = .ed25519(key)
        default:
            // `oct` (a shared secret has no place in a published key set) and anything unknown.
            return nil
        }
        let key = VerificationKey(id: id, algorithm: algorithm, material: material)
        if let algorithm, !key.verifies(algorithm) { return nil }   // an `alg` its type cannot do
        return key
    }
}
