import Foundation
import HTTPTypes
import OfflineSync
import OfflineSyncService
import Prometheus
import Synchronization

/// The server's metrics, served in Prometheus's text format on `GET /metrics` behind the metrics
/// key or the admin key (Docs/Server.md, "Metrics", lists each one). Each server has its own registry, so
/// servers in one process (tests, an app embedding two) count apart and nothing global is
/// bootstrapped.
///
/// Labels hold only values from a bounded set: route templates, not paths; tables the rules
/// name (any other is `other`: a client may name any table); configured issuers. So no client
/// can grow the registry.
public final class ServerMetrics: Sendable {
    /// Where the metrics are kept; ``exposition()`` renders it.
    public let registry: PrometheusCollectorRegistry
    private let ruleTables: Set<String>
    private let connected: Gauge
    private let noticesSent: Counter
    private let noticesCoalesced: Counter
    private let slowChannels: Counter
    private let membershipFailures: Counter
    private let pushBatches: Counter
    /// What ``countReplicaReads(_:)`` reads at each exposition, and the totals it last saw.
    private let replicaReadSource = Mutex<(read: (@Sendable () -> (replica: Int, primary: Int))?, seen: (Int, Int))>((nil, (0, 0)))

    /// The names of every metric the server exports, as Docs/Server.md lists them.
    public static var names: [String] { Family.allCases.map(\.descriptor.name) }

    /// Histogram buckets for request and service-call durations: 1 ms to 10 s.
    static let durationBuckets: [Duration] = [
        .milliseconds(1), .microseconds(2500), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]

    /// Metrics for a server whose rules name `ruleTables` (the tables a refusal is labelled by).
    public init(ruleTables: Set<String> = [], registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        self.ruleTables = ruleTables
        connected = registry.makeGauge(descriptor: Family.websockets.descriptor)
        noticesSent = registry.makeCounter(descriptor: Family.notices.descriptor)
        noticesCoalesced = registry.makeCounter(descriptor: Family.noticesCoalesced.descriptor)
        slowChannels = registry.makeCounter(descriptor: Family.slowChannels.descriptor)
        membershipFailures = registry.makeCounter(descriptor: Family.membershipFailures.descriptor)
        pushBatches = registry.makeCounter(descriptor: Family.pushBatches.descriptor)
        // Every family appears from the start, so a scrape names each metric before its first
        // event (and a dashboard's query has a series to show).
        for outcome in ["applied", "conflict", "rejected", "forbidden"] { counter(.pushOperations, [("outcome", outcome)]).increment(by: Int64(0)) }
        for kind in ["record", "removed"] { counter(.pullRows, [("kind", kind)]).increment(by: Int64(0)) }
        registry.makeCounter(descriptor: Family.pullPages.descriptor).increment(by: Int64(0))
        for result in ["verified", "refused", "unverifiable"] { counter(.tokens, [("result", result)]).increment(by: Int64(0)) }
        _ = counter(.refusals, [("table", "other"), ("operation", "insert")])
        _ = counter(.keySets, [("issuer", "none"), ("result", "ok")])
        for direction in ["received", "sent"] { counter(.attachmentBytes, [("direction", direction)]).increment(by: Int64(0)) }
        for server in ["replica", "primary"] { counter(.replicaReads, [("served_by", server)]).increment(by: Int64(0)) }
        for reason in ConsoleSignInRefusal.allCases { counter(.consoleSignIns, [("reason", reason.rawValue)]).increment(by: Int64(0)) }
        _ = counter(.requests, [("route", "/metrics"), ("method", "GET"), ("status", "200")])
        _ = histogram(.requestDuration, [("route", "/metrics")])
        _ = histogram(.callDuration, [("call", "push")])
        _ = histogram(.callDuration, [("call", "pull")])
    }

