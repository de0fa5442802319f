import Synchronization

/// The store read behind `GET /ready`, bounded in time and in number.
///
/// A probe answers by its deadline whatever the store does: the read runs on a task of its
/// own and the probe waits for whichever comes first, the read's answer or the deadline, never
/// for the read itself. A store call blocked in C (a lock held by another process, a database
/// server that stopped answering) cannot be interrupted, so the read is left to finish on
/// its own, and it is not cancelled at the deadline either: it keeps its place in the store's
/// queue. At most one read is under way: a probe that comes while one is waits on that read
/// (up to its own deadline) rather than start another, so probes against a hung store cost
/// one stuck read however many there are, and the first answer after the store recovers
/// reaches every probe waiting.
final class ReadinessProbe: Sendable {
    /// What one probe learned.
    enum Outcome: Sendable, Equatable {
        /// The store answered the read.
        case answered
        /// The read failed: a closed store, a storage failure.
        case failed
        /// No answer by the deadline (or the probe's request was cancelled); the read goes on.
        case noAnswer
    }

    /// One probe's wait.
    private enum Waiter {
        /// Registered, its continuation not handed over yet.
        case registered
        /// Waiting for the read or its deadline.
        case waiting(CheckedContinuation<Outcome, Never>)
        /// Answered before its continuation was handed over.
        case answered(Outcome)
    }

    private struct State {
        /// Whether a read is under way.
        var reading = false
        /// The probes waiting, by number.
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
        /// How many reads were started, ever.
        var readsStarted = 0
    }

    private let state = Mutex(State())

    /// How many store reads the probes started (tests check that probes against a hung store
    /// do not pile reads up).
    var readsStarted: Int { state.withLock { $0.readsStarted } }

    /// Whether the store answers `read` within `deadline`: starts `read` unless one is under
    /// way, and returns by the deadline, or at once when the calling task is cancelled
    /// (``Outcome/noAnswer``), even if the read never returns.
    func check(within deadline: Duration, read: @escaping @Sendable () async throws -> Void) async -> Outcome {
        let (id, start) = state.withLock { state -> (UInt64, Bool) in
            let id = state.nextWaiter
            state.nextWaiter &+= 1
            state.waiters[id] = .registered
            guard !state.reading else { return (id, false) }
            state.reading = true
            state.readsStarted += 1
            return (id, true)
        }
        if start {
            // Unstructured on purpose: it outlives a probe whose deadline passed, and the
            // next probe waits on it. Nothing awaits it; it ends when the store answers.
            Task {
                let outcome: Outcome = (try? await read()) != nil ? .answered : .failed
                self.finish(outcome)
            }
        }
        return await withTaskGroup(of: Void.self, returning: Outcome.self) { group in
            // The deadline: its sleep ends early when the probe is cancelled, or once the
            // probe has its answer (`cancelAll` below), so the group never waits on the store.
            group.addTask {
                try? await Task.sleep(for: deadline)
                self.resolve(id, .noAnswer)
            }
            let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let ready = state.withLock { state -> Outcome? in
                    if case .answered(let outcome)? = state.waiters[id] {
                        state.waiters[id] = nil
                        return outcome
                    }
                    state.waiters[id] = .waiting(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
            group.cancelAll()
            return outcome
        }
    }

    /// Answers probe `id` with `outcome`, unless it has its answer already.
    private func resolve(_ id: UInt64, _ outcome: Outcome) {
        let waiter = state.withLock { state -> CheckedContinuation<Outcome, Never>? in
            switch state.waiters[id] {
            case .registered?:
                state.waiters[id] = .answered(outcome)
                return nil
            case .waiting(let continuation)?:
                state.waiters[id] = nil
                return continuation
            case .answered?, nil:
                return nil
            }
        }
        waiter?.resume(returning: outcome)
    }

    /// The read ended with `outcome`: every probe still waiting has its answer, and the next
    /// probe starts a new read.
    private func finish(_ outcome: Outcome) {
        let waiting = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            state.reading = false
            var waiting: [CheckedContinuation<Outcome, Never>] = []
            for (id, waiter) in state.waiters {
                switch waiter {
                case .registered:
                    state.waiters[id] = .answered(outcome)
                case .waiting(let continuation):
                    state.waiters[id] = nil
                    waiting.append(continuation)
                case .answered:
                    break
                }
            }
            return waiting
        }
        for waiter in waiting { waiter.resume(returning: outcome) }
    }
}
