import Foundation
import OfflineSync

/// An identity provider whose tokens the server accepts: Auth0, Keycloak, a Cognito user
/// pool, Firebase Auth, Supabase Auth, or any OpenID Connect server that publishes its
/// signing keys as a JSON Web Key Set. `Docs/Server.md` shows each of those configured.
///
/// A token is taken as this issuer's when its `iss` equals ``issuer`` exactly; it is then
/// accepted only if it is signed with one of the issuer's keys by one of ``algorithms``, is
/// meant for one of ``audiences``, and is within its `exp` (required) and `nbf` give or take
/// ``clockSkew``. Its identity is the ``identityClaim``, its roles the ``rolesClaim``, and its
/// other top-level claims that are strings or lists of strings reach the sync rules' `when:`
/// conditions by name.
public struct TokenIssuer: Sendable, Hashable {
    /// The signature algorithms an issuer may use. Symmetric algorithms (`HS256`…) are not
    /// among them: a secret shared with an identity provider is a secret it can leak, and a
    /// published key must never double as an HMAC secret.
    public enum Algorithm: String, Sendable, Hashable, CaseIterable {
        case rs256 = "RS256", rs384 = "RS384", rs512 = "RS512"
        case ps256 = "PS256", ps384 = "PS384", ps512 = "PS512"
        case es256 = "ES256", es384 = "ES384", es512 = "ES512"
        case edDSA = "EdDSA"
    }

    /// Where the issuer's keys come from.
    public enum KeySource: Sendable, Hashable {
        /// A JWKS document at this URL: `https`, or `http` to a loopback address only.
        case jwks(URL)
        /// An OpenID Connect discovery document (`…/.well-known/openid-configuration`), whose
        /// `issuer` must equal the configured one and whose `jwks_uri` is then fetched (under
        /// the same scheme rule).
        case discovery(URL)
        /// A JWKS document in a local file, for deployments without a route to the provider;
        /// it is read again as a fetched set would be fetched again.
        case file(String)
    }

    /// The exact `iss` value of the issuer's tokens (Auth0's ends with `/`; Cognito's is
    /// `https://cognito-idp.<region>.amazonaws.com/<pool id>`).
    public var issuer: String
    /// The audiences accepted: a token must name at least one of them in its
    /// ``audienceClaim``. Empty only with ``acceptsAnyAudience``.
    public var audiences: Set<String>
    /// Accept tokens whatever their audience. Off by default: without an audience check, a
    /// token the provider issued to any other application of the same tenant would be
    /// accepted here.
    public var acceptsAnyAudience: Bool
    /// The claim holding the audience: `aud` (a string or a list), or `client_id` for Cognito
    /// access tokens, which carry no `aud`.
    public var audienceClaim: String
    /// Where the keys come from.
    public var keys: KeySource
    /// The algorithms accepted; a token's `alg` must be one of them and fit its key.
    public var algorithms: Set<Algorithm>
    /// How far `exp`, `nbf` and `iat` may be off the server's clock. Default 60 seconds.
    public var clockSkew: Duration
    /// The claim that names the identity (a path, as ``rolesClaim``). Default `sub`.
    public var identityClaim: String
    /// The claim holding the roles the sync rules test, as a string or a list of strings, or
    /// `nil` for none. A path: the whole text is tried as one claim name first
    /// (`cognito:groups`, `https://example.com/roles`), then as names separated by dots
    /// through nested objects (`realm_access.roles`).
    public var rolesClaim: String?
    /// Put before the identity claim's value to make the identity (`google:` + `sub`). With
    /// several issuers each needs its own, none the beginning of another's, so that two
    /// providers' users can never be taken for one another (one provider's `sub` is free text
    /// to another). Empty by default: the identity is the claim's value.
    public var identityPrefix: String
    /// The JOSE header `typ` a token must carry, or `nil` to accept any. `at+jwt` accepts only
    /// access tokens of the RFC 9068 profile (Auth0 issues them for an API set to that
    /// profile), so an ID token meant for the same audience is refused. Compared as RFC 7515
    /// §4.1.9 says media types are: without case, and with or without `application/`.
    public var requiredType: String?
    /// Claims a token must carry with exactly these string values: `token_use: access` keeps
    /// a Cognito user pool's ID tokens out, `typ: Bearer` a Keycloak realm's ID tokens.
    public var requiredClaims: [String: String]

