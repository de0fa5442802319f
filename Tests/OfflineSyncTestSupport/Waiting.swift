import Dispatch

/// Checks `condition` every 10 ms until it holds or `timeout` passes; returns whether it
/// held. For conditions that only polling can observe (another process, a database, what a
/// recorder actor has collected so far); where the code under test can signal, wait on the
/// signal instead. It runs on the caller's actor, so `condition` may read that actor's state.
package func eventually(timeout: Duration = .seconds(5), isolation: isolated (any Actor)? = #isolation,
                        _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

/// Runs `body`, which blocks its thread (a pipe read, a socket read, a child's exit), on a
/// Dispatch thread and awaits its result. Swift's cooperative pool has one thread per core
/// (two on CI), and the whole test process shares it: a blocking call made straight from a
/// test holds one of them, and two at once stall every other test — including in-process
/// servers whose handlers the blocked call is waiting for.
package func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}
