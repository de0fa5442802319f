import Synchronization

/// What a ``SyncContext`` is doing and how its last attempt went: ``SyncContext/status`` now,
/// ``SyncContext/observeStatus()`` as it changes. One value where PowerSync has
/// `currentStatus` and Amplify scatters hub events, so an app can show "offline", "syncing",
/// "last synced 2 min ago" or "sign in again" from one place.
public struct SyncStatus: Sendable, Hashable {
    /// Whether the remote answered the last call or its change channel subscribed (a refusal
    /// is an answer). `false` until the first answer, after a call the remote did not answer,
    /// and while a started context's network monitor reports no network: a network that is
    /// up says nothing about whether the remote answers.
    public var connected: Bool
    /// Whether a push is under way.
    public var uploading: Bool
    /// Whether a pull is under way.
    public var downloading: Bool
    /// When each table's last pull reached the end of the remote's changes. Kept in the
    /// store, so it survives a restart; a table's entry goes with ``SyncContext/purge(_:query:force:)``
    /// and ``SyncContext/clear()``.
    public var lastSyncedAt: [String: Timestamp]
    /// The last failure of a push, pull or sync run, until one succeeds. A context that
    /// opens with attachment files its sweep kept (it could not read them, or they are damaged
    /// but wait to upload) starts with that report here, and a cache eviction that failed
    /// (``SyncContext/evictAttachments(toBudget:keeping:)``) reports here too.
    public var lastError: SyncFailure?
    /// The tables whose last pull the remote refused (``SyncFailure/Kind/rejected``: the sync
    /// rules deny the table, a 403, a 4xx other than 401), each with its failure, until a pull
    /// of that table succeeds. Only that table waits: the others keep syncing, and a started
    /// context pulls a refused table again with backoff (a role granted later lets it through).
    public var tableErrors: [String: SyncFailure]
    /// The background sync of ``SyncContext/start(tables:network:queryId:)``.
    public var backgroundSync: BackgroundSync
    /// The attachment files moving now, by hash: which way, and how far. An entry comes with
    /// a transfer's first progress and goes when the transfer ends, done or not. Each step is
    /// also a ``SyncEvent/attachmentProgress(sha256:direction:done:total:)``.
    public var attachmentTransfers: [String: AttachmentTransferProgress]

    /// What the background sync is doing.
    public enum BackgroundSync: Sendable, Hashable {
        /// Not started, or stopped by the app.
        case off
        /// Started: syncing while the network is up, retrying transient failures.
        case running
        /// Stopped by a failure that retrying cannot fix (``SyncFailure/Kind/authentication``
        /// or ``SyncFailure/Kind/store``; ``SyncStatus/lastError`` says which) until the app
        /// calls `start` again.
        case halted
    }

    /// Whether some table has been pulled to the end at least once (since its last purge).
    public var hasSynced: Bool { !lastSyncedAt.isEmpty }

    /// A status.
    public init(connected: Bool = false, uploading: Bool = false, downloading: Bool = false,
                lastSyncedAt: [String: Timestamp] = [:], lastError: SyncFailure? = nil, tableErrors: [String: SyncFailure] = [:],
                backgroundSync: BackgroundSync = .off, attachmentTransfers: [String: AttachmentTransferProgress] = [:]) {
        self.connected = connected
        self.uploading = uploading
        self.downloading = downloading
        self.lastSyncedAt = lastSyncedAt
        self.lastError = lastError
        self.tableErrors = tableErrors
        self.backgroundSync = backgroundSync
        self.attachmentTransfers = attachmentTransfers
    }
}

/// How far one attachment's transfer is (``SyncStatus/attachmentTransfers``).
public struct AttachmentTransferProgress: Sendable, Hashable {
    /// Which way the bytes move.
    public var direction: AttachmentTransferDirection
    /// Bytes moved: for an upload, handed to the remote from the file's start (a resumed
    /// upload starts at the remote's offset); for a download, received.
    public var done: Int64
    /// The file's size.
    public var total: Int64

    /// A transfer's progress.
    public init(direction: AttachmentTransferDirection, done: Int64, total: Int64) {
        self.direction = direction
        self.done = done
        self.total = total
    }
}

/// A failed push, pull or sync run, classified by what an app (and the background sync)
/// should do about it.
public struct SyncFailure: Sendable, Hashable {
    /// What kind of failure it is.
    ///
    /// New cases arrive in minor releases (Docs/Versioning.md): switch over it with an
    /// `@unknown default:` case.
    public enum Kind: Sendable, Hashable {
        /// The remote could not be reached, or answered 5xx or 429, or a local resource was
        /// busy (``SyncError/Code/busy``: a store locked by another process, an attachment file
        /// waiting to upload that the system could not read now): retried with backoff.
        case transient
        /// The remote refused the credentials (401), after the token provider was asked again:
        /// not retried until the app starts the context again.
        case authentication
        /// The local store failed (disk full, damaged, closed): not retried; the app must act.
        case store
        /// The remote refused the request itself (a 4xx other than 401, a 403 of the sync
        /// rules or of a proxy included): retried with backoff, as a server that is being fixed
        /// or a role granted later may let it through. A refused pull is reported on its table
        /// (``SyncStatus/tableErrors``) while the other tables keep syncing. Refused operations
        /// are not this: they wait in ``SyncContext/operationErrors()``.
        case rejected
        /// The call was cancelled.
        case cancelled
    }

    /// The error.
    public var error: SyncError
    /// Its kind.
    public var kind: Kind
    /// Whether the background sync will try again by itself.
    public var willRetry: Bool
    /// When it happened.
    public var at: Timestamp

    /// A failure of `error`, of the kind its code says.
    public init(error: SyncError, willRetry: Bool, at: Timestamp = .now()) {
        self.error = error
        self.kind = Self.kind(of: error)
        self.willRetry = willRetry
        self.at = at
    }

    /// A failure of any error a call threw: a ``SyncError`` as it is, anything else as a
    /// ``SyncError/Code/transient`` naming its type.
    init(_ error: any Error, willRetry: Bool) {
        self.init(error: error as? SyncError ?? SyncError(.transient, "the call failed: \(type(of: error))"), willRetry: willRetry)
    }

    /// The kind of failure an error is.
    public static func kind(of error: SyncError) -> Kind {
        switch error.code {
        case .transient, .busy: return .transient
        case .authenticationFailed: return .authentication
        case .corrupted, .notADatabase, .foreignDatabase, .storeClosed, .storageFailure, .missingKey, .wrongKey: return .store
        case .cancelled: return .cancelled
        default: return .rejected
        }
    }

    /// Whether a background sync should try again after this failure.
    public var isRetryable: Bool {
        switch kind {
        case .transient, .rejected: return true
        case .authentication, .store, .cancelled: return false
        }
    }
}

/// The status a context publishes: changed under a lock, and announced in the order of the
/// changes.
final class SyncStatusState: Sendable {
    private let state: Mutex<SyncStatus>
    private let broadcaster = Broadcaster<SingleTopic, SyncStatus>(bufferingPolicy: .bufferingNewest(1), replaysLatest: true)

    init(_ initial: SyncStatus) {
        state = Mutex(initial)
        broadcaster.publish(initial)
    }

    var current: SyncStatus { state.withLock { $0 } }

    /// Changes the status; subscribers hear of it when it changed.
    func update(_ change: (inout SyncStatus) -> Void) {
        state.withLock { status in
            var next = status
            change(&next)
            guard next != status else { return }
            status = next
            broadcaster.publish(next)
        }
    }

    func subscribe() -> AsyncStream<SyncStatus> { broadcaster.subscribe() }
}
