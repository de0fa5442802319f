import CoreMetrics
import Foundation
import Logging

/// Settings of a ``SyncContext``.
public struct SyncOptions: Sendable {
    /// Decides conflicts the remote reports. Default: ``ConflictPolicy/serverWins``.
    public var conflictResolver: any ConflictResolver
    /// The most operations sent in one push request (a larger local transaction is still
    /// sent whole, up to ten times this).
    public var pushBatchSize: Int
    /// The most records asked for per pull page.
    public var pullPageSize: Int
    /// After this many sends, a still-conflicting operation is left for the app.
    public var maxConflictRetries: Int
    /// How often, while observations are live, the store is asked whether another process
    /// committed to it (``LocalStore/externalChangeToken()``): the longest a commit from an
    /// app extension takes to reach this process's observations. Default 100 ms; nothing is
    /// polled while no observation is live or when the adapter cannot tell.
    public var externalChangeInterval: Duration
    /// The events an ``SyncContext/events()`` subscriber's buffer keeps, progress events
    /// aside, before it drops new ones (``SyncEvent/eventsDropped(count:)``). Default 10,000:
    /// a push of 10,000 operations announces each one, so a subscriber that reads after it
    /// still hears them all.
    public var eventBufferLimit: Int
    /// The deadline of a push, pull or sync call: once the remote has answered nothing for
    /// this long, the call is cancelled and throws ``SyncError/Code/transient``, however many
    /// attempts its remote still had. Every answer (a page, a push batch's results) starts it
    /// again, so a long first sync that keeps receiving pages never meets it. What the call
    /// committed stays (whole pages, settled batches), and what it did not send stays queued.
    /// Default 30 seconds. A ``ConflictResolver`` that waits for a person counts against it:
    /// leave such conflicts for the app (``ConflictResolution/leaveForApp``) instead.
    public var progressTimeout: Duration
    /// How often a started context syncs while it has no live change channel (the remote has
    /// none, a proxy refuses WebSockets, the channel is down): it then pulls on this schedule,
    /// and pushes after every local write, as it does with the channel. Default 30 seconds.
    public var pollInterval: Duration
    /// Where the context reports its metrics (push and pull times, pushed operations, pulled
    /// records, queue depth, failures; Docs/GettingStarted.md lists them): `nil`, the default,
    /// is the backend the app bootstrapped with swift-metrics' `MetricsSystem` (none: nothing
    /// is kept).
    public var metricsFactory: (any MetricsFactory)?
    /// Limits and cache settings of attachments (``AttachmentOptions``).
    public var attachments = AttachmentOptions()
    /// Where the context logs what it kept rather than acted on: attachment files it could
    /// not read (too many open files, an I/O error, a permission) or that are damaged but
    /// wait to upload, and malformed attachment references it skipped. The default, labelled
    /// `offline-sync`, writes to the backend the app bootstrapped with swift-log's
    /// `LoggingSystem`.
    public var logger = Logger(label: "offline-sync")

    /// Creates options.
    public init(conflictResolver: any ConflictResolver = ConflictPolicy.serverWins, pushBatchSize: Int = 500,
                pullPageSize: Int = 500, maxConflictRetries: Int = 5,
                externalChangeInterval: Duration = .milliseconds(100), eventBufferLimit: Int = 10_000,
                progressTimeout: Duration = .seconds(30), pollInterval: Duration = .seconds(30),
                metricsFactory: (any MetricsFactory)? = nil) {
        self.metricsFactory = metricsFactory
        self.conflictResolver = conflictResolver
        self.pushBatchSize = max(1, pushBatchSize)
        self.pullPageSize = max(1, pullPageSize)
        self.maxConflictRetries = max(1, maxConflictRetries)
        self.externalChangeInterval = max(.milliseconds(1), externalChangeInterval)
        self.eventBufferLimit = max(1, eventBufferLimit)
        self.progressTimeout = max(.milliseconds(10), progressTimeout)
        self.pollInterval = max(.milliseconds(10), pollInterval)
    }
}

/// What a ``SyncContext/push()`` did.
public struct PushSummary: Sendable, Hashable {
    /// Requests sent.
    public var batches = 0
    /// Operations sent (resends included).
    public var sent = 0
    /// Operations the remote applied.
    public var applied = 0
    /// Conflicts settled by the resolver.
    public var conflictsResolved = 0
    /// Operations that moved to `__operation_errors`.
    public var failed = 0
}

/// What a ``SyncContext/pull(_:query:queryId:)`` did.
public struct PullSummary: Sendable, Hashable {
    /// The table.
    public var table: String
    /// Pages received.
    public var pages = 0
    /// Records received (tombstones included), whether or not they changed anything.
    public var received = 0
    /// New local records.
    public var added = 0
    /// Local records that changed (a record received unchanged is not counted).
    public var updated = 0
    /// Removed local records.
    public var deleted = 0
    /// Remote changes not applied because the item has a local operation queued.
    public var skippedPending = 0
    /// Local records removed because they left the identity's view (sync rules).
    public var removedFromView = 0
    /// Whether the pull started from the beginning.
    public var isFullSync = true
}
