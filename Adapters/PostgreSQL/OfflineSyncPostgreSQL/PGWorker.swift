import Dispatch
import Foundation
import OfflineSync
import OfflineSyncStoreKit

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

extension CheckoutPool where Resource == PGWorker {
    /// Runs `work` on a borrowed worker, with its live connection.
    func run<T: Sendable>(_ work: @escaping @Sendable (PGConnection, PGWorker) throws -> T) async throws -> T {
        try await withResource { worker in try await worker.run { connection in try work(connection, worker) } }
    }

    /// Fails every waiter with ``SyncError/Code/storeClosed`` and closes every connection.
    func shutDown() async {
        for worker in close() { await worker.close() }
    }
}
