import Synchronization

/// Asks a store, while a ``StoreObserver`` has live observations, whether another process
/// committed to it (``LocalStore/externalChangeToken()``), and reports each change of the
/// answer. One task polls at most; it ends when no observation is left, when the adapter
/// answers `nil` (it cannot tell: never asked again) or when the store is closed.
///
/// The first answer after polling starts counts as a change: an observation that began its
/// first read before that answer may have missed a commit made just before it, and one
/// extra read per observation is cheap next to a missed update.
final class ExternalChangePoller: Sendable {
    private struct State {
        var running = false
        /// The adapter answered `nil`.
        var unsupported = false
        /// The last answer.
        var token: UInt64?
    }

    let interval: Duration
    private let state = Mutex(State())

    init(interval: Duration) {
        self.interval = interval
    }

    /// Starts polling `store` unless a poll task runs or the adapter cannot tell. `isNeeded`
    /// is asked after each pause (under the poller's lock: it must not call back into the
    /// poller); `changed` runs when the answer changed.
    func start(store: any LocalStore, isNeeded: @escaping @Sendable () -> Bool, changed: @escaping @Sendable () -> Void) {
        let starts = state.withLock { state in
            guard !state.running, !state.unsupported else { return false }
            state.running = true
            return true
        }
        guard starts else { return }
        Task { await self.poll(store, isNeeded: isNeeded, changed: changed) }
    }

    private func poll(_ store: any LocalStore, isNeeded: @Sendable () -> Bool, changed: @Sendable () -> Void) async {
        while true {
            do {
                let answer = try await store.externalChangeToken()
                let moved = state.withLock { state -> Bool in
                    guard let answer else {
                        state.unsupported = true
                        return false
                    }
                    defer { state.token = answer }
                    return state.token != answer
                }
                if moved { changed() }
            } catch let error as SyncError where error.code == .storeClosed {
                state.withLock { $0.running = false }
                return
            } catch {
                // A transient failure (another process holds a lock): ask again next time.
            }
            let stops = state.withLock { state in
                if state.unsupported || !isNeeded() {
                    state.running = false
                    return true
                }
                return false
            }
            if stops { return }
            try? await Task.sleep(for: interval)
        }
    }
}
