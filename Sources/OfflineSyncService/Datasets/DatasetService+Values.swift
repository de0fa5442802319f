import Foundation
import OfflineSync
import OfflineSyncDatasets

/// An identity's dataset usage.
public struct IdentityUsage: Sendable, Hashable {
    /// The identity.
    public var identityId: String
    /// Its pool.
    public var identityPoolId: String
    /// When one of its datasets last changed.
    public var lastModifiedDate: Timestamp?
    /// How many datasets it has.
    public var datasetCount: Int
    /// Bytes of keys and values in them.
    public var dataStorage: Int64
}

/// An identity pool's usage.
public struct PoolUsage: Sendable, Hashable {
    /// The pool.
    public var identityPoolId: String
    /// How many sync sessions were opened.
    public var syncSessionsCount: Int64
    /// Bytes of keys and values of all its identities.
    public var dataStorage: Int64
    /// When it last changed.
    public var lastModifiedDate: Timestamp?
}

/// A pool's push-sync configuration.
public struct PushSyncConfiguration: Sendable, Hashable {
    /// The SNS platform application ARNs.
    public var applicationArns: [String]
    /// The role used to publish.
    public var roleArn: String?
    /// Creates a configuration.
    public init(applicationArns: [String], roleArn: String?) {
        self.applicationArns = applicationArns
        self.roleArn = roleArn
    }
}

/// A pool's Cognito streams configuration.
public struct StreamsConfiguration: Sendable, Hashable {
    /// The stream's name.
    public var streamName: String
    /// The role used to publish.
    public var roleArn: String?
    /// Whether updates are streamed.
    public var enabled: Bool
    /// Creates a configuration.
    public init(streamName: String, roleArn: String?, enabled: Bool) {
        self.streamName = streamName
        self.roleArn = roleArn
        self.enabled = enabled
    }
}

/// A pool's configuration.
public struct PoolConfiguration: Sendable, Hashable {
    /// The pool.
    public var identityPoolId: String
    /// Push sync, if configured.
    public var pushSync: PushSyncConfiguration?
    /// Streams, if configured.
    public var streams: StreamsConfiguration?
}

/// The state of a pool's last bulk publish.
public struct BulkPublishDetails: Sendable, Hashable {
    /// The pool.
    public var identityPoolId: String
    /// `NOT_STARTED`, `IN_PROGRESS`, `FAILED` or `SUCCEEDED`.
    public var status: String
    /// When it started.
    public var startTime: Timestamp?
    /// When it ended.
    public var completeTime: Timestamp?
    /// Why it failed.
    public var failureMessage: String?
}

/// One record sent to a pool's stream.
public struct DatasetStreamRecord: Sendable, Hashable {
    /// The pool.
    public var identityPoolId: String
    /// The identity.
    public var identityId: String
    /// The dataset.
    public var datasetName: String
    /// The record (no value for a removed key).
    public var record: RemoteDatasetRecord
}

/// Where Cognito streams go: the server's stand-in for a Kinesis stream.
public protocol DatasetStreamSink: Sendable {
    /// Appends records to the named stream.
    func publish(stream: String, records: [DatasetStreamRecord]) async throws
}
