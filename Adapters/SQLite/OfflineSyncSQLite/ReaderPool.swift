import Foundation
import OfflineSync

/// A fixed set of read-only connections, each on its own serial queue. A read borrows an idle
/// one, or waits (without blocking a thread) until one is returned.
final class ReaderPool: @unchecked Sendable {
    // @unchecked Sendable: `idle`, `waiters` and `closed` are only read or written while
    // holding `lock`; `workers` is immutable and its elements are Sendable.
    private let lock = NSLock()
    private let workers: [ConnectionWorker]
    private var idle: [ConnectionWorker]
    private var waiters: [CheckedContinuation<ConnectionWorker, any Error>] = []
    private var closed = false

    init(workers: [ConnectionWorker]) {
        self.workers = workers
        self.idle = workers
    }

    /// Borrows a reader; throws ``SyncError/Code/storeClosed`` once the pool is closed.
    func acquire() async throws -> ConnectionWorker {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<ConnectionWorker, any Error>? = lock.withLock {
                if closed { return .failure(SyncError(.storeClosed, "the SQLite store is closed")) }
                if let worker = idle.popLast() { return .success(worker) }
                waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Returns a borrowed reader, handing it to the longest waiter if there is one.
    func release(_ worker: ConnectionWorker) {
        let waiter: CheckedContinuation<ConnectionWorker, any Error>? = lock.withLock {
            if !waiters.isEmpty { return waiters.removeFirst() }
            idle.append(worker)
            return nil
        }
        waiter?.resume(returning: worker)
    }

    /// Fails every waiter with ``SyncError/Code/storeClosed`` and closes every reader once the
    /// work already queued on it has run.
    func close() async {
        let pending: [CheckedContinuation<ConnectionWorker, any Error>] = lock.withLock {
            closed = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in pending { waiter.resume(throwing: SyncError(.storeClosed, "the SQLite store is closed")) }
        for worker in workers { await worker.close(checkpoint: false) }
    }
}
