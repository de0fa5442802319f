import Dispatch
import Foundation
import OfflineSync

/// One connection slot with its own serial dispatch queue: blocking libpq calls run there,
/// never on Swift's cooperative pool. The connection is opened lazily and reopened after it
/// broke.
final class PGWorker: @unchecked Sendable {
    // @unchecked Sendable: `connection` is only read or written on `queue`, which is serial.
    let queue: DispatchQueue
    let queueKey = DispatchSpecificKey<Bool>()
    private var connection: PGConnection?
    private let connect: @Sendable () throws -> PGConnection

    init(label: String, connect: @escaping @Sendable () throws -> PGConnection) {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: queueKey, value: true)
        self.connect = connect
    }

    /// A store dropped without ``PostgreSQLStore/close()`` still hangs up: once the worker is
    /// gone no work can be queued on it, so touching `connection` here is safe.
    deinit { connection?.close() }

    /// Runs `work` on the worker's queue with a live connection (opening one if needed).
    func run<T: Sendable>(_ work: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try work(self.liveConnection()) })
            }
        }
    }

    /// The open connection, reconnecting when the previous one broke. Called on `queue` only.
    func liveConnection() throws -> PGConnection {
        if let connection, connection.isAlive { return connection }
        connection?.close()
        connection = nil
        let fresh = try connect()
        connection = fresh
        return fresh
    }

    /// Closes the connection once queued work has run.
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.connection?.close()
                self.connection = nil
                continuation.resume()
            }
        }
    }
}

/// A bounded set of workers. A transaction borrows an idle one or waits (without blocking a
/// thread) until one is returned.
final class PGPool: @unchecked Sendable {
    // @unchecked Sendable: `idle`, `waiters` and `closed` are only touched while holding
    // `lock`; `workers` is immutable and its elements are Sendable.
    private let lock = NSLock()
    private let workers: [PGWorker]
    private var idle: [PGWorker]
    private var waiters: [CheckedContinuation<PGWorker, any Error>] = []
    private var closed = false

    init(workers: [PGWorker]) {
        self.workers = workers
        self.idle = workers
    }

    /// Runs `work` on a borrowed worker.
    func run<T: Sendable>(_ work: @escaping @Sendable (PGConnection, PGWorker) throws -> T) async throws -> T {
        let worker = try await acquire()
        defer { release(worker) }
        return try await worker.run { connection in try work(connection, worker) }
    }

    private func acquire() async throws -> PGWorker {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<PGWorker, any Error>? = lock.withLock {
                if closed { return .failure(SyncError(.storeClosed, "the PostgreSQL store is closed")) }
                if let worker = idle.popLast() { return .success(worker) }
                waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    private func release(_ worker: PGWorker) {
        let waiter: CheckedContinuation<PGWorker, any Error>? = lock.withLock {
            if !waiters.isEmpty { return waiters.removeFirst() }
            idle.append(worker)
            return nil
        }
        waiter?.resume(returning: worker)
    }

    /// Fails every waiter with ``SyncError/Code/storeClosed`` and closes every connection.
    func close() async {
        let pending: [CheckedContinuation<PGWorker, any Error>] = lock.withLock {
            closed = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in pending { waiter.resume(throwing: SyncError(.storeClosed, "the PostgreSQL store is closed")) }
        for worker in workers { await worker.close() }
    }
}
