import OfflineSync
import OfflineSyncDatasets

// The service's six dataset tables, each declared once: its row, its columns (the coding
// keys) and its schema. Every read and write of these tables goes through these rows.

extension DatasetService {
    /// `__cs_pools`: one row per identity pool, created on first use; its push-sync, streams,
    /// events and bulk-publish settings. Storage and the last change are not kept here (see
    /// ``usage(_:pool:)``), so an update never writes this row.
    struct PoolRow: StoredRow {
        static let table = "__cs_pools"
        enum CodingKeys: String, CodingKey {
            case id, created, lastModified, sessions, applicationArns, pushRoleArn, streamName, streamRoleArn, streamingStatus,
                 eventType, eventTarget, bulkStatus, bulkStart, bulkComplete, bulkFailure
        }

        /// Cognito's words for whether a pool streams its updates.
        enum StreamingStatus: String, Codable { case enabled = "ENABLED", disabled = "DISABLED" }
        /// Cognito's words for the state of the last bulk publish (none: `NOT_STARTED`).
        enum BulkStatus: String, Codable { case inProgress = "IN_PROGRESS", succeeded = "SUCCEEDED", failed = "FAILED" }

        var id: String
        var created: Timestamp
        var lastModified: Timestamp
        /// Sync sessions opened, ever (Cognito's `SyncSessionsCount`).
        var sessions: Int64
        var applicationArns: [String]?
        var pushRoleArn: String?
        var streamName: String?
        var streamRoleArn: String?
        var streamingStatus: StreamingStatus?
        var eventType: String?
        var eventTarget: String?
        var bulkStatus: BulkStatus?
        var bulkStart: Timestamp?
        var bulkComplete: Timestamp?
        var bulkFailure: String?

        init(id: String, now: Timestamp) {
            self.id = id
            created = now
            lastModified = now
            sessions = 0
        }

        /// Whether updates go to a stream: one is named and enabled.
        var isStreaming: Bool { streamName != nil && streamingStatus == .enabled }

        static let schema = TableSchema(table, fields: [
            column(.created, .date), column(.lastModified, .date), column(.sessions, .int),
            column(.applicationArns, .array), column(.pushRoleArn, .string),
            column(.streamName, .string), column(.streamRoleArn, .string),
            column(.streamingStatus, .string), column(.eventType, .string),
            column(.eventTarget, .string), column(.bulkStatus, .string),
            column(.bulkStart, .date), column(.bulkComplete, .date), column(.bulkFailure, .string),
        ], undeclaredFields: .reject)
    }

    /// `__cs_datasets`: one row per dataset an identity ever had, keyed by
    /// ``datasetId(scope:name:)``. A deleted dataset keeps its row with `live` false and
    /// `deletedAt` set to the sync count of the deletion.
    struct DatasetRow: StoredRow {
        static let table = "__cs_datasets"
        enum CodingKeys: String, CodingKey {
            case id, pool, scope, identity, name, syncCount, created, lastModified, lastModifiedBy, live, deletedAt, storage,
                 count, mergedFrom
        }

        var id: String
        var pool: String
        var scope: String
        var identity: String
        var name: String
        var syncCount: Int64
        var created: Timestamp
        var lastModified: Timestamp
        var lastModifiedBy: String
        var live: Bool
        /// The sync count at which the dataset was last deleted.
        var deletedAt: Int64?
        /// Bytes of keys and values of its live records.
        var storage: Int64
        /// Its live records.
        var count: Int64
        /// For a dataset a merge renamed, the name it had in the identity it came from.
        var mergedFrom: String?

        static let schema = TableSchema(table, fields: [
            column(.pool, .string, indexed: true), column(.scope, .string, indexed: true),
            column(.identity, .string), column(.name, .string), column(.syncCount, .int),
            column(.created, .date), column(.lastModified, .date), column(.lastModifiedBy, .string),
            column(.live, .bool), column(.deletedAt, .int), column(.storage, .int),
            column(.count, .int), column(.mergedFrom, .string),
        ], undeclaredFields: .reject)

