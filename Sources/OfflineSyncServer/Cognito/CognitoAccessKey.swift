import Foundation

/// An access key for the Cognito Sync API, verified with AWS Signature Version 4.
public struct CognitoAccessKey: Sendable, Hashable {
    /// The access key id (`AKIA…`).
    public var accessKeyId: String
    /// The secret access key.
    public var secretAccessKey: String
    /// The one identity the key may reach, or `nil` for a developer key that reaches every
    /// identity and the pool-level operations.
    public var identityId: String?

    /// Creates a key.
    public init(accessKeyId: String, secretAccessKey: String, identityId: String? = nil) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.identityId = identityId
    }

    /// Parses `ACCESS_KEY_ID:SECRET` or `ACCESS_KEY_ID:SECRET:IDENTITY_ID` (the identity may
    /// itself contain `:`).
    public init?(parsing text: String) {
        let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        if parts.count == 3, parts[2].isEmpty { return nil }
        self.init(accessKeyId: parts[0], secretAccessKey: parts[1], identityId: parts.count == 3 ? parts[2] : nil)
    }
}

/// Who is calling the Cognito Sync API.
enum CognitoCaller: Sendable {
    /// A developer access key: every identity, and the pool-level operations.
    case developer(accessKeyId: String)
    /// An identity: through an access key bound to it, or a bearer token of the server.
    case identity(String, via: String)

    /// Recorded as `LastModifiedBy`.
    var name: String {
        switch self {
        case .developer(let key): return key
        case .identity(let identity, _): return identity
        }
    }
}
