import Foundation
import Synchronization

/// The running ``SyncContext/start(tables:network:queryId:)`` loop, if any.
final class LifecycleState: Sendable {
    let task = Mutex<Task<Void, Never>?>(nil)
}

extension SyncContext {
    /// How long a started context waits before retrying a sync run that failed while the
    /// network was reported up: the first retry after at most ``restartDelay``, then with
    /// exponential backoff and full jitter up to ``maxRestartDelay``; a run that succeeds
    /// starts the backoff over.
    public static let restartDelay: Duration = .seconds(2)
    /// The longest wait between two failed sync runs of a started context.
    public static let maxRestartDelay: Duration = .seconds(60)

    /// Starts syncing `tables` in the background, DataStore style, and returns at once.
    ///
    /// Events, in this order: ``SyncEvent/networkStatus(active:)`` with the monitor's first
    /// status; when it is up, ``SyncEvent/subscriptionsEstablished`` once the remote's change
    /// notifications are live (at once for a remote without a ``RemoteChangeSource``), then
    /// a sync run: ``SyncEvent/syncQueriesStarted(tables:)``, ``SyncEvent/modelSynced(_:)``
    /// per table, ``SyncEvent/syncQueriesReady``, ``SyncEvent/outboxStatus(isEmpty:)`` and
    /// ``SyncEvent/ready``. Afterwards each notified change pulls its table, and each
    /// reconnection of the channel runs the sequence again.
    ///
    /// Offline at start, only `networkStatus(active: false)` is reported; local reads and
    /// writes go on (writes queue), and the whole sequence runs when the network returns —
    /// as it does after every outage. A run that fails while the network is up is retried
    /// with backoff from ``restartDelay`` up to ``maxRestartDelay``. Starting a started
    /// context restarts it.
    public func start(tables: [String], network: any NetworkMonitor, queryId: String = "default") async {
        await stop()
        self.network.reset()
        let statuses = network.statuses()
        let task = Task {
            var session: Task<Void, Never>?
            for await online in statuses {
                session?.cancel()
                await session?.value
                session = nil
                self.networkReachable(online)
                if online { session = Task { await self.runSession(tables: tables, queryId: queryId) } }
            }
            session?.cancel()
            await session?.value
        }
        lifecycle.task.withLock { $0 = task }
    }

    /// Stops what ``start(tables:network:queryId:)`` started and waits until it has stopped
    /// (a push or pull in flight completes or is cancelled as a whole). Local reads and
    /// writes keep working.
    public func stop() async {
        guard let task = lifecycle.task.withLock({ state -> Task<Void, Never>? in defer { state = nil }; return state }) else {
            return
        }
        task.cancel()
        await task.value
    }

    /// Stops syncing and removes every local record of the app's tables, with their queued
    /// operations, operation errors and pull cursors; the next ``start(tables:network:queryId:)``
    /// begins with a full sync. Table definitions stay.
    public func clear() async throws {
        await stop()
        let tables = try await store.read { txn in try txn.tables().map(\.name).filter { !$0.hasPrefix("__") } }
        for table in tables { try await purge(table, force: true) }
    }

    /// One online period: live notifications, then sync runs until cancelled.
    private func runSession(tables: [String], queryId: String) async {
        guard let source = remote as? RemoteChangeSource else {
            broadcaster.publish(.subscriptionsEstablished)
            await syncUntilDone(tables: tables, queryId: queryId)
            return
        }
        let wanted = Set(tables)
        var established = false
        for await event in source.changes(device: nil) {
            if Task.isCancelled { break }
            switch event {
            case .subscribed:
                if !established {
                    established = true
                    broadcaster.publish(.subscriptionsEstablished)
                }
                // First time, or back after a drop: catch up on everything.
                await syncUntilDone(tables: tables, queryId: queryId)
            case .changed(let table) where wanted.contains(table):
                _ = try? await pull(table, queryId: queryId)
            case .changed, .disconnected, .dataset:
                continue
            }
        }
    }

    /// Runs ``sync(_:queryId:)`` until it succeeds or the session is cancelled, backing off
    /// between failures (see ``restartDelay``).
    private func syncUntilDone(tables: [String], queryId: String) async {
        var backoff = Backoff(initial: Self.restartDelay, maximum: Self.maxRestartDelay)
        while !Task.isCancelled {
            do {
                try await sync(tables, queryId: queryId)
                return
            } catch {
                try? await Task.sleep(for: backoff.nextDelay())
            }
        }
    }
}
