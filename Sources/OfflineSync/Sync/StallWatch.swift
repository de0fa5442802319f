import Synchronization

/// Cancels the push, pull or sync under way once the remote has answered nothing for
/// `timeout`, and has it throw ``SyncError/Code/transient``: one deadline for a whole call,
/// however many attempts its remote still has, that a long call which keeps getting answers
/// never meets.
///
/// Calls run one at a time (inside the context's gate). One timer task serves every call of
/// the context: it sleeps until the current call's deadline, or for `timeout` while no call
/// runs, so a burst of short calls leaves no timers queued behind it. The task holds the
/// watch weakly and ends when the watch is dropped.
final class StallWatch: DeadlineWatched {
    private struct State {
        /// When the running call began or last heard from the remote; `nil` while none runs.
        var since: ContinuousClock.Instant?
        /// Cancels the running call.
        var cancel: (@Sendable () -> Void)?
        /// Numbers the calls, so the end of one cannot clear the next.
        var call: UInt64 = 0
        /// The number of the call the timer cancelled.
        var stalled: UInt64?
    }

    let timeout: Duration
    private let state = Mutex(State())
    private let timer = Mutex<Task<Void, Never>?>(nil)

    init(timeout: Duration) {
        self.timeout = timeout
        let task = deadlineTimer(for: self)
        timer.withLock { $0 = task }
    }

    deinit {
        timer.withLock { $0?.cancel() }
    }

    /// The remote answered: the running call's deadline starts again.
    func heard() {
        state.withLock { state in
            if state.since != nil { state.since = .now }
        }
    }

    /// Runs `body` (in a task of its own, cancelled with the caller), cancelling it once it
    /// has heard nothing from the remote for `timeout`; it then throws
    /// ``SyncError/Code/transient``. Waits for `body` to end either way, so a call never
    /// outlives its turn at the gate. One call at a time.
    func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = Task { try await body() }
        let number = state.withLock { state -> UInt64 in
            state.call &+= 1
            state.since = .now
            state.cancel = { task.cancel() }
            return state.call
        }
        let result = await Result { try await task.valueCancellingWithCaller() }
        let stalled = state.withLock { state -> Bool in
            guard state.call == number else { return false }
            state.since = nil
            state.cancel = nil
            return state.stalled == number
        }
        // A call that completed as the watch fired keeps its result.
        if stalled, !Task.isCancelled, case .failure = result {
            throw SyncError(.transient, "the remote answered nothing for \(timeout); what the call committed stays, and what it did not send stays queued")
        }
        return try result.get()
    }

    package func nextDeadline() -> ContinuousClock.Instant {
        state.withLock { ($0.since ?? .now) + timeout }
    }

    package func deadlinePassed() {
        let timeout = timeout
        let cancel = state.withLock { state -> (@Sendable () -> Void)? in
            guard let since = state.since, since + timeout <= .now, state.stalled != state.call else { return nil }
            state.stalled = state.call
            return state.cancel
        }
        cancel?()
    }
}

extension Result where Failure == any Error {
    /// The result of an async throwing body.
    init(_ body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

/// An object with one timer task that sleeps until its next deadline and tells it when the
/// deadline has passed (``deadlineTimer(for:)``).
package protocol DeadlineWatched: AnyObject, Sendable {
    /// When the timer should look next. A deadline that moves later while the timer sleeps
    /// is met by the next look (``deadlinePassed()`` checks the deadline again).
    func nextDeadline() -> ContinuousClock.Instant
    /// The deadline the timer slept until has passed.
    func deadlinePassed()
}

/// Starts `owner`'s timer task. It holds `owner` weakly and ends once `owner` is gone (or
/// when the task is cancelled, as the owner's `deinit` should do).
package func deadlineTimer(for owner: some DeadlineWatched) -> Task<Void, Never> {
    Task { [weak owner] in
        while let deadline = owner?.nextDeadline() {
            do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
            owner?.deadlinePassed()
        }
    }
}
