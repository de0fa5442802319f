import Synchronization

/// The store read behind `GET /ready`, bounded in time and in number.
///
/// A probe answers by its deadline whatever the store does: the read runs on a task of its
/// own and the probe waits for whichever comes first, the read's answer or the deadline, never
/// for the read itself. A store call blocked in C (a lock held by another process, a database
/// server that stopped answering) cannot be interrupted, so the read is left to finish on
/// its own, and it is not cancelled at the deadline either: it keeps its place in the store's
/// queue. A probe that comes while a read is under way waits on that read (up to its own
/// deadline) rather than start another, so probes against a hung store cost one stuck read
/// however many there are, and the first answer after the store recovers reaches every probe
/// waiting.
///
/// One exception keeps a read stuck for good (on a connection that died without a word) from
/// holding `/ready` at 503 after the store recovered: once the newest read under way has run
/// ``staleAfter`` times its deadline, a probe starts another beside it, up to
/// ``maximumReads`` under way at once. Beyond that, probes wait on the newest.
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
        /// The reads under way: when each began, by number.
        var reads: [UInt64: ContinuousClock.Instant] = [:]
        var nextRead: UInt64 = 0
        /// The probes waiting, by number, each with the read it waits on.
        var waiters: [UInt64: (read: UInt64, waiter: Waiter)] = [:]
        var nextWaiter: UInt64 = 0
        /// How many reads were started, ever.
        var readsStarted = 0
    }

    /// How many deadlines the newest read may run before a probe starts another beside it.
    static let staleAfter = 5
    /// The most reads under way at once.
    static let maximumReads = 2

    private let state = Mutex(State())

    /// How many store reads the probes started (tests check that probes against a hung store
    /// do not pile reads up).
    var readsStarted: Int { state.withLock { $0.readsStarted } }

    /// Whether the store answers `read` within `deadline`: starts `read` unless one is under
    /// way (and younger than ``staleAfter`` deadlines, or ``maximumReads`` are), and returns by
    /// the deadline, or at once when the calling task is cancelled (``Outcome/noAnswer``),
    /// even if the read never returns. `now` is when the probe came (tests move it on).
    func check(within deadline: Duration, now: ContinuousClock.Instant = .now,
               read: @escaping @Sendable () async throws -> Void) async -> Outcome {
        let (id, readId, start) = state.withLock { state -> (UInt64, UInt64, Bool) in
            let id = state.nextWaiter
            state.nextWaiter &+= 1
            let newest = state.reads.max { $0.value < $1.value }
            let readId: UInt64, start: Bool
            if let newest, now - newest.value < deadline * Self.staleAfter || state.reads.count >= Self.maximumReads {
                (readId, start) = (newest.key, false)
            } else {
                readId = state.nextRead
                state.nextRead &+= 1
                state.reads[readId] = now
                state.readsStarted += 1
                start = true
            }
            state.waiters[id] = (readId, Waiter.registered)
            return (id, readId, start)
        }
        if start {
            // Unstructured on purpose: it outlives a probe whose deadline passed, and the
            // next probe waits on it. Nothing awaits it; it ends when the store answers.
            Task {
                let outcome: Outcome = (try? await read()) != nil ? .answered : .failed
                self.finish(readId, outcome)
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
                    if case .answered(let outcome)? = state.waiters[id]?.waiter {
                        state.waiters[id] = nil
                        return outcome
                    }
                    state.waiters[id] = (readId, Waiter.waiting(continuation))
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
            guard let entry = state.waiters[id] else { return nil }
            switch entry.waiter {
            case .registered:
                state.waiters[id] = (entry.read, Waiter.answered(outcome))
                return nil
            case .waiting(let continuation):
                state.waiters[id] = nil
                return continuation
            case .answered:
                return nil
            }
        }
        waiter?.resume(returning: outcome)
    }

    /// Read `readId` ended with `outcome`: every probe still waiting on it has its answer (and
    /// every probe waiting on any read, when the store answered: it is ready), and the next
    /// probe starts a new read unless another is under way.
    private func finish(_ readId: UInt64, _ outcome: Outcome) {
        let waiting = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            state.reads[readId] = nil
            var waiting: [CheckedContinuation<Outcome, Never>] = []
            for (id, entry) in state.waiters where entry.read == readId || outcome == .answered {
                switch entry.waiter {
                case .registered:
                    state.waiters[id] = (entry.read, Waiter.answered(outcome))
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