    /// The metric families: name, unit and help, each declared once.
    enum Family: String, CaseIterable {
        case requests = "http_requests", requestDuration = "http_request_duration", pushBatches = "push_batches"
        case pushOperations = "push_operations", refusals = "rule_refusals", pullPages = "pull_pages", pullRows = "pull_rows"
        case callDuration = "service_call_duration", websockets, notices = "notices_sent", noticesCoalesced = "notices_coalesced"
        case slowChannels = "slow_channels_closed", membershipFailures = "channel_membership_failures"
        case tokens = "token_verifications"
        case keySets = "key_set_fetches", attachmentBytes = "attachment_bytes"
        case consoleSignIns = "console_signin_refused"
        case replicaReads = "replica_reads"

        var unit: String {
            switch self {
            case .requestDuration, .callDuration: "seconds"
            case .websockets: "connected"
            default: "total"
            }
        }

        var help: String {
            switch self {
            case .requests: "HTTP requests answered, by route template, method and status."
            case .requestDuration: "Time from a request's arrival to its answer, by route template."
            case .pushBatches: "Pushes applied (native, binary and tables API)."
            case .pushOperations: "Pushed operations by outcome: applied, conflict, rejected (400, 404) and forbidden (403)."
            case .refusals: "Operations the sync rules refused (403), by table (one the rules do not name: other) and operation."
            case .pullPages: "Pull pages served (native and streamed)."
            case .pullRows: "Rows served by pulls: records, and ids that left the caller's view (removed)."
            case .callDuration: "Time the service took to apply a push or read a pull page, store transactions included."
            case .websockets: "Change channels open now."
            case .notices: "Change notices written to change channels."
            case .noticesCoalesced: "Change notices merged into one their channel had waiting for the same table (its client reads slower than the table changes)."
            case .slowChannels: "Change channels closed because their client stopped reading: a notice waited past the write timeout, or more tables waited than a channel holds."
            case .membershipFailures: "Change channels closed because their identity's groups could not be read (the store failed): each client reconnects and catches up."
            case .tokens: "Bearer tokens checked: verified, refused, or unverifiable (the issuer's keys could not be had)."
            case .keySets: "Key-set (JWKS) fetches of configured issuers, by issuer and result."
            case .attachmentBytes: "Attachment bytes received by uploads (every byte that arrived, a cut-off request's included) and sent by downloads."
            case .replicaReads: "Store reads on a PostgreSQL store with replicas (serve --postgres-replica), by what served them: a replica, or the primary (no replica could: none had replayed the writes the read must see within the wait, or each was passed over, failed or no longer a standby)."
            case .consoleSignIns: "Admin and metrics keys refused (the console's sign-in, X-Admin-Key, a console session cookie, the metrics key): a wrong key (wrong_key), or unchecked because too many were wrong lately (rate_limited)."
            }
        }

        var descriptor: MetricNameDescriptor {
            MetricNameDescriptor(namespace: "offline_sync", metricName: rawValue, unitName: unit, helpText: help)
        }
    }

    private func counter(_ family: Family, _ labels: [(String, String)]) -> Counter {
        registry.makeCounter(descriptor: family.descriptor, labels: labels)
    }

    private func histogram(_ family: Family, _ labels: [(String, String)]) -> DurationHistogram {
        registry.makeDurationHistogram(descriptor: family.descriptor, labels: labels, buckets: Self.durationBuckets)
    }

    /// The registry in Prometheus's text exposition format (version 0.0.4).
    public func exposition() -> [UInt8] {
        replicaReadSource.withLock { source in
            guard let read = source.read else { return }
            let now = read()
            counter(.replicaReads, [("served_by", "replica")]).increment(by: Int64(max(0, now.replica - source.seen.0)))
            counter(.replicaReads, [("served_by", "primary")]).increment(by: Int64(max(0, now.primary - source.seen.1)))
            source.seen = (now.replica, now.primary)
        }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }

    // MARK: Recording

