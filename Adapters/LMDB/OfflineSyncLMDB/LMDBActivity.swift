import Dispatch
import Foundation
import OfflineSync

/// Runs blocking `work` on `queue` and resumes the caller when it is done, so LMDB calls never
/// run on Swift's cooperative pool.
func perform<T: Sendable>(on queue: DispatchQueue, _ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        queue.async { continuation.resume(with: Result { try work() }) }
    }
}

/// Counts the operations in flight, so closing waits for them and later ones are refused.
final class LMDBActivity: @unchecked Sendable {
    // @unchecked Sendable: `count` and `closed` are only touched while holding `condition`.
    // An NSCondition rather than a Mutex, because closing blocks its thread until the count
    // reaches zero, which needs a condition variable.
    private let condition = NSCondition()
    private var count = 0
    private var closed = false

    /// Counts an operation in; throws ``SyncError/Code/storeClosed`` once closing began.
    func enter() throws {
        try condition.withLock {
            if closed { throw SyncError(.storeClosed, "the LMDB store is closed") }
            count += 1
        }
    }

    /// Counts an operation out.
    func leave() {
        condition.withLock {
            count -= 1
            if count == 0 { condition.broadcast() }
        }
    }

    /// Refuses new operations; returns whether this call did it (the store was open).
    func beginClosing() -> Bool {
        condition.withLock {
            defer { closed = true }
            return !closed
        }
    }

    /// Blocks until no operation is in flight (call on a thread of your own).
    func waitUntilIdle() {
        condition.lock()
        while count > 0 { condition.wait() }
        condition.unlock()
    }
}
