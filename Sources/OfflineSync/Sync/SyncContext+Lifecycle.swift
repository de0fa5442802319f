import Foundation
import Synchronization

/// Whether an online period has a live change channel, and when it last synced: what
/// ``SyncContext`` polls by while the channel is down.
final class ChannelState: Sendable {
    private struct State {
        var live = false
        var lastRun: ContinuousClock.Instant?
        /// A sync run succeeded in this period.
        var synced = false
    }

    private let state = Mutex(State())
    /// When the period began.
    let began = ContinuousClock.now

    /// The channel subscribed (`true`) or dropped (`false`).
    func setLive(_ live: Bool) { state.withLock { $0.live = live } }

    /// A sync run began or ended (whether or not it succeeded): the next poll is due an
    /// interval later.
    func ran() { state.withLock { $0.lastRun = .now } }

    /// A sync run succeeded.
    func succeeded() { state.withLock { $0.synced = true } }

    /// Whether a sync run began in this period.
    var hasRun: Bool { state.withLock { $0.lastRun != nil } }

    /// Whether a sync run succeeded in this period.
    var hasSynced: Bool { state.withLock { $0.synced } }

    /// When the next poll is due: `nil` while the channel is live; one `interval` after the
    /// last run, or after the period began if nothing ran yet (a channel that neither opens
    /// nor reports a failure).
    func pollDue(interval: Duration) -> ContinuousClock.Instant? {
        state.withLock { state in
            if state.live { return nil }
            return (state.lastRun ?? began) + interval
        }
    }
}

/// The running ``SyncContext/start(tables:network:queryId:)`` loop, if any.
final class LifecycleState: Sendable {
    let task = Mutex<Task<Void, Never>?>(nil)
    /// `start` and `stop` take turns, so two concurrent starts cannot both install a loop
    /// (the first one's would run on, unreachable).
    let gate = SerialGate()
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
    /// reconnection of the channel runs the sequence again. Local writes are pushed as they
    /// are made.
    ///
    /// The change channel is the fast path, not a requirement: while it is not live (the
    /// remote has none, a proxy refuses WebSockets, it is down), the context runs a sync
    /// every ``SyncOptions/pollInterval`` — the first as soon as the channel reports that it
    /// cannot open (``RemoteChangeEvent/unavailable(_:)``, which the HTTP remotes report at once
    /// for a refused WebSocket upgrade). A channel that cannot open is the channel's state,
    /// not a failure of the sync: it is not reported as ``SyncEvent/syncFailed(error:willRetry:)``
    /// nor kept in ``SyncStatus/lastError`` (the runs report what they meet, and
    /// ``SyncEvent/subscriptionsEstablished`` says when the channel is live), unless it is one
    /// retrying cannot fix (refused credentials), which stops the loop. A channel that opens
    /// after a run of this online period succeeded catches up by pulling each table (what a
    /// change notice does) instead of running the whole sequence again.
    /// ``SyncStatus/connected`` says whether the remote answered, never merely that the
    /// monitor reports a network.
    ///
    /// Offline at start, only `networkStatus(active: false)` is reported; local reads and
    /// writes go on (writes queue), and the whole sequence runs when the network returns —
    /// as it does after every outage. A run that fails while the network is up is retried
    /// with backoff from ``restartDelay`` up to ``maxRestartDelay``. Starting a started
    /// context restarts it. A run that fails reports ``SyncEvent/syncFailed(error:willRetry:)``
    /// and sets ``SyncStatus/lastError``; one that retrying cannot fix — refused credentials
    /// (``SyncError/Code/authenticationFailed``, after the token provider was asked again) or
    /// a store error (``SyncFailure/Kind/store``) — stops the loop
    /// (``SyncStatus/BackgroundSync/halted``) until `start` is called again.
    public func start(tables: [String], network: any NetworkMonitor, queryId: String = "default") async {
        try? await lifecycle.gate.run { await self.startLocked(tables: tables, network: network, queryId: queryId) }
    }