    /// Creates an issuer. See ``validate()`` for what a usable one needs.
    public init(issuer: String, audiences: Set<String>, acceptsAnyAudience: Bool = false, audienceClaim: String = "aud",
                keys: KeySource, algorithms: Set<Algorithm> = Set(Algorithm.allCases), clockSkew: Duration = .seconds(60),
                identityClaim: String = "sub", rolesClaim: String? = nil, identityPrefix: String = "",
                requiredType: String? = nil, requiredClaims: [String: String] = [:]) {
        self.issuer = issuer
        self.audiences = audiences
        self.acceptsAnyAudience = acceptsAnyAudience
        self.audienceClaim = audienceClaim
        self.keys = keys
        self.algorithms = algorithms
        self.clockSkew = clockSkew
        self.identityClaim = identityClaim
        self.rolesClaim = rolesClaim
        self.identityPrefix = identityPrefix
        self.requiredType = requiredType
        self.requiredClaims = requiredClaims
    }

    /// Throws ``SyncError/Code/invalidConfiguration`` naming the problem: an empty issuer or
    /// the development tokens' own (`offline-sync`), no audience without the waiver, no
    /// algorithm, a clock skew outside 0–600 seconds, an empty claim name, an identity prefix
    /// over 64 bytes or with a control character, an empty required type or claim name, or a
    /// key URL that is neither `https` nor `http` to a loopback address.
    public func validate() throws {
        func fail(_ message: String) -> SyncError { SyncError(.invalidConfiguration, "issuer '\(issuer)': \(message)") }
        guard !issuer.isEmpty else { throw SyncError(.invalidConfiguration, "an issuer needs its 'iss' value") }
        guard issuer != TokenAuthority.issuer else { throw fail("'\(TokenAuthority.issuer)' is the development tokens' issuer") }
        guard !audiences.isEmpty || acceptsAnyAudience else {
            throw fail("name the accepted audiences (your application's client id or API identifier), or waive the check explicitly")
        }
        guard !audiences.contains("") else { throw fail("an audience may not be empty") }
        guard !algorithms.isEmpty else { throw fail("name at least one algorithm") }
        guard clockSkew >= .zero, clockSkew <= .seconds(600) else { throw fail("the clock skew must be 0 to 600 seconds") }
        guard !identityClaim.isEmpty, !audienceClaim.isEmpty, rolesClaim?.isEmpty != true else { throw fail("a claim name may not be empty") }
        guard identityPrefix.utf8.count <= 64,
              !identityPrefix.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw fail("the identity prefix is at most 64 bytes, with no control characters")
        }
        guard requiredType.map({ !Self.mediaType($0).isEmpty }) ?? true, !requiredClaims.keys.contains("") else {
            throw fail("a required token type or claim name may not be empty")
        }
        switch keys {
        case .jwks(let url), .discovery(let url):
            guard Self.isAllowedKeyURL(url) else {
                throw fail("\(url.absoluteString) must be https (or http to a loopback address)")
            }
        case .file(let path):
            guard !path.isEmpty else { throw fail("the key file path is empty") }
        }
    }

    /// `https` to anywhere, or `http` to `localhost`, `127.0.0.0/8` or `::1` (where nothing on
    /// the network can replace the keys in transit).
    static func isAllowedKeyURL(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else { return false }
        if scheme == "https" { return true }
        guard scheme == "http" else { return false }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if bare == "localhost" || bare == "::1" { return true }
        let octets = bare.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    /// Whether a token's header `typ` is the required one (always, when none is required).
    func acceptsType(_ typ: String?) -> Bool {
        guard let requiredType else { return true }
        guard let typ else { return false }
        return Self.mediaType(typ) == Self.mediaType(requiredType)
    }

    /// A `typ` value as RFC 7515 §4.1.9 compares it: lowercased, without `application/`.
    static func mediaType(_ text: String) -> String {
        let lowered = text.lowercased()
        return lowered.hasPrefix("application/") ? String(lowered.dropFirst("application/".count)) : lowered
    }
}
