import Synchronization

/// Runs async work one piece at a time, in arrival order (a FIFO async lock).
///
/// Waiters are resumed in the order they arrived, so a push queued behind a pull runs next
/// even if other work arrives meanwhile. A body that throws still releases the gate. A waiter
/// whose task is cancelled leaves the line at once with `CancellationError`, without ever
/// holding the gate.
package final class SerialGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextId: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Creates an open gate.
    package init() {}

    /// Waits for the gate, runs `body`, then lets the next waiter in; rethrows what `body`
    /// throws, or `CancellationError` if the task is cancelled while it waits.
    package func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextId += 1
            return state.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Under the lock, so a cancellation either finds this waiter in line or is
                // seen here first (the task's flag is set before its handler runs).
                let enter = state.withLock { state -> Bool? in
                    if Task.isCancelled { return nil }
                    if state.busy {
                        state.waiters.append((id, continuation))
                        return false
                    }
                    state.busy = true
                    return true
                }
                switch enter {
                case true?: continuation.resume()
                case nil: continuation.resume(throwing: CancellationError())
                case false?: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.waiters.isEmpty {
                state.busy = false
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}

extension Task where Failure == any Error {
    /// The task's value, cancelling the task when the task awaiting it is cancelled
    /// (`Task.value` alone ignores the caller's cancellation, so a cancelled push would
    /// otherwise wait for a remote call that nobody needs any more).
    package func valueCancellingWithCaller() async throws -> Success {
        try await withTaskCancellationHandler { try await value } onCancel: { cancel() }
    }
}
