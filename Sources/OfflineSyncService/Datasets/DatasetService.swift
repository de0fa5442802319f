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

    /// How long a sync session token is accepted (one hour).
    public static let sessionLifetime: Duration = .seconds(3600)
    /// ``sessionLifetime`` in milliseconds, as the session rows' timestamps count.
    static let sessionLifetimeMilliseconds = sessionLifetime.components.seconds * 1000
    /// The largest page of records or datasets.
    public static let maxPageSize = 1000
    /// The page size when none is asked for.
    public static let defaultPageSize = 100

    /// Opens the service over `store`, defining its tables. Records streamed by bulk publish
    /// and by updates to pools whose streams are enabled go to `streamSink`.
    public init(store: any LocalStore, streamSink: (any DatasetStreamSink)? = nil) async throws {
        self.store = store
        self.streamSink = streamSink
        for schema in [PoolRow.schema, DatasetRow.schema, RecordRow.schema, SessionRow.schema, DeviceRow.schema,
                       SubscriptionRow.schema] {
            try await store.defineTable(schema)
        }
    }

    /// A ``DatasetRemote`` for one identity of `pool`, for in-process use.
    public func remote(pool: String, identity: String) -> any DatasetRemote {
        InProcessDatasetRemote(service: self, pool: pool, identity: identity)
    }
}

