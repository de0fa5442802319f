import Foundation
import OfflineSync
import Yams

extension TokenIssuer {
    /// Reads the `issuers:` section of a server configuration document (`offline-sync serve
    /// --issuer FILE`; `Docs/Server.md` shows one per provider):
    ///
    /// ```yaml
    /// issuers:
    ///   - issuer: https://id.example.com/realms/app     # the tokens' exact `iss`
    ///     audiences: [app-api]                          # or any_audience: true
    ///     discovery_url: https://id.example.com/realms/app/.well-known/openid-configuration
    ///     # or jwks_url: https://…, or jwks_file: /etc/offline-sync/keys.json
    ///     algorithms: [RS256]                           # default: every RS, PS, ES and EdDSA
    ///     clock_skew_seconds: 60
    ///     identity_claim: sub
    ///     identity_prefix: "kc:"                        # required of each when there are several
    ///     roles_claim: realm_access.roles
    ///     audience_claim: aud                           # client_id for Cognito access tokens
    ///     token_type: at+jwt                            # the header typ a token must carry
    ///     required_claims: { token_use: access }        # claims a token must carry, with these values
    /// ```
    ///
    /// Throws ``SyncError/Code/invalidConfiguration`` with `<source>:<line>:` and the problem
    /// for anything it cannot use, including what ``validate()`` refuses.
    public static func issuers(yaml: String, source: String = "issuers") throws -> [TokenIssuer] {
        let root = try IssuersReader.compose(yaml: yaml, source: source, what: "the issuers document")
        return try IssuersReader(source: source).document(root)
    }

    /// Reads the issuers document at `path` (see ``issuers(yaml:source:)``).
    public static func issuers(contentsOfFile path: String) throws -> [TokenIssuer] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw SyncError(.invalidConfiguration, "cannot read the issuers file \(path)")
        }
        return try issuers(yaml: text, source: path)
    }
}

private struct IssuersReader: YAMLReading {
    let source: String

    static let keys: Set<String> = ["issuer", "audiences", "any_audience", "audience_claim", "jwks_url", "discovery_url", "jwks_file",
                                    "algorithms", "clock_skew_seconds", "identity_claim", "identity_prefix", "roles_claim",
                                    "token_type", "required_claims"]

    func document(_ root: Node) throws -> [TokenIssuer] {
        var result: [TokenIssuer] = []
        for (_, keyNode, value) in try entries(root, "the issuers document", allowed: ["issuers"]) {
            guard let sequence = value.sequence, !sequence.isEmpty else { throw fail(keyNode, "'issuers' must be a list of issuers") }
            for node in sequence {
                let issuer = try self.issuer(node)
                guard !result.contains(where: { $0.issuer == issuer.issuer }) else {
                    throw fail(node, "issuer '\(issuer.issuer)' appears twice")
                }
                result.append(issuer)
            }
        }
        return result
    }

    private func issuer(_ node: Node) throws -> TokenIssuer {
        var values: [String: (keyNode: Node, value: Node)] = [:]
        for (key, keyNode, value) in try entries(node, "an issuer", allowed: Self.keys) { values[key] = (keyNode, value) }
        guard let name = values["issuer"] else { throw fail(node, "an issuer needs 'issuer': its tokens' exact 'iss'") }
        let sources = ["jwks_url", "discovery_url", "jwks_file"].filter { values[$0] != nil }
        guard sources.count == 1 else { throw fail(node, "an issuer needs exactly one of jwks_url, discovery_url and jwks_file") }
        let sourceNode = values[sources[0]]!.value
        let sourceText = try string(sourceNode, sources[0])
        let keys: TokenIssuer.KeySource
        if sources[0] == "jwks_file" {
            keys = .file(sourceText)
        } else {
            guard let url = URL(string: sourceText), TokenIssuer.isAllowedKeyURL(url) else {
                throw fail(sourceNode, "\(sources[0]) must be an https URL (or http to a loopback address)")
            }
            keys = sources[0] == "jwks_url" ? .jwks(url) : .discovery(url)
        }
        var issuer = TokenIssuer(issuer: try string(name.value, "issuer"), audiences: [], keys: keys)
        if let audiences = values["audiences"] { issuer.audiences = Set(try strings(audiences.value, "audiences")) }
        if let waiver = values["any_audience"] {
            guard let flag = waiver.value.scalar.flatMap({ Bool.construct(from: $0) }) else {
                throw fail(waiver.value, "any_audience must be true or false")
            }
            issuer.acceptsAnyAudience = flag
        }
        if let claim = values["audience_claim"] { issuer.audienceClaim = try string(claim.value, "audience_claim") }
        if let algorithms = values["algorithms"] {
            issuer.algorithms = Set(try strings(algorithms.value, "algorithms").map { name in
                guard let algorithm = TokenIssuer.Algorithm(rawValue: name) else {
                    throw fail(algorithms.value, "unknown algorithm '\(name)'; expected some of "
                               + TokenIssuer.Algorithm.allCases.map(\.rawValue).joined(separator: ", "))
                }
                return algorithm
            })
        }
        if let skew = values["clock_skew_seconds"] {
            guard let seconds = skew.value.scalar.flatMap({ Int($0.string) }) else {
                throw fail(skew.value, "clock_skew_seconds must be a whole number of seconds")
            }
            issuer.clockSkew = .seconds(seconds)
        }
        if let claim = values["identity_claim"] { issuer.identityClaim = try string(claim.value, "identity_claim") }
        if let claim = values["roles_claim"] { issuer.rolesClaim = try string(claim.value, "roles_claim") }
        if let prefix = values["identity_prefix"] { issuer.identityPrefix = try string(prefix.value, "identity_prefix") }
        if let type = values["token_type"] { issuer.requiredType = try string(type.value, "token_type") }
        if let required = values["required_claims"] {
            guard let mapping = required.value.mapping else {
                throw fail(required.value, "required_claims maps claim names to the string each must have")
            }
            for (key, value) in mapping {
                let name = try string(key, "a required claim's name")
                issuer.requiredClaims[name] = try string(value, "required claim '\(name)'")
            }
        }
        do {
            try issuer.validate()
        } catch let error as SyncError {
            throw fail(node, error.message)
        }
        return issuer
    }
}
