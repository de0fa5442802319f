import Foundation
import Synchronization

/// What a remote's change-notification channel reports.
///
/// New cases arrive in minor releases (Docs/Versioning.md): switch over it with an
/// `@unknown default:` case.
public enum RemoteChangeEvent: Sendable, Hashable {
    /// The channel is (again) live: changes committed from now on are announced. Pull once
    /// after each of these, to catch what was committed while the channel was down.
    case subscribed
    /// The identity's rows of `table` changed on the remote; pull that table.
    case changed(table: String)
    /// The channel dropped; it reconnects by itself with backoff.
    case disconnected
    /// An attempt to open the channel failed; it tries again by itself with backoff. The
    /// error says why: ``SyncError/Code/transient`` for a server that cannot be reached or
    /// refused the connection, ``SyncError/Code/authenticationFailed`` for credentials the
    /// remote refused (after the token provider was asked again), ``SyncError/Code/rejected``
    /// for a remote that answers but will not open it (a refused WebSocket upgrade is reported
    /// so at once, before the HTTP client asks for the event stream in the same attempt; a
    /// `subscribed` may still follow). A started ``SyncContext`` syncs by polling meanwhile and
    /// reports it as a sync failure only when retrying cannot fix it (refused credentials).
    case unavailable(SyncError)
    /// Push sync: a dataset the device subscribed to changed on the remote (only on a
    /// channel opened with the id of a device registered for WebSocket push, `PushPlatform.webSocket` in OfflineSyncDatasets).
    case dataset(DatasetNotification)
}

/// A remote that announces its changes (the HTTP client's WebSocket channel, for one).
/// ``SyncContext/start(tables:network:queryId:)`` uses it to pull what changed as soon as
/// it changes, and reports ``SyncEvent/subscriptionsEstablished`` once it is live.
public protocol RemoteChangeSource: Sendable {
    /// The change notifications from now on; the channel reconnects by itself and ends
    /// when the consumer stops iterating. With `device`, a device registered for push sync,
    /// it also carries that device's ``RemoteChangeEvent/dataset(_:)`` notices.
    func changes(device: String?) -> AsyncStream<RemoteChangeEvent>
}

/// Whether the remote can be reached, as a stream of statuses.
///
/// ``ProbingNetworkMonitor`` probes the server with backoff; ``ManualNetworkMonitor`` is
/// set by the app (from the platform's reachability API) or by tests.
public protocol NetworkMonitor: Sendable {
    /// The current status first (`true`: reachable), then every change, until the consumer
    /// stops iterating.
    func statuses() -> AsyncStream<Bool>
}

extension NetworkMonitor {
    /// Waits until the remote is reachable. Throws `CancellationError` if the task is cancelled first.
    public func waitUntilOnline() async throws {
        for await online in statuses() where online { return }
        try Task.checkCancellation()
        throw CancellationError()
    }
}

/// A monitor whose status is set from outside: by the app, from the platform's reachability
/// API, or by a test.
public final class ManualNetworkMonitor: NetworkMonitor {
    private let broadcaster = Broadcaster<SingleTopic, Bool>(bufferingPolicy: .bufferingNewest(1), replaysLatest: true)

    /// Creates a monitor with an initial status.
    public init(online: Bool) { broadcaster.publish(online) }

    /// Sets the status; subscribers hear of changes only.
    public func set(online: Bool) { broadcaster.publishIfChanged(online, to: .all) }

    /// The current status.
    public var isOnline: Bool { broadcaster.latest ?? false }

    /// See ``NetworkMonitor/statuses()``.
    public func statuses() -> AsyncStream<Bool> { broadcaster.subscribe() }

    /// How many ``statuses()`` streams are open: a test's signal that something is parked
    /// waiting for the network.
    package var listenerCount: Int { broadcaster.subscriptionCount }
}

/// The default monitor: probes the remote (for example `GET /health`) every `interval` while
/// it answers, and with exponential backoff from `initialBackoff` up to `maxBackoff` while it
/// does not. One probing loop serves every subscriber; it runs while anyone listens.
public final class ProbingNetworkMonitor: NetworkMonitor {
    private let probe: @Sendable () async -> Bool
    private let interval: Duration
    private let backoff: Backoff
    /// The latest probe's verdict, replayed to each new subscriber; none before the first probe.
    private let broadcaster = Broadcaster<SingleTopic, Bool>(bufferingPolicy: .bufferingNewest(1), replaysLatest: true)
    private let loop = Mutex<(task: Task<Void, Never>?, listeners: Int)>((nil, 0))

    /// Creates a monitor around `probe`, which returns whether the remote answered.
    public init(interval: Duration = .seconds(30), initialBackoff: Duration = .milliseconds(250),
                maxBackoff: Duration = .seconds(30), probe: @escaping @Sendable () async -> Bool) {
        self.probe = probe
        self.interval = interval
        self.backoff = Backoff(initial: initialBackoff, maximum: maxBackoff, jitter: .none)
    }

    /// See ``NetworkMonitor/statuses()``.
    public func statuses() -> AsyncStream<Bool> {
        let inner = broadcaster.subscribe()
        loop.withLock { state in
            state.listeners += 1
            // The loop holds the monitor while anyone listens (the last listener ends it), so a
            // monitor made inline, as in `start(tables:network:)`, lives as long as its streams.
            if state.task == nil { state.task = Task { await self.run() } }
        }
        return AsyncStream { continuation in
            let relay = Task {
                for await status in inner { continuation.yield(status) }
                continuation.finish()
            }
            continuation.onTermination = { _ in
                relay.cancel()
                self.loop.withLock { state in
                    state.listeners -= 1
                    if state.listeners == 0 { state.task?.cancel(); state.task = nil }
                }
            }
        }
    }

    private func run() async {
        var backoff = self.backoff
        while !Task.isCancelled {
            let online = await probe()
            if Task.isCancelled { return }
            broadcaster.publishIfChanged(online, to: .all)
            let wait: Duration
            if online {
                backoff.reset()
                wait = interval
            } else {
                wait = backoff.nextDelay()
            }
            try? await Task.sleep(for: wait)
        }
    }
}
