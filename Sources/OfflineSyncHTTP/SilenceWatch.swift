import Synchronization

/// Tells the reader of one streamed response that no bytes came for `timeout` while it was
/// waiting for them, with one timer for the whole response.
///
/// A timer per read would be simpler and is what this replaces: a cancelled `Task.sleep`
/// returns at once, but its timer (and the sleeping task's memory) stays queued until the
/// deadline passes, so a page stream that reads thousands of chunks a second kept the last
/// `timeout`'s worth of timers alive — ~12 MB of a 10-million-row pull's peak memory with
/// the default 30 s. Here one timer task sleeps until the waiting read's deadline (or for
/// `timeout` while nobody waits), never cancelled before the response ends, so at most one
/// timer per response is ever queued.
final class SilenceWatch: Sendable {
    private struct State {
        /// When the current wait began; `nil` while nobody waits for bytes.
        var waitingSince: ContinuousClock.Instant?
        var waiter: CheckedContinuation<Void, any Error>?
    }

    private let state = Mutex(State())
    private let timeout: Duration
    private let timer = Mutex<Task<Void, Never>?>(nil)

    init(timeout: Duration) {
        self.timeout = timeout
        // The task holds the watch weakly, so dropping the watch ends it (`deinit`).
        let task = Task { [weak self] in
            while let deadline = self?.nextDeadline() {
                do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
                self?.endSilentWait()
            }
        }
        timer.withLock { $0 = task }
    }

    deinit {
        timer.withLock { $0?.cancel() }
    }

    /// Returns never: throws ``StreamBrokeOff`` once the caller has waited `timeout`, or
    /// `CancellationError` when the caller's task is cancelled (the read it raced won).
    func silence() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
                // Checked under the lock: a cancellation whose handler ran before the waiter
                // was stored is seen here, one that comes after finds the waiter.
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    state.waiter = waiter
                    state.waitingSince = .now
                    return false
                }
                if cancelled { waiter.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            takeWaiter(if: { _ in true })?.resume(throwing: CancellationError())
        }
    }

    /// When the timer should look next: the current wait's deadline, or one `timeout` from
    /// now while nobody waits (a wait that begins meanwhile has a later deadline, so the
    /// timer is never late for it).
    private func nextDeadline() -> ContinuousClock.Instant {
        state.withLock { ($0.waitingSince ?? .now) + timeout }
    }

    /// Ends the current wait if it has lasted `timeout`.
    private func endSilentWait() {
        let timeout = timeout
        takeWaiter(if: { $0 + timeout <= .now })?
            .resume(throwing: StreamBrokeOff(reason: "no bytes came for \(timeout)"))
    }

    /// Removes and returns the waiter when a wait is in progress and `condition` holds for its start.
    private func takeWaiter(if condition: (ContinuousClock.Instant) -> Bool) -> CheckedContinuation<Void, any Error>? {
        state.withLock { state in
            guard let since = state.waitingSince, condition(since) else { return nil }
            defer { state.waiter = nil; state.waitingSince = nil }
            return state.waiter
        }
    }
}
