import Crypto
import Foundation
import JWTKit
import OfflineSync
import OfflineSyncService

/// Mints and verifies the bearer tokens that carry a client's identity: JSON Web Tokens
/// signed with HMAC-SHA256 over a server secret (`sub` is the identity, `exp` the expiry,
/// `roles` the roles sync rules may require; a token without roles carries no `roles` claim).
///
/// Verification refuses, without saying which: a malformed token or one spelled otherwise
/// than minted (padding, spare bits), a header naming another algorithm (`none` included)
/// or a critical extension, a bad signature, an expired token, a token issued for another issuer
/// and an identity the service would not accept.
public struct TokenAuthority: Sendable {
    /// The smallest secret accepted, in bytes (HS256 keys shorter than the hash are weak).
    public static let minimumSecretLength = 32
    /// The `iss` claim this server writes and requires.
    public static let issuer = "offline-sync"

    private let keys: JWTKeyCollection
    private let secret: SymmetricKey

    /// Creates an authority over `secret`. Throws ``SyncError/Code/invalidValue`` for a secret
    /// shorter than ``minimumSecretLength`` bytes.
    public init(secret: [UInt8]) async throws {
        guard secret.count >= Self.minimumSecretLength else {
            throw SyncError(.invalidValue, "the token secret must be at least \(Self.minimumSecretLength) bytes")
        }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        self.keys = keys
        self.secret = SymmetricKey(data: secret)
    }

    /// A token for `identity` with `roles`, valid for `lifetime` from `now`. Throws
    /// ``SyncError/Code/invalidValue`` for a role that is empty, over 128 bytes or holds a
    /// control character, or more than 64 roles.
    public func mint(identity: String, roles: Set<String> = [], lifetime: Duration = .seconds(24 * 3600),
                     now: Date = Date()) async throws -> String {
        try Self.validate(identity: identity)
        try Self.validate(roles: roles)
        let seconds = Double(lifetime.components.seconds) + Double(lifetime.components.attoseconds) / 1e18
        let claims = IdentityClaims(sub: SubjectClaim(value: identity), iss: IssuerClaim(value: Self.issuer),
                                    iat: IssuedAtClaim(value: now), exp: ExpirationClaim(value: now.addingTimeInterval(seconds)),
                                    roles: roles.isEmpty ? nil : roles.sorted())
        return try await keys.sign(claims)
    }

    /// The identity a valid token carries. Throws ``SyncError/Code/authenticationFailed``
    /// (with no detail) for anything else.
    public func identity(fromToken token: String) async throws -> Identity {
        try await claims(fromToken: token).identity
    }

    /// The claims a valid token carries: its identity and roles. Throws
    /// ``SyncError/Code/authenticationFailed`` (with no detail) for anything else, a token
    /// with invalid roles included.
    public func claims(fromToken token: String) async throws -> Claims {
        do throws(TokenRefusal) {
            return try await verify(CompactToken(token), now: Date()).claims
        } catch {
            throw Self.refused
        }
    }

    /// Verifies a token this authority minted: `HS256` under the secret, `iss` this server's,
    /// a string `sub` the service accepts, `exp` in the future (no skew: the server's own
    /// clock minted it), roles that ``validate(roles:)`` accepts.
    func verify(_ token: CompactToken, now: Date) async throws(TokenRefusal) -> VerifiedToken {
        guard token.algorithm == "HS256" else { throw TokenRefusal("a development token that is not HS256") }
        guard HMAC<SHA256>.isValidAuthenticationCode(token.signature, authenticating: token.signingInput, using: secret) else {
            throw TokenRefusal("a development token with a bad signature")
        }
        guard case .string(Self.issuer)? = token.payload["iss"], case .string(let identity)? = token.payload["sub"],
              let exp = TokenVerifier.seconds(token.payload["exp"]) else {
            throw TokenRefusal("a development token without iss, sub or exp")
        }
        guard now.timeIntervalSince1970 < exp else { throw TokenRefusal("an expired development token") }
        var roles: Set<String> = []
        if let value = token.payload["roles"] {
            guard let list = TokenVerifier.strings(value), case .array = value else { throw TokenRefusal("development token roles that are not a list") }
            roles = Set(list)
        }
        guard let valid = try? Identity(identity), (try? Self.validate(roles: roles)) != nil else {
            throw TokenRefusal("a development token with an identity or roles the service does not accept")
        }
        return VerifiedToken(claims: Claims(identity: valid, roles: roles), expires: Date(timeIntervalSince1970: exp))
    }

    static func validate(roles: Set<String>) throws {
        guard roles.count <= 64 else { throw SyncError(.invalidValue, "a token carries at most 64 roles") }
        for role in roles where role.isEmpty || role.utf8.count > 128 || role.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw SyncError(.invalidValue, "a role is 1 to 128 bytes with no control characters")
        }
    }

    static let refused = SyncError(.authenticationFailed, "missing, invalid or expired token")

    /// The identities the service accepts: ``Identity/validate(_:)``'s rule.
    static func validate(identity: String) throws { try Identity.validate(identity) }
}

/// The claims of an identity token.
struct IdentityClaims: JWTPayload {
    var sub: SubjectClaim
    var iss: IssuerClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    /// Absent from tokens without roles, so those stay exactly as they were minted before.
    var roles: [String]?

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
        guard iss.value == TokenAuthority.issuer else { throw JWTError.claimVerificationFailure(failedClaim: iss, reason: "issuer") }
    }
}
