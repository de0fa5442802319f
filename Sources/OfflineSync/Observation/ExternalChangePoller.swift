import Synchronization

/// Asks a store, while a ``StoreObserver`` has live observations, whether another process
/// committed to it (``LocalStore/externalChangeToken()``), and reports each change of the
/// answer. One task polls at most; it ends when no observation is left, when the adapter
/// answers `nil` (it cannot tell: never asked again) or when the store is closed.
///
/// Every read of an observation waits for a first answer (``baseline(_:)``), so no read
/// starts before the answer that later ones are compared with: a commit made after that
/// answer changes the next one, and a commit made before it is in every read. The first
/// answer is therefore not a change; when polling starts again after a pause, an answer
/// that differs from the one before the pause is.
final class ExternalChangePoller: Sendable {
    private struct State {
        var running = false
        /// The adapter answered `nil`.
        var unsupported = false
        /// The last answer.
        var token: UInt64?
        /// A read started before any answer was known (``baseline(_:)`` failed).
        var firstIsChange = false
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

    /// Returns once the store has answered once (or cannot tell): a read that starts after
    /// it sees every commit the answers so far cover. Asks the store only until one answer
    /// is known.
    func baseline(_ store: any LocalStore) async {
        guard state.withLock({ $0.token == nil && !$0.unsupported }) else { return }
        do {
            let answer = try await store.externalChangeToken()
            state.withLock { state in
                guard state.token == nil, !state.unsupported else { return }
                if let answer { state.token = answer } else { state.unsupported = true }
            }
        } catch {
            // The read goes on without a baseline: the first answer polled counts as a change.
            state.withLock { $0.firstIsChange = true }
        }
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
                    defer { (state.token, state.firstIsChange) = (answer, false) }
                    return state.token.map { $0 != answer } ?? state.firstIsChange
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
