import OfflineSync

/// What the server knows about the caller of a request: the identity its token names and
/// the token's other claims. Sync rules test claims with ``SyncRules/Condition``.
///
/// The server's own tokens carry `roles`; tokens from an app's identity provider will bring
/// their claims (groups, tenant, …) through the same type.
public struct Claims: Sendable, Hashable {
    /// The identity (the token's `sub`, after an issuer's prefix), compared by its bytes.
    public var identity: Identity
    /// The roles the token grants (the `roles` claim).
    public var roles: Set<String>
    /// Every other claim the rules may test, by name: a string or a list of strings.
    public var values: [String: [String]]

    /// Claims of `identity` with `roles` and other claim `values`.
    public init(identity: Identity, roles: Set<String> = [], values: [String: [String]] = [:]) {
        self.identity = identity
        self.roles = roles
        self.values = values
    }

    /// The values of the claim `name`: `roles` and `sub` are the named ones, any other comes
    /// from ``values`` (empty when the token does not carry it).
    public func values(of name: String) -> [String] {
        switch name {
        case "sub": return [identity.text]
        case "roles": return roles.sorted()
        default: return values[name] ?? []
        }
    }
}
