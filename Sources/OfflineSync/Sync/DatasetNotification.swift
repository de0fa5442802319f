/// A push-sync notification: a subscribed dataset of the identity changed on the remote.
/// Sent as `{"source": "offline-sync", "identityPoolId", "identityId", "datasetName", "syncCount"}`.
public struct DatasetNotification: Sendable, Hashable {
    /// The identity pool.
    public var identityPoolId: String
    /// The identity.
    public var identityId: String
    /// The dataset that changed.
    public var datasetName: String
    /// Its sync count after the change.
    public var syncCount: Int64

    /// Creates a notification.
    public init(identityPoolId: String, identityId: String, datasetName: String, syncCount: Int64) {
        self.identityPoolId = identityPoolId
        self.identityId = identityId
        self.datasetName = datasetName
        self.syncCount = syncCount
    }
}