        /// The identity's live datasets.
        static func live(scope: String) -> QueryPredicate { field(.scope) == .string(scope) && field(.live) == true }

        var remote: RemoteDataset {
            RemoteDataset(identityId: identity, name: name, creationDate: created, lastModifiedDate: lastModified,
                          lastModifiedBy: lastModifiedBy, dataStorage: storage, numRecords: count, syncCount: syncCount)
        }
    }

    /// `__cs_records`: one row per key of a dataset, keyed by
    /// ``recordId(scope:dataset:key:)``; a removed key keeps its row without a value, so
    /// clients listing after an older sync count learn of the removal.
    struct RecordRow: StoredRow {
        static let table = "__cs_records"
        enum CodingKeys: String, CodingKey {
            case id, scope, dataset, key, value, syncCount, lastModified, lastModifiedBy, deviceLastModified
        }

        var id: String
        var scope: String
        var dataset: String
        var key: String
        var value: String?
        var syncCount: Int64
        var lastModified: Timestamp
        var lastModifiedBy: String
        var deviceLastModified: Timestamp?

        static let schema = TableSchema(table, fields: [
            column(.scope, .string), column(.dataset, .string), column(.key, .string),
            column(.value, .string), column(.syncCount, .int), column(.lastModified, .date),
            column(.lastModifiedBy, .string), column(.deviceLastModified, .date),
        ], indexes: [IndexDefinition([CodingKeys.scope.rawValue, CodingKeys.dataset.rawValue, CodingKeys.syncCount.rawValue])],
           undeclaredFields: .reject)

        /// The rows of one dataset.
        static func of(scope: String, dataset: String) -> QueryPredicate {
            field(.scope) == .string(scope) && field(.dataset) == .string(dataset)
        }

        var remote: RemoteDatasetRecord {
            RemoteDatasetRecord(key: key, value: value, syncCount: syncCount, lastModifiedDate: lastModified,
                                lastModifiedBy: lastModifiedBy, deviceLastModifiedDate: deviceLastModified)
        }
    }

    /// `__cs_sessions`: the sync session tokens handed out by listing records, keyed by the
    /// token; expired ones are swept a few at a time.
    struct SessionRow: StoredRow {
        static let table = "__cs_sessions"
        enum CodingKeys: String, CodingKey { case id, scope, dataset, created }

        var id: String
        var scope: String
        var dataset: String
        var created: Timestamp

        static let schema = TableSchema(table, fields: [
            column(.scope, .string), column(.dataset, .string), column(.created, .date, indexed: true),
        ], undeclaredFields: .reject)
    }

    /// `__cs_devices`: the devices identities registered for push sync, keyed by device id.
    struct DeviceRow: StoredRow {
        static let table = "__cs_devices"
        enum CodingKeys: String, CodingKey { case id, scope, platform, token }

        var id: String
        var scope: String
        /// A ``PushPlatform`` raw value.
        var platform: String
        var token: String

        static let schema = TableSchema(table, fields: [
            column(.scope, .string, indexed: true), column(.platform, .string), column(.token, .string),
        ], undeclaredFields: .reject)
    }

    /// `__cs_subscriptions`: which device follows which dataset, keyed by
    /// ``subscriptionId(scope:dataset:device:)``.
    struct SubscriptionRow: StoredRow {
        static let table = "__cs_subscriptions"
        enum CodingKeys: String, CodingKey { case id, scope, dataset, device }

        var id: String
        var scope: String
        var dataset: String
        var device: String

        static let schema = TableSchema(table, fields: [
            column(.scope, .string), column(.dataset, .string), column(.device, .string),
        ], indexes: [IndexDefinition([CodingKeys.scope.rawValue, CodingKeys.dataset.rawValue])], undeclaredFields: .reject)
    }
}
