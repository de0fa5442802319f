import Foundation

/// What ``SyncEvent/modelSynced(_:)`` reports about one table's pull.
public struct ModelSyncedEvent: Sendable, Hashable {
    /// The table.
    public var table: String
    /// The pull started from the beginning (no cursor, or the remote reset it).
    public var isFullSync: Bool
    /// The pull continued from a stored cursor.
    public var isDeltaSync: Bool
    /// Records that were new locally.
    public var added: Int
    /// Records that replaced a local copy.
    public var updated: Int
    /// Local records removed because the remote deleted them.
    public var deleted: Int
    /// Remote changes not applied because the record has a pending local operation.
    public var skippedPending: Int
    /// Local records removed because they left the identity's view under the server's sync
    /// rules (a membership ended), although no one deleted them.
    public var removedFromView: Int = 0
}

/// One event of a ``SyncContext``, named after Amplify DataStore's hub events.
///
/// New cases arrive in minor releases (Docs/Versioning.md): switch over it with an
/// `@unknown default:` case.
public enum SyncEvent: Sendable, Hashable {
    /// The remote became reachable (`true`) or a call to it failed (`false`).
    case networkStatus(active: Bool)
    /// The remote's change notifications are live (see ``SyncContext/start(tables:network:queryId:)``).
    case subscriptionsEstablished
    /// A sync run began pulling these tables.
    case syncQueriesStarted(tables: [String])
    /// A table's pull finished and its changes are applied.
    case modelSynced(ModelSyncedEvent)
    /// Every table of the sync run is pulled.
    case syncQueriesReady
    /// The sync run is complete: tables pulled and the outbox drained as far as it can be.
    case ready
    /// A local write was queued (or folded into a queued operation).
    case outboxMutationEnqueued(table: String, record: Record, kind: OperationKind)
    /// The remote accepted a queued operation; `record` carries the remote's version,
    /// `updatedAt` and `deleted`.
    case outboxMutationProcessed(table: String, record: Record, kind: OperationKind)
    /// The remote rejected a queued operation, or a conflict was left for the app. The
    /// operation waits in ``SyncContext/operationErrors()``.
    case outboxMutationFailed(table: String, record: Record?, kind: OperationKind, error: OperationError)
    /// Whether the outbox is empty (sent after every enqueue and every processed batch).
    case outboxStatus(isEmpty: Bool)
    /// Push progress: operations settled so far out of the total known now.
    case pushProgress(done: Int, total: Int)
    /// Pull progress of one table: changes applied so far out of the total known now.
    case pullProgress(table: String, done: Int, total: Int)
    /// A conflict was resolved by the resolver (not left for the app).
    case conflictResolved(table: String, itemId: String, resolution: ConflictResolution)
    /// A pull removed these local records because they left the identity's view under the
    /// server's sync rules (see ``ModelSyncedEvent/removedFromView``); ids with a pending local
    /// operation are kept until the push's answer settles them.
    case removedFromView(table: String, ids: [String])
    /// A sync run of ``SyncContext/start(tables:network:queryId:)`` failed. With `willRetry`
    /// the loop tries again after a backoff; without, it has stopped: the remote refused the
    /// credentials even after the token provider was asked again
    /// (``SyncError/Code/authenticationFailed``), and nothing is retried until the app calls
    /// `start` again. Queued operations are kept either way.
    case syncFailed(error: SyncError, willRetry: Bool)
    /// This subscriber's buffer was full (it read too slowly) and `count` events were
    /// dropped here; see ``SyncEvents`` for the policy and how to read the state again.
    case eventsDropped(count: Int)
    /// Bytes of an attachment moved: `done` of `total`, up or down. Several in a row for one
    /// attachment coalesce in a subscriber's buffer (the newest stays).
    case attachmentProgress(sha256: String, direction: AttachmentTransferDirection, done: Int64, total: Int64)
}