    private func startLocked(tables: [String], network: any NetworkMonitor, queryId: String) async {
        await stopLocked()
        self.network.reset()
        statusState.update { $0.backgroundSync = .running }
        let statuses = network.statuses()
        let task = Task {
            // One queue for what the loop reacts to: the monitor's statuses, and a session's
            // end on a failure retrying cannot fix, which ends the loop (and its subscription to the
            // monitor) until the app starts the context again.
            let (inputs, input) = AsyncStream.makeStream(of: LifecycleInput.self)
            let forward = Task {
                for await online in statuses { input.yield(.network(online)) }
                input.finish()
            }
            defer { forward.cancel() }
            var session: Task<Void, Never>?
            loop: for await next in inputs {
                switch next {
                case .network(let online):
                    session?.cancel()
                    await session?.value
                    session = nil
                    self.networkChanged(online)
                    if online {
                        session = Task {
                            if await self.runSession(tables: tables, queryId: queryId) == .halted { input.yield(.halted) }
                        }
                    }
                case .halted:
                    break loop
                }
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
        // In a task of its own, so that the caller's cancellation cannot leave the loop running.
        await Task { try? await self.lifecycle.gate.run { await self.stopLocked() } }.value
    }

    private func stopLocked() async {
        guard let task = lifecycle.task.withLock({ state -> Task<Void, Never>? in defer { state = nil }; return state }) else {
            return
        }
        task.cancel()
        await task.value
        statusState.update { $0.backgroundSync = .off }
    }

    /// Stops syncing and removes every local record of the app's tables, with their queued
    /// operations, operation errors and pull cursors; the next ``start(tables:network:queryId:)``
    /// begins with a full sync. Table definitions stay.
    public func clear() async throws {
        await stop()
        let tables = try await store.read { txn in try txn.tables().map(\.name).filter { !$0.hasPrefix("__") } }
        for table in tables { try await purge(table, force: true) }
    }

    /// What the started loop reacts to.
    private enum LifecycleInput: Sendable {
        /// The monitor's status.
        case network(Bool)
        /// A session ended on a failure retrying cannot fix (refused credentials, a store error).
        case halted
    }

    /// How an online period ended.
    private enum SessionEnd: Sendable {
        /// Cancelled: the network went down, or the context was stopped.
        case cancelled
        /// A failure retrying cannot fix: refused credentials or a store error. The loop stops.
        case halted
    }

    /// One online period: the remote's change notices and the app's local writes, each
    /// followed until the period is cancelled or a failure retrying cannot fix halts it.
    private func runSession(tables: [String], queryId: String) async -> SessionEnd {
        let channel = ChannelState()
        return await withTaskGroup(of: SessionEnd.self) { group in
            group.addTask { await self.followChanges(tables: tables, queryId: queryId, channel: channel) }
            group.addTask { await self.pushLocalWrites() }
            group.addTask { await self.retryRefusedTables(tables: tables, queryId: queryId) }
            group.addTask { await self.pollWithoutChannel(tables: tables, queryId: queryId, channel: channel) }
            for await end in group where end == .halted {
                group.cancelAll()
                return .halted
            }
            return .cancelled
        }
    }

    /// Pushes after every local write while the session lasts (the session's first sync run
    /// pushes what was queued before it): a write made online reaches the server without the
    /// app calling `push`. A failed push is retried with backoff while operations wait.
    private func pushLocalWrites() async -> SessionEnd {
        var backoff = Backoff(initial: Self.restartDelay, maximum: Self.maxRestartDelay)
        var outbox = observeOutbox().makeAsyncIterator()
        do {
            // The current counts first: what is queued now is the first sync run's to push.
            guard try await outbox.next() != nil else { return .cancelled }
            while let status = try await outbox.next() {
                guard status.pending > 0 else { continue }
                while !Task.isCancelled {
                    do {
                        _ = try await push()
                        backoff.reset()
                        break
                    } catch {
                        if let end = settle(error) { return end }
                        try? await Task.sleep(for: backoff.nextDelay())
                    }
                }
            }
        } catch {
            // Reading the outbox failed: the store is closed or damaged.
            if Task.isCancelled || error is CancellationError { return .cancelled }
            return halt(SyncFailure(error, willRetry: false))
        }
        return .cancelled
    }

    /// The remote's change notices: a sync run when the channel opens (and after each drop) —
    /// a pull of each table instead when it first opens after a run of this period synced —
    /// and a pull of each table a notice names.
    private func followChanges(tables: [String], queryId: String, channel: ChannelState) async -> SessionEnd {
        guard let source = remote as? RemoteChangeSource else {
            broadcaster.publish(.subscriptionsEstablished)
            return await syncUntilDone(tables: tables, queryId: queryId, channel: channel)
        }
        let wanted = Set(tables)
        var established = false
        for await event in source.changes(device: nil) {
            if Task.isCancelled { break }
            switch event {
            case .subscribed:
                channel.setLive(true)
                remoteAnswered()
                let first = !established
                if first {
                    established = true
                    broadcaster.publish(.subscriptionsEstablished)
                }
                // A first subscription after a run of this period synced everything (the poll's,
                // run when the channel could not open): catch up on what was committed since
                // that run pulled each table, with a pull per table, not a second whole run.
                if first, channel.hasSynced {
                    switch await catchUp(tables: tables, queryId: queryId) {
                    case .caughtUp: continue
                    case .cancelled: return .cancelled
                    case .failed: break
                    }
                }
                // First time, or back after a drop (or a catch-up that failed): catch up on everything.
                if await syncUntilDone(tables: tables, queryId: queryId, channel: channel) == .halted { return .halted }
            case .changed(let table) where wanted.contains(table):
                do {
                    _ = try await pull(table, queryId: queryId)
                } catch {
                    // Stopped while pulling is not a failure, and retryable failures wait for the
                    // next notice or reconnection (a refused table for its retry): only a halt
                    // ends the following.
                    if settle(error) == .halted { return .halted }
                }
            case .unavailable(let error):
                // The channel could not open: stop if retrying cannot help (refused
                // credentials). Otherwise it is the channel's state, not a sync failure: the
                // poll syncs meanwhile, and each run reports what it meets itself — so a
                // refusal the channel could not name (a refused WebSocket upgrade is a proxy
                // or refused credentials alike) is reported with its real reason, and a sync
                // that works reports nothing.
                channel.setLive(false)
                remoteFailed(error)
                let failure = SyncFailure(error: error, willRetry: true)
                guard failure.isRetryable else { return halt(failure) }
                // The poll's first run is now.
                if !channel.hasRun, let end = await syncOnce(tables: tables, queryId: queryId, channel: channel) { return end }
            case .disconnected:
                channel.setLive(false)
            case .changed, .dataset:
                continue
            }
        }
        return .cancelled
    }

    /// Runs ``sync(_:queryId:)`` until it succeeds, the session is cancelled, or the remote
    /// refuses the credentials; reports each failure (``SyncEvent/syncFailed(error:willRetry:)``)
    /// and backs off between them (see ``restartDelay``). A run that only some tables' refusals
    /// failed is done: every other table was pulled and the outbox pushed, and the refused
    /// tables are ``retryRefusedTables(tables:queryId:)``'s, so change notices are not held
    /// up behind a backoff.
    private func syncUntilDone(tables: [String], queryId: String, channel: ChannelState) async -> SessionEnd {
        var backoff = Backoff(initial: Self.restartDelay, maximum: Self.maxRestartDelay)
        while !Task.isCancelled {
            do {
                channel.ran()
                defer { channel.ran() }
                try await sync(tables, queryId: queryId)
                channel.succeeded()
                return .cancelled
            } catch {
                if let end = settle(error) { return end }
                if SyncFailure(error, willRetry: true).kind == .rejected, !status.tableErrors.isEmpty { return .cancelled }
                try? await Task.sleep(for: backoff.nextDelay())
            }
        }
        return .cancelled
    }

    /// Runs a sync whenever one is due while the change channel is not live
    /// (``ChannelState/pollDue(interval:)``): every ``SyncOptions/pollInterval`` after the last
    /// run. A failed run is reported and tried again at the next poll; one that retrying
    /// cannot fix halts the session.
    private func pollWithoutChannel(tables: [String], queryId: String, channel: ChannelState) async -> SessionEnd {
        while !Task.isCancelled {
            guard let due = channel.pollDue(interval: options.pollInterval) else {
                // Live: look again an interval from now (a drop is noticed within one).
                try? await Task.sleep(for: options.pollInterval)
                continue
            }
            if due > .now {
                try? await Task.sleep(until: due, clock: .continuous)
                continue
            }
            if let end = await syncOnce(tables: tables, queryId: queryId, channel: channel), end == .halted { return .halted }
        }
        return .cancelled
    }

    /// One sync run of the poll: `nil` when it succeeded or failed in a way the next poll may
    /// fix (reported), otherwise how the session ends.
    private func syncOnce(tables: [String], queryId: String, channel: ChannelState) async -> SessionEnd? {
        channel.ran()
        defer { channel.ran() }
        do {
            try await sync(tables, queryId: queryId)
            channel.succeeded()
            return nil
        } catch {
            return settle(error)
        }
    }

    /// How a ``catchUp(tables:queryId:)`` went.
    private enum CatchUp {
        /// Every table was pulled.
        case caughtUp
        /// A pull failed: a whole run (with its retries and reports) takes over.
        case failed
        /// The session was cancelled.
        case cancelled
    }

    /// Pulls each of `tables` but those whose pull the remote refuses
    /// (``retryRefusedTables(tables:queryId:)``'s), as a change notice pulls one. A failure is
    /// not reported here: the whole run that follows meets it again and reports it.
    private func catchUp(tables: [String], queryId: String) async -> CatchUp {
        do {
            for table in tables where status.tableErrors[table] == nil {
                try Task.checkCancellation()
                _ = try await pull(table, queryId: queryId)
            }
            return .caughtUp
        } catch {
            if Task.isCancelled || error is CancellationError { return .cancelled }
            return .failed
        }
    }

    /// Pulls again, with backoff, each of `tables` whose last pull the remote refused
    /// (``SyncStatus/tableErrors``), until it passes or the session ends; waits on the status
    /// while no table is refused. Each refusal is reported again; one that retrying cannot fix
    /// (refused credentials, a store error) halts the session.
    private func retryRefusedTables(tables: [String], queryId: String) async -> SessionEnd {
        let wanted = Set(tables)
        var backoff = Backoff(initial: Self.restartDelay, maximum: Self.maxRestartDelay)
        var statuses = observeStatus().makeAsyncIterator()
        while !Task.isCancelled {
            // Wait for a refused table: the status stream yields the current status first.
            var refused: [String] = []
            while refused.isEmpty {
                guard let status = await statuses.next() else { return .cancelled }
                refused = status.tableErrors.keys.filter(wanted.contains).sorted()
            }
            try? await Task.sleep(for: backoff.nextDelay())
            for table in refused where !Task.isCancelled && status.tableErrors[table] != nil {
                do {
                    _ = try await pull(table, queryId: queryId)
                } catch {
                    if let end = settle(error) { return end }
                }
            }
            if status.tableErrors.keys.allSatisfy({ !wanted.contains($0) }) { backoff.reset() }
        }
        return .cancelled
    }

    /// What a background loop does after `error`: `nil` to go on (the failure is reported as
    /// one it will retry), `.cancelled` when the session was stopped (not a failure), or
    /// `.halted` after reporting a failure retrying cannot fix.
    private func settle(_ error: any Error) -> SessionEnd? {
        if Task.isCancelled || error is CancellationError { return .cancelled }
        let failure = SyncFailure(error, willRetry: true)
        if failure.kind == .cancelled { return .cancelled }
        guard failure.isRetryable else { return halt(failure) }
        failed(failure)
        return nil
    }

    /// Reports a failure of the background sync that it will retry.
    private func failed(_ failure: SyncFailure) {
        statusState.update { $0.lastError = failure }
        broadcaster.publish(.syncFailed(error: failure.error, willRetry: true))
    }

    /// Reports a failure that ends the background sync.
    private func halt(_ failure: SyncFailure) -> SessionEnd {
        var failure = failure
        failure.willRetry = false
        statusState.update {
            $0.lastError = failure
            $0.backgroundSync = .halted
        }
        broadcaster.publish(.syncFailed(error: failure.error, willRetry: false))
        return .halted
    }
}
