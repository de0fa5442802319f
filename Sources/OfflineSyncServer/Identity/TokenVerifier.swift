import Foundation
import Logging
import OfflineSync
import OfflineSyncService
import OfflineSyncWire

/// A caller whose bearer token was verified: its claims, and when the token stops being
/// valid (a change channel is closed then).
package struct VerifiedToken: Sendable {
    package let claims: Claims
    package let expires: Date
}

/// A token that could be neither accepted nor refused now: its issuer's keys could not be
/// had (``KeyLookup/unavailable(retryAfter:)``). Answered 503 with `Retry-After`, which a
/// client retries instead of taking its credentials for refused.
package struct KeysUnavailable: Error, Sendable {
    /// When a retry may pass.
    package let retryAfter: Duration
}

/// Verifies every bearer token the server is given: its own development tokens
/// (``TokenAuthority``), while they are on, and those of the configured identity providers
/// (``TokenIssuer``).
///
/// The token's `iss` picks the verifier; nothing else in an unverified token is trusted.
/// Every refusal is the same ``SyncError/Code/authenticationFailed`` to the caller; the
/// reason goes to the server's log at debug level, naming the configured issuer at most and
/// never any part of the token.
///
/// Development tokens and issuers' tokens never name one identity: with both on, every
/// issuer has an identity prefix, and a development token whose identity starts with one is
/// refused (and is never minted).
package final class TokenVerifier: Sendable {
    private let development: TokenAuthority?
    private let issuers: [String: IssuerKeys]
    private let logger: Logger
    private let policy: KeyRefreshPolicy

    /// `keySetFetched` is told of every key-set fetch's end (the server counts them).
    package init(development: TokenAuthority?, issuers: [TokenIssuer], policy: KeyRefreshPolicy, logger: Logger,
                 keySetFetched: @escaping @Sendable (_ issuer: String, _ ok: Bool) -> Void = { _, _ in }) throws {
        self.development = development
        self.logger = logger
        self.policy = policy
        if development != nil, let open = issuers.first(where: { $0.identityPrefix.isEmpty }) {
            throw SyncError(.invalidConfiguration, "development tokens could carry any identity of issuer '\(open.issuer)': "
                            + "turn them off (serve --development-tokens off) or give the issuer an identity_prefix")
        }
        var keyed: [String: IssuerKeys] = [:]
        for issuer in issuers {
            try issuer.validate()
            guard keyed[issuer.issuer] == nil else {
                throw SyncError(.invalidConfiguration, "issuer '\(issuer.issuer)' is configured twice")
            }
            keyed[issuer.issuer] = IssuerKeys(issuer: issuer, policy: policy, logger: logger, fetched: keySetFetched)
        }
        self.issuers = keyed
        if issuers.count > 1 {
            for (index, one) in issuers.enumerated() {
                // Bytes, not characters: identities are compared by their bytes, and
                // `String.hasPrefix` would miss a prefix spelled in another normalisation.
                for other in issuers[(index + 1)...] where one.identityPrefix.utf8.starts(with: other.identityPrefix.utf8)
                    || other.identityPrefix.utf8.starts(with: one.identityPrefix.utf8) {
                    throw SyncError(.invalidConfiguration, "issuers '\(one.issuer)' and '\(other.issuer)' could give two users one identity: "
                                    + "give each an identity_prefix of its own, none the beginning of another's")
                }
            }
        }
    }

    /// Whether the server's own development tokens are accepted.
    package var acceptsDevelopmentTokens: Bool { development != nil }

    /// Starts fetching every issuer's keys in the background, and logs which token sources
    /// are on.
    package func start() {
        if development != nil {
            logger.notice("token source: development tokens (HS256 over the server's token secret; minted by `offline-sync token` and POST /v1/admin/tokens)")
        } else {
            logger.notice("token source: development tokens are off")
        }
        for keys in issuers.values.sorted(by: { $0.issuer.issuer < $1.issuer.issuer }) {
            let issuer = keys.issuer
            var terms = ["identities '\(issuer.identityPrefix)…'"]
            if let type = issuer.requiredType { terms.append("typ \(type)") }
            terms += issuer.requiredClaims.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            terms.append("keys used up to \(policy.maximumStaleness.components.seconds) s past their lifetime while refreshes fail")
            logger.notice("token source: issuer \(issuer.issuer) (\(terms.joined(separator: "; ")))")
            keys.start()
        }
    }

    /// Throws ``SyncError/Code/invalidValue`` for an identity a development token may not
    /// carry: one in an issuer's namespace (starting with its identity prefix).
    package func checkDevelopmentIdentity(_ identity: String) throws {
        if let issuer = issuers.values.first(where: { identity.utf8.starts(with: $0.issuer.identityPrefix.utf8) })?.issuer {
            throw SyncError(.invalidValue, "a development token may not carry an identity of issuer '\(issuer.issuer)' "
                            + "(it starts with '\(issuer.identityPrefix)')")
        }
    }

    /// The verified claims of `token`. Throws ``SyncError/Code/authenticationFailed`` with no
    /// detail for any token that is not valid now, and ``KeysUnavailable`` for one whose
    /// issuer's keys cannot be had now.
    package func verify(_ token: String, now: Date = Date()) async throws -> VerifiedToken {
        do throws(TokenRefusal) {
            return try await check(token, now: now)
        } catch {
            logger.debug("token refused", metadata: ["reason": "\(error.reason)"])
            if let retryAfter = error.retryAfter { throw KeysUnavailable(retryAfter: retryAfter) }
            throw TokenAuthority.refused
        }
    }

    private func check(_ token: String, now: Date) async throws(TokenRefusal) -> VerifiedToken {
        let parsed = try CompactToken(token)
        guard case .string(let issuerName)? = parsed.payload["iss"] else { throw TokenRefusal("no 'iss' claim") }
        if issuerName == TokenAuthority.issuer {
            guard let development else { throw TokenRefusal("a development token, and they are off") }
            let verified = try await development.verify(parsed, now: now)
            guard (try? checkDevelopmentIdentity(verified.claims.identity.text)) != nil else {
                throw TokenRefusal("a development token naming an identity of an issuer")
            }
            return verified
        }
        guard let keys = issuers[issuerName] else { throw TokenRefusal("an issuer that is not configured") }
        let issuer = keys.issuer
        let refuse = { (reason: String) in TokenRefusal("issuer \(issuer.issuer): \(reason)") }
        guard let algorithm = TokenIssuer.Algorithm(rawValue: parsed.algorithm), issuer.algorithms.contains(algorithm) else {
            throw refuse("an algorithm the issuer does not allow")
        }
        let candidates: [VerificationKey]
        switch await keys.lookup(keyId: parsed.keyId, algorithm: algorithm) {
        case .found(let keys): candidates = keys
        case .unknown: throw refuse("no key of the issuer fits the token's key id and algorithm")
        case .unavailable(let retryAfter):
            throw TokenRefusal("issuer \(issuer.issuer): its keys cannot be had now", retryAfter: retryAfter)
        }
        guard candidates.contains(where: { $0.isValidSignature(parsed.signature, of: parsed.signingInput, algorithm: algorithm) }) else {
            throw refuse("bad signature")
        }
        let skew = Double(issuer.clockSkew.components.seconds)
        let nowSeconds = now.timeIntervalSince1970
        guard let exp = Self.seconds(parsed.payload["exp"]) else { throw refuse("no numeric 'exp'") }
        guard nowSeconds < exp + skew else { throw refuse("expired") }
        if let nbf = parsed.payload["nbf"] {
            guard let value = Self.seconds(nbf), nowSeconds + skew >= value else { throw refuse("not valid yet") }
        }
        if let iat = parsed.payload["iat"] {
            guard let value = Self.seconds(iat), value <= nowSeconds + skew else { throw refuse("issued in the future") }
        }
        if !issuer.acceptsAnyAudience {
            guard let audiences = Self.strings(Self.claim(issuer.audienceClaim, in: parsed.payload)),
                  audiences.contains(where: issuer.audiences.contains) else {
                throw refuse("a missing or foreign audience")
            }
        }
        let typ: String?
        switch parsed.header["typ"] {
        case .string(let text)?: typ = text
        case nil: typ = nil
        default: throw refuse("a header 'typ' that is not a string")
        }
        guard issuer.acceptsType(typ) else { throw refuse("a token type the issuer does not accept") }
        for (name, value) in issuer.requiredClaims {
            guard case .string(value)? = parsed.payload[name] else { throw refuse("claim '\(name)' is missing or has another value") }
        }
        guard case .string(let subject)? = Self.claim(issuer.identityClaim, in: parsed.payload), !subject.isEmpty else {
            throw refuse("no string identity claim")
        }
        let identity = issuer.identityPrefix + subject
        var roles: Set<String> = []
        if let path = issuer.rolesClaim, let value = Self.claim(path, in: parsed.payload) {
            guard let list = Self.strings(value) else { throw refuse("a roles claim that is neither a string nor a list of strings") }
            roles = Set(list)
        }
        guard let valid = try? Identity(identity), (try? TokenAuthority.validate(roles: roles)) != nil else {
            throw refuse("an identity or roles the service does not accept")
        }
        var values: [String: [String]] = [:]
        if case .object(let members) = parsed.payload {
            for member in members {
                if let list = Self.strings(member.value) { values[member.key] = list }
            }
        }
        return VerifiedToken(claims: Claims(identity: valid, roles: roles, values: values), expires: Date(timeIntervalSince1970: exp))
    }

    /// The claim at `path`: the whole text as one name first, then as dot-separated names
    /// through nested objects.
    static func claim(_ path: String, in payload: JSON) -> JSON? {
        if let direct = payload[path] { return direct }
        var node = payload
        for name in path.split(separator: ".", omittingEmptySubsequences: false) {
            guard let next = node[String(name)] else { return nil }
            node = next
        }
        return node
    }

    /// A string as a one-element list, or a list of strings; `nil` for anything else.
    static func strings(_ value: JSON?) -> [String]? {
        switch value {
        case .string(let text)?: return [text]
        case .array(let items)?:
            var result: [String] = []
            for item in items {
                guard case .string(let text) = item else { return nil }
                result.append(text)
            }
            return result
        default: return nil
        }
    }

    /// A NumericDate (RFC 7519 §2): a JSON number of seconds, possibly fractional.
    static func seconds(_ value: JSON?) -> Double? {
        guard case .number(let text)? = value, let seconds = Double(text), seconds.isFinite else { return nil }
        return seconds
    }
}
