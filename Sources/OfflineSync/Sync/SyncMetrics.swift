import CoreMetrics

/// What a ``SyncContext`` reports through swift-metrics, to the backend the app chose
/// (``SyncOptions/metricsFactory``, or the one bootstrapped with `MetricsSystem`): how long
/// pushes and pulls take, what became of the pushed operations, how many records pulls
/// brought, how many operations wait, and the failures by kind. Names follow Prometheus's
/// conventions, as the server's do (Docs/GettingStarted.md lists them):
///
/// - `offline_sync_client_push_duration_seconds` (timer): each `push()`, every batch included.
/// - `offline_sync_client_pull_duration_seconds` (timer, `table`): each table's pull.
/// - `offline_sync_client_push_operations_total` (counter, `outcome`: `applied`,
///   `conflict_resolved`, `failed`).
/// - `offline_sync_client_pulled_records_total` (counter, `table`).
/// - `offline_sync_client_queue_depth` (gauge): the operations waiting to be pushed, as of the
///   last push's start and end.
/// - `offline_sync_client_failures_total` (counter, `call`: `push` or `pull`; `kind`: a
///   ``SyncFailure/Kind``).
///
/// Labels are bounded: table names are the app's own.
struct SyncMetrics: Sendable {
    let factory: any MetricsFactory

    init(factory: (any MetricsFactory)?) {
        self.factory = factory ?? MetricsSystem.factory
    }

    static let pushDuration = "offline_sync_client_push_duration_seconds"
    static let pullDuration = "offline_sync_client_pull_duration_seconds"
    static let pushOperations = "offline_sync_client_push_operations_total"
    static let pulledRecords = "offline_sync_client_pulled_records_total"
    static let queueDepth = "offline_sync_client_queue_depth"
    static let failures = "offline_sync_client_failures_total"
    /// Every metric, in the order Docs/GettingStarted.md lists them.
    static let names = [pushDuration, pullDuration, pushOperations, pulledRecords, queueDepth, failures]

    func pushed(_ summary: PushSummary, duration: Duration) {
        Timer(label: Self.pushDuration, dimensions: [], factory: factory).recordNanoseconds(Self.nanoseconds(duration))
        for (outcome, count) in [("applied", summary.applied), ("conflict_resolved", summary.conflictsResolved), ("failed", summary.failed)]
        where count > 0 {
            Counter(label: Self.pushOperations, dimensions: [("outcome", outcome)], factory: factory).increment(by: count)
        }
    }

    func pulled(_ summary: PullSummary, duration: Duration) {
        Timer(label: Self.pullDuration, dimensions: [("table", summary.table)], factory: factory).recordNanoseconds(Self.nanoseconds(duration))
        if summary.received > 0 {
            Counter(label: Self.pulledRecords, dimensions: [("table", summary.table)], factory: factory).increment(by: summary.received)
        }
    }

    func queued(_ count: Int) {
        Gauge(label: Self.queueDepth, dimensions: [], factory: factory).record(count)
    }

    /// A push or pull (`call`) that threw `error`.
    func failed(_ call: String, _ error: any Error) {
        let kind: String
        switch SyncFailure(error, willRetry: false).kind {
        case .transient: kind = "transient"
        case .authentication: kind = "authentication"
        case .store: kind = "store"
        case .rejected: kind = "rejected"
        case .cancelled: kind = "cancelled"
        }
        Counter(label: Self.failures, dimensions: [("call", call), ("kind", kind)], factory: factory).increment()
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