    /// Counts the reads of a store with replicas: `read` gives the store's running totals
    /// (served by a replica, left to the primary), read at each exposition.
    package func countReplicaReads(_ read: @escaping @Sendable () -> (replica: Int, primary: Int)) {
        replicaReadSource.withLock { $0.read = read }
    }

    /// A request answered: `route` is the matched route's template (`NotFound` when none).
    func request(route: String, method: HTTPRequest.Method, status: Int, duration: Duration) {
        counter(.requests, [("route", route), ("method", method.rawValue), ("status", String(status))]).increment()
        histogram(.requestDuration, [("route", route)]).record(duration)
    }

    /// A push applied: its operations' outcomes, and the refusals by table and operation.
    func push(_ operations: [PushOperation], _ results: [PushResult], duration: Duration) {
        pushBatches.increment()
        histogram(.callDuration, [("call", "push")]).record(duration)
        // Counted in locals, not a dictionary keyed by outcome: this runs for every push.
        var applied: Int64 = 0, conflicts: Int64 = 0, forbidden: Int64 = 0, rejected: Int64 = 0
        for (operation, result) in zip(operations, results) {
            switch result.outcome {
            case .applied: applied += 1
            case .conflict: conflicts += 1
            case .rejected(_, let status) where status == 403:
                forbidden += 1
                let table = ruleTables.contains(operation.table) ? operation.table : "other"
                counter(.refusals, [("table", table), ("operation", operation.kind.rawValue)]).increment()
            case .rejected: rejected += 1
            }
        }
        for (outcome, count) in [("applied", applied), ("conflict", conflicts), ("forbidden", forbidden), ("rejected", rejected)] where count > 0 {
            counter(.pushOperations, [("outcome", outcome)]).increment(by: count)
        }
    }

    /// A pull page served.
    func pull(_ page: PullPage, duration: Duration) {
        registry.makeCounter(descriptor: Family.pullPages.descriptor).increment()
        counter(.pullRows, [("kind", "record")]).increment(by: Int64(page.records.count))
        counter(.pullRows, [("kind", "removed")]).increment(by: Int64(page.removed.count))
        histogram(.callDuration, [("call", "pull")]).record(duration)
    }

    /// A change channel opened (`+1`) or closed (`-1`).
    func channel(_ delta: Int) {
        if delta > 0 { connected.increment(by: Double(delta)) } else { connected.decrement(by: Double(-delta)) }
    }

    /// A notice written to a change channel.
    func noticeSent() { noticesSent.increment() }

    /// `count` notices written to a change channel.
    func noticeSent(count: Int) { noticesSent.increment(by: Int64(count)) }

    /// A notice merged into one its channel had waiting for the same table.
    func noticeMerged() { noticesCoalesced.increment() }

    /// A change channel closed because its client stopped reading.
    func slowChannelClosed() { slowChannels.increment() }

    /// A change channel closed because a read of its identity's groups failed.
    func channelMembershipFailed() { membershipFailures.increment() }

    /// A bearer token checked: `verified`, `refused` or `unverifiable` (its issuer's keys could not be had).
    func tokenVerified(_ result: String) { counter(.tokens, [("result", result)]).increment() }

    /// Attachment bytes that arrived in an upload's body (`received`) or went out in a
    /// download (`sent`).
    func attachmentBytes(_ direction: String, _ count: Int) {
        counter(.attachmentBytes, [("direction", direction)]).increment(by: Int64(count))
    }

    /// A key refused at any door that takes the admin or metrics key, by why (``ConsoleSignInRefusal``).
    func consoleSignInRefused(_ reason: ConsoleSignInRefusal) {
        counter(.consoleSignIns, [("reason", reason.rawValue)]).increment()
    }

    /// A key-set fetch of a configured issuer: `ok` or `failed`.
    func keySetFetched(issuer: String, ok: Bool) {
        counter(.keySets, [("issuer", issuer), ("result", ok ? "ok" : "failed")]).increment()
    }
}
