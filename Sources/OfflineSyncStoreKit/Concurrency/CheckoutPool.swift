import OfflineSync
import Synchronization

/// A fixed set of resources lent one at a time: connections, reader queues, worker threads.
///
/// A borrower gets an idle resource at once or waits — suspended, never blocking a thread —
/// until one is returned; waiters are served in arrival order. Closing the pool refuses later
/// borrowers and fails every waiting one with `SyncError/Code/storeClosed`; resources on
/// loan stay with their borrowers, who return them as usual. The SQLite, LMDB and PostgreSQL
/// adapters bound their readers and connections with it.
public final class CheckoutPool<Resource: Sendable>: Sendable {
    private struct State {
        var idle: [Resource]
        var waiters: [CheckedContinuation<Resource, any Error>] = []
        var closed = false
    }

    /// Every resource of the pool, idle or on loan, in the order given.
    public let resources: [Resource]
    private let state: Mutex<State>
    private let storeName: String

    /// A pool of `resources`; `storeName` names the store in the error of a closed pool
    /// ("the SQLite store is closed").
    public init(_ resources: [Resource], storeName: String) {
        self.resources = resources
        self.state = Mutex(State(idle: resources))
        self.storeName = storeName
    }

    /// Borrows an idle resource, waiting for one if none is. Throws
    /// `SyncError/Code/storeClosed` once the pool is closed.
    public func acquire() async throws -> Resource {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<Resource, any Error>? in
                if state.closed { return .failure(SyncError(.storeClosed, "the \(storeName) store is closed")) }
                if let resource = state.idle.popLast() { return .success(resource) }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Returns a borrowed resource, handing it to the longest waiter if there is one.
    public func release(_ resource: Resource) {
        let waiter = state.withLock { state -> CheckedContinuation<Resource, any Error>? in
            if !state.waiters.isEmpty { return state.waiters.removeFirst() }
            state.idle.append(resource)
            return nil
        }
        waiter?.resume(returning: resource)
    }

    /// Runs `body` with a borrowed resource and returns it afterwards, whether `body` returns
    /// or throws.
    public func withResource<T: Sendable>(_ body: (Resource) async throws -> T) async throws -> T {
        let resource = try await acquire()
        defer { release(resource) }
        return try await body(resource)
    }

    /// Refuses later borrowers and fails the waiting ones with `SyncError/Code/storeClosed`.
    /// Returns ``resources`` for the caller to shut down.
    @discardableResult
    public func close() -> [Resource] {
        let pending = state.withLock { state -> [CheckedContinuation<Resource, any Error>] in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in pending { waiter.resume(throwing: SyncError(.storeClosed, "the \(storeName) store is closed")) }
        return resources
    }
}
