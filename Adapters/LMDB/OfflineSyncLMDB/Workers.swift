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

/// A fixed set of serial reader queues. A read borrows an idle one, or waits (without blocking
/// a thread) until one is returned; so at most that many read transactions hold reader slots.
final class ReaderQueues: @unchecked Sendable {
    // @unchecked Sendable: `idle`, `waiters` and `closed` are only touched while holding
    // `lock`; the queues are Sendable.
    private let lock = NSLock()
    private var idle: [DispatchQueue]
    private var waiters: [CheckedContinuation<DispatchQueue, any Error>] = []
    private var closed = false

    init(count: Int) {
        idle = (0..<max(1, count)).map { DispatchQueue(label: "OfflineSyncLMDB.reader\($0)") }
    }

    /// Borrows a queue; throws ``SyncError/Code/storeClosed`` once closed.
    func acquire() async throws -> DispatchQueue {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<DispatchQueue, any Error>? = lock.withLock {
                if closed { return .failure(SyncError(.storeClosed, "the LMDB store is closed")) }
                if let queue = idle.popLast() { return .success(queue) }
                waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Returns a queue, handing it to the longest waiter if there is one.
    func release(_ queue: DispatchQueue) {
        let waiter: CheckedContinuation<DispatchQueue, any Error>? = lock.withLock {
            if !waiters.isEmpty { return waiters.removeFirst() }
            idle.append(queue)
            return nil
        }
        waiter?.resume(returning: queue)
    }

    /// Fails every waiter with ``SyncError/Code/storeClosed``.
    func close() {
        let pending: [CheckedContinuation<DispatchQueue, any Error>] = lock.withLock {
            closed = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in pending { waiter.resume(throwing: SyncError(.storeClosed, "the LMDB store is closed")) }
    }
}

/// Counts the operations in flight, so closing waits for them and later ones are refused.
final class Activity: @unchecked Sendable {
    // @unchecked Sendable: `count` and `closed` are only touched while holding `condition`.
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
