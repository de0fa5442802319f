import Foundation
import OfflineSync

/// The remote side of datasets, in the Amazon Cognito Sync model, for one identity of one
/// identity pool: what ``Dataset/synchronize(_:)`` talks to.
///
/// Every dataset on the remote has a sync count that grows by one with every accepted
/// ``updateRecords(dataset:patches:syncSessionToken:deviceId:)``; every record carries the
/// dataset's sync count of its last change. Listing records after a sync count therefore
/// returns every change since then, with no gap, however many writers there are.
///
/// Implementations: the service's in-process remote (`DatasetService.remote(pool:identity:)`
/// in `OfflineSyncService`) and the HTTP client for the server's Cognito Sync API
/// (`HTTPDatasetRemote` in `OfflineSyncHTTP`). Failures are ``SyncError``s:
/// ``SyncError/Code/conflict`` for a stale record sync count (nothing applied),
/// ``SyncError/Code/limitExceeded``, ``SyncError/Code/notFound``,
/// ``SyncError/Code/forbidden``, ``SyncError/Code/invalidValue`` for a bad parameter or
/// session token, and ``SyncError/Code/transient`` when the remote cannot be reached.
public protocol DatasetRemote: Sendable {
    /// The identity's datasets (not deleted), by name, one page at a time.
    func listDatasets(nextToken: String?, maxResults: Int?) async throws -> RemoteDatasetList
    /// The dataset, or `nil` when it does not exist (or was deleted).
    func describeDataset(_ name: String) async throws -> RemoteDataset?
    /// The records changed after `lastSyncCount`, one page at a time, with a session token
    /// that ``updateRecords(dataset:patches:syncSessionToken:deviceId:)`` requires.
    func listRecords(dataset: String, lastSyncCount: Int64, nextToken: String?, maxResults: Int?,
                     syncSessionToken: String?) async throws -> RemoteRecordsPage
    /// Applies `patches` all or none: each patch's sync count must be the record's current
    /// one (0 for a new key), otherwise ``SyncError/Code/conflict`` and nothing changes.
    /// Creates the dataset when it does not exist. Returns the records as now stored.
    func updateRecords(dataset: String, patches: [RecordPatch], syncSessionToken: String,
                       deviceId: String?) async throws -> [RemoteDatasetRecord]
    /// Deletes the dataset and its records; returns it as it was, or `nil` when it did not exist.
    func deleteDataset(_ name: String) async throws -> RemoteDataset?
    /// Registers a device for push sync and returns its id (the same id for the same token).
    func registerDevice(platform: PushPlatform, token: String) async throws -> String
    /// Subscribes a registered device to a dataset's changes.
    func subscribe(dataset: String, deviceId: String) async throws
    /// Ends a device's subscription to a dataset.
    func unsubscribe(dataset: String, deviceId: String) async throws
}

/// A dataset as the remote describes it.
public struct RemoteDataset: Sendable, Hashable {
    /// The owning identity.
    public var identityId: String
    /// The dataset's name.
    public var name: String
    /// When it was created on the remote.
    public var creationDate: Timestamp
    /// When it last changed on the remote.
    public var lastModifiedDate: Timestamp
    /// Who changed it last (an access key id or an identity).
    public var lastModifiedBy: String
    /// Bytes of its keys and values (UTF-8).
    public var dataStorage: Int64
    /// How many keys hold a value.
    public var numRecords: Int64
    /// The dataset's sync count, or 0 when the remote does not report it (the Cognito Sync
    /// API's `Dataset` has no sync count; ListRecords' `DatasetSyncCount` does).
    public var syncCount: Int64

    /// Creates a description.
    public init(identityId: String, name: String, creationDate: Timestamp, lastModifiedDate: Timestamp,
                lastModifiedBy: String, dataStorage: Int64, numRecords: Int64, syncCount: Int64) {
        self.identityId = identityId
        self.name = name
        self.creationDate = creationDate
        self.lastModifiedDate = lastModifiedDate
        self.lastModifiedBy = lastModifiedBy
        self.dataStorage = dataStorage
        self.numRecords = numRecords
        self.syncCount = syncCount
    }
}

/// One page of ``DatasetRemote/listDatasets(nextToken:maxResults:)``.
public struct RemoteDatasetList: Sendable, Hashable {
    /// The datasets of this page.
    public var datasets: [RemoteDataset]
    /// The token of the next page, or `nil` after the last.
    public var nextToken: String?

