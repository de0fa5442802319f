import Synchronization

/// Runs async work one piece at a time, in arrival order (a FIFO async lock).
///
/// Waiters are resumed in the order they arrived, so a push queued behind a pull runs next
/// even if other work arrives meanwhile. A body that throws still releases the gate.
package final class SerialGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Creates an open gate.
    package init() {}

    /// Waits for the gate, runs `body`, then lets the next waiter in; rethrows what `body` throws.
    package func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let enter = state.withLock { state -> Bool in
                if state.busy {
                    state.waiters.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if enter { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.busy = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
