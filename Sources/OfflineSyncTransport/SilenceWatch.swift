import OfflineSync
import Synchronization

/// Ends a read of one streamed response once no bytes came for `timeout`, with one timer for
/// the whole response.
///
/// A timer per read would be simpler and is what this replaces: a cancelled `Task.sleep`
/// returns at once, but its timer (and the sleeping task's memory) stays queued until the
/// deadline passes, so a page stream that reads thousands of chunks a second kept the last
/// `timeout`'s worth of timers alive — ~12 MB of a 10-million-row pull's peak memory with
/// the default 30 s. Here one timer task sleeps until the waiting read's deadline (or for
/// `timeout` while nobody waits), never cancelled before the response ends, so at most one
/// timer per response is ever queued.
///
/// A silent read is cancelled and *left*: the caller goes on at once (to ask again), so a
/// body whose read does not honour cancellation cannot hold the pull.
final class SilenceWatch: DeadlineWatched {
    private struct State {
        /// When the current read began; `nil` while nobody waits for bytes.
        var waitingSince: ContinuousClock.Instant?
        /// Ends the current read as silent.
        var onSilence: (@Sendable () -> Void)?
        /// Numbers the reads, so a read left behind that ends late cannot clear a newer one.
        var read: UInt64 = 0
    }

    private let state = Mutex(State())
    private let timeout: Duration
    private let timer = Mutex<Task<Void, Never>?>(nil)

    init(timeout: Duration) {
        self.timeout = timeout
        // The task holds the watch weakly, so dropping the watch ends it (`deinit`).
        let task = deadlineTimer(for: self)
        timer.withLock { $0 = task }
    }

    deinit {
        timer.withLock { $0?.cancel() }
    }

    /// `read`'s value; ``StreamBrokeOff`` once it has waited `timeout` (`read` is then
    /// cancelled and not awaited); `CancellationError` when the caller is cancelled (so is
    /// `read`). One read at a time.
    func race<T: Sendable>(_ read: Task<T, any Error>) async throws -> T {
        let answer = Answer<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                answer.wait(continuation)
                let timeout = timeout
                let number = state.withLock { state -> UInt64 in
                    state.read &+= 1
                    state.waitingSince = .now
                    state.onSilence = {
                        answer.finish(.failure(StreamBrokeOff(reason: "no bytes came for \(timeout)")))
                        read.cancel()
                    }
                    return state.read
                }
                // Weakly: a read left behind must not keep the watch (and its timer) alive.
                Task { [weak self] in
                    let result = await read.result
                    self?.endRead(number)
                    answer.finish(result)
                }
            }
        } onCancel: {
            read.cancel()
            answer.finish(.failure(CancellationError()))
        }
    }

    /// When the timer should look next: the current read's deadline, or one `timeout` from
    /// now while nobody waits (a read that begins meanwhile has a later deadline, so the
    /// timer is never late for it).
    package func nextDeadline() -> ContinuousClock.Instant {
        state.withLock { ($0.waitingSince ?? .now) + timeout }
    }

    /// Ends the current read as silent if it has waited `timeout`.
    package func deadlinePassed() {
        let timeout = timeout
        let silent = state.withLock { state -> (@Sendable () -> Void)? in
            guard let since = state.waitingSince, since + timeout <= .now else { return nil }
            defer { state.waitingSince = nil; state.onSilence = nil }
            return state.onSilence
        }
        silent?()
    }

    /// Read `number` ended: it no longer waits.
    private func endRead(_ number: UInt64) {
        state.withLock { state in
            guard state.read == number else { return }
            state.waitingSince = nil
            state.onSilence = nil
        }
    }
}

/// The one answer of a race (``SilenceWatch/race(_:)``, a change channel's handshake): the
/// first of its contenders' results resumes the caller; the others are ignored. A result
/// that comes before the caller's continuation is stored is kept until it is.
final class Answer<T: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<T, any Error>?)
        case finished(Result<T, any Error>?)
    }

    private let state = Mutex(State.waiting(nil))

    func wait(_ continuation: CheckedContinuation<T, any Error>) {
        let early = state.withLock { state -> Result<T, any Error>? in
            guard case .finished(let result) = state else {
                state = .waiting(continuation)
                return nil
            }
            state = .finished(nil)
            return result
        }
        if let early { continuation.resume(with: early) }
    }

    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
            switch state {
            case .waiting(let continuation?):
                state = .finished(nil)
                return continuation
            case .waiting(nil):
                state = .finished(result)
                return nil
            case .finished:
                return nil
            }
        }
        waiter?.resume(with: result)
    }
}