    /// Creates a page.
    public init(datasets: [RemoteDataset], nextToken: String?) {
        self.datasets = datasets
        self.nextToken = nextToken
    }
}

/// A record as the remote stores it.
public struct RemoteDatasetRecord: Sendable, Hashable {
    /// The key.
    public var key: String
    /// The value, or `nil` for a removed key.
    public var value: String?
    /// The dataset's sync count when the record last changed.
    public var syncCount: Int64
    /// When the remote stored the change.
    public var lastModifiedDate: Timestamp
    /// Who made the change.
    public var lastModifiedBy: String
    /// When the device made the change, as the device reported it.
    public var deviceLastModifiedDate: Timestamp?

    /// Creates a record.
    public init(key: String, value: String?, syncCount: Int64, lastModifiedDate: Timestamp, lastModifiedBy: String,
                deviceLastModifiedDate: Timestamp?) {
        self.key = key
        self.value = value
        self.syncCount = syncCount
        self.lastModifiedDate = lastModifiedDate
        self.lastModifiedBy = lastModifiedBy
        self.deviceLastModifiedDate = deviceLastModifiedDate
    }
}

/// One change of ``DatasetRemote/updateRecords(dataset:patches:syncSessionToken:deviceId:)``.
public struct RecordPatch: Sendable, Hashable {
    /// Replace sets a value; remove deletes the key.
    public enum Operation: String, Sendable, Hashable {
        /// Sets the key's value.
        case replace
        /// Removes the key.
        case remove
    }
    /// What to do.
    public var op: Operation
    /// The key.
    public var key: String
    /// The new value (for ``Operation/replace``).
    public var value: String?
    /// The record's sync count the change is based on (0 for a key the device never synced).
    public var syncCount: Int64
    /// When the device made the change.
    public var deviceLastModifiedDate: Timestamp?

    /// Creates a patch.
    public init(op: Operation, key: String, value: String?, syncCount: Int64, deviceLastModifiedDate: Timestamp? = nil) {
        self.op = op
        self.key = key
        self.value = value
        self.syncCount = syncCount
        self.deviceLastModifiedDate = deviceLastModifiedDate
    }
}

/// One page of ``DatasetRemote/listRecords(dataset:lastSyncCount:nextToken:maxResults:syncSessionToken:)``.
public struct RemoteRecordsPage: Sendable, Hashable {
    /// Records changed after the requested sync count, removed ones included, by sync count.
    public var records: [RemoteDatasetRecord]
    /// The token of the next page, or `nil` after the last.
    public var nextToken: String?
    /// The dataset's current sync count.
    public var datasetSyncCount: Int64
    /// Who changed the dataset last.
    public var lastModifiedBy: String?
    /// Datasets merged into this identity from another one that clash with this name
    /// (named `<name>.<other identity>`), for the app to fold in and delete.
    public var mergedDatasetNames: [String]
    /// Whether the dataset exists on the remote.
    public var datasetExists: Bool
    /// Whether it was deleted after the requested sync count (it may exist again since).
    public var datasetDeletedAfterRequestedSyncCount: Bool
    /// The token a following update must carry.
    public var syncSessionToken: String

    /// Creates a page.
    public init(records: [RemoteDatasetRecord], nextToken: String?, datasetSyncCount: Int64, lastModifiedBy: String?,
                mergedDatasetNames: [String], datasetExists: Bool, datasetDeletedAfterRequestedSyncCount: Bool,
                syncSessionToken: String) {
        self.records = records
        self.nextToken = nextToken
        self.datasetSyncCount = datasetSyncCount
        self.lastModifiedBy = lastModifiedBy
        self.mergedDatasetNames = mergedDatasetNames
        self.datasetExists = datasetExists
        self.datasetDeletedAfterRequestedSyncCount = datasetDeletedAfterRequestedSyncCount
        self.syncSessionToken = syncSessionToken
    }
}

/// Where a device receives push-sync notifications: Cognito's platforms, plus ``webSocket``,
/// the server's own notification channel.
public enum PushPlatform: String, Sendable, Hashable, CaseIterable {
    /// Apple Push Notification service.
    case apns = "APNS"
    /// Apple Push Notification service, sandbox.
    case apnsSandbox = "APNS_SANDBOX"
    /// Google Cloud Messaging / Firebase.
    case gcm = "GCM"
    /// Amazon Device Messaging.
    case adm = "ADM"
    /// The OfflineSync server's WebSocket notification channel (`/v1/changes`).
    case webSocket = "WEBSOCKET"
}
