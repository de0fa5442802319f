import Foundation
import OfflineSync
import OfflineSyncDatasets

/// The authoritative side of datasets, in the Amazon Cognito Sync model, over any
/// ``LocalStore``: what the server's Cognito Sync–compatible API and the in-process
/// ``remote(pool:identity:)`` call.
///
/// - **Sync counts.** Each dataset has a sync count that an accepted update raises by one;
///   every record changed by that update carries the new count. Listing the records after a
///   sync count returns every change since, in (sync count, key) order, so paging while
///   others write never skips one.
/// - **All or nothing.** An update whose patch names a record sync count that is not the
///   record's current one (0 for a new key) is ``SyncError/Code/conflict`` and applies
///   nothing; so does one that breaks a limit (``SyncError/Code/limitExceeded``): keys up to
///   128 characters, values up to 1 MiB, 1 MiB of keys and values per dataset, 20 datasets
///   per identity.
/// - **Sessions.** Listing records hands out a sync session token; an update must carry one
///   issued for the same identity and dataset within ``sessionLifetime``.
/// - **Deletion.** A deleted dataset keeps its row (and its sync count, which never goes
///   back), so a client that last synchronized before the deletion is told, even after the
///   dataset was created again.
/// - **Identity pools.** Everything is scoped by pool and identity; a pool exists once one
///   of its identities has used it or it was configured.
public final class DatasetService: Sendable {
    /// The store holding the datasets.
    public let store: any LocalStore
    let streamSink: (any DatasetStreamSink)?

    /// How long a sync session token is accepted, in milliseconds (one hour).
    public static let sessionLifetime: Int64 = 3_600_000
    /// The largest page of records or datasets.
    public static let maxPageSize = 1000
    /// The page size when none is asked for.
    public static let defaultPageSize = 100

    enum Tables {
        static let pools = "__cs_pools"
        static let datasets = "__cs_datasets"
        static let records = "__cs_records"
        static let sessions = "__cs_sessions"
        static let devices = "__cs_devices"
        static let subscriptions = "__cs_subscriptions"
    }

    /// Opens the service over `store`, defining its tables. Records streamed by bulk publish
    /// and by updates to pools whose streams are enabled go to `streamSink`.
    public init(store: any LocalStore, streamSink: (any DatasetStreamSink)? = nil) async throws {
        self.store = store
        self.streamSink = streamSink
        try await store.defineTable(TableSchema(Tables.pools, fields: [
            FieldDefinition("created", .date), FieldDefinition("lastModified", .date), FieldDefinition("sessions", .int),
            FieldDefinition("applicationArns", .array), FieldDefinition("pushRoleArn", .string),
            FieldDefinition("streamName", .string), FieldDefinition("streamRoleArn", .string),
            FieldDefinition("streamingStatus", .string), FieldDefinition("eventType", .string),
            FieldDefinition("eventTarget", .string), FieldDefinition("bulkStatus", .string),
            FieldDefinition("bulkStart", .date), FieldDefinition("bulkComplete", .date), FieldDefinition("bulkFailure", .string),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.datasets, fields: [
            FieldDefinition("pool", .string, indexed: true), FieldDefinition("scope", .string, indexed: true),
            FieldDefinition("identity", .string), FieldDefinition("name", .string), FieldDefinition("syncCount", .int),
            FieldDefinition("created", .date), FieldDefinition("lastModified", .date), FieldDefinition("lastModifiedBy", .string),
            FieldDefinition("live", .bool), FieldDefinition("deletedAt", .int), FieldDefinition("storage", .int),
            FieldDefinition("count", .int), FieldDefinition("mergedFrom", .string),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.records, fields: [
            FieldDefinition("scope", .string), FieldDefinition("dataset", .string), FieldDefinition("key", .string),
            FieldDefinition("value", .string), FieldDefinition("syncCount", .int), FieldDefinition("lastModified", .date),
            FieldDefinition("lastModifiedBy", .string), FieldDefinition("deviceLastModified", .date),
        ], indexes: [IndexDefinition(["scope", "dataset", "syncCount"])], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.sessions, fields: [
            FieldDefinition("scope", .string), FieldDefinition("dataset", .string), FieldDefinition("created", .date, indexed: true),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.devices, fields: [
            FieldDefinition("scope", .string, indexed: true), FieldDefinition("platform", .string), FieldDefinition("token", .string),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.subscriptions, fields: [
            FieldDefinition("scope", .string), FieldDefinition("dataset", .string), FieldDefinition("device", .string),
        ], indexes: [IndexDefinition(["scope", "dataset"])], undeclaredFields: .reject))
    }

    /// A ``DatasetRemote`` for one identity of `pool`, for in-process use.
    public func remote(pool: String, identity: String) -> any DatasetRemote {
        InProcessDatasetRemote(service: self, pool: pool, identity: identity)
    }
}

