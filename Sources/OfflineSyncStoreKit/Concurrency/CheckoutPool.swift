import OfflineSync
import Synchronization

/// A fixed set of resources lent one at a time: connections, reader queues, worker threads.
///
/// A borrower gets an idle resource at once or waits — suspended, never blocking a thread —
/// until one is returned; waiters are served in arrival order. A waiter whose task is
/// cancelled leaves the queue and throws `CancellationError`, so a caller with a deadline
/// (a readiness probe, a request whose client went away) is not held by a pool that stays
/// busy. Closing the pool refuses later borrowers and fails every waiting one with
/// `SyncError/Code/storeClosed`; resources on loan stay with their borrowers, who return them
/// as usual. The SQLite, LMDB and PostgreSQL adapters bound their readers and connections
/// with it.
public final class CheckoutPool<Resource: Sendable>: Sendable {
    /// How a borrower got its resource: an idle one at once, or handed over by
    /// ``release(_:)`` after it waited (then a cancellation that came meanwhile still counts).
    private enum Loan: Sendable {
        case idle(Resource)
        case handedOver(Resource)
    }

    private struct State {
        var idle: [Resource]
        /// The borrowers waiting, in arrival order, each by its ticket (so a cancelled one
        /// can be found and taken out).
        var waiters: [(ticket: UInt64, continuation: CheckedContinuation<Loan, any Error>)] = []
        var nextTicket: UInt64 = 0
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
    /// `SyncError/Code/storeClosed` once the pool is closed, and `CancellationError` when the
    /// calling task is cancelled before a resource is free: the waiter leaves the queue, and a
    /// resource handed to it as it was cancelled goes back to the pool (to the next waiter).
    /// An idle resource is lent even to a cancelled task: it has nothing to wait for.
    public func acquire() async throws -> Resource {
        let ticket = state.withLock { state -> UInt64 in
            defer { state.nextTicket &+= 1 }
            return state.nextTicket
        }
        let loan = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Loan, any Error>) in
                let ready = state.withLock { state -> Result<Loan, any Error>? in
                    if state.closed { return .failure(closedError) }
                    if let resource = state.idle.popLast() { return .success(.idle(resource)) }
                    // Cancelled before the handler below could find this waiter in the queue.
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters.append((ticket: ticket, continuation: continuation))
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Loan, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.ticket == ticket }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
        switch loan {
        case .idle(let resource):
            return resource
        case .handedOver(let resource):
            // ``release(_:)`` took this waiter out of the queue just as its task was cancelled:
            // the handler found nothing to resume, so the resource came here. It goes back.
            guard !Task.isCancelled else {
                release(resource)
                throw CancellationError()
            }
            return resource
        }
    }

    /// Borrows an idle resource if there is one, without waiting: `nil` when every resource
    /// is on loan or the pool is closed. Waiting borrowers are not passed: a resource is idle
    /// only while nobody waits.
    package func tryAcquire() -> Resource? {
        state.withLock { state in state.closed ? nil : state.idle.popLast() }
    }

    /// Borrows a resource if one is idle now or returned within `timeout`; `nil` after that
    /// (the waiter leaves the queue, and a resource handed to it meanwhile goes back). For a
    /// borrower that has somewhere else to go when every resource is held by work that may
    /// hang (a replica whose connections all wait on a host that went away). Throws what
    /// ``acquire()`` throws.
    package func acquire(within timeout: Duration) async throws -> Resource? {
        if let resource = tryAcquire() { return resource }
        return try await withThrowingTaskGroup(of: Resource?.self) { group in
            group.addTask { try await self.acquire() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            var outcome: Result<Resource?, any Error>
            do {
                outcome = .success(try await group.next() ?? nil)
            } catch {
                outcome = .failure(error)
            }
            group.cancelAll()
            // The other child: a cancelled sleep, a cancelled waiter, or a resource it got
            // before it saw the cancellation, which goes back unless nothing else was got.
            while let other = try? await group.next() {
                guard let resource = other else { continue }
                if case .success(nil) = outcome, !Task.isCancelled {
                    outcome = .success(resource)
                } else {
                    release(resource)
                }
            }
            // Timed out as the caller was cancelled: the cancellation, not "none free".
            if case .success(nil) = outcome, Task.isCancelled { throw CancellationError() }
            return try outcome.get()
        }
    }

    /// Returns a borrowed resource, handing it to the longest waiter if there is one.
    public func release(_ resource: Resource) {
        let waiter = state.withLock { state -> CheckedContinuation<Loan, any Error>? in
            if !state.waiters.isEmpty { return state.waiters.removeFirst().continuation }
            state.idle.append(resource)
            return nil
        }
        waiter?.resume(returning: .handedOver(resource))
    }

    /// Runs `body` with a borrowed resource and returns it afterwards, whether `body` returns
    /// or throws. Throws what ``acquire()`` throws, and what `body` throws.
    public func withResource<T: Sendable>(_ body: (Resource) async throws -> T) async throws -> T {
        let resource = try await acquire()
        defer { release(resource) }
        return try await body(resource)
    }

    /// Refuses later borrowers and fails the waiting ones with `SyncError/Code/storeClosed`.
    /// Returns ``resources`` for the caller to shut down.
    @discardableResult
    public func close() -> [Resource] {
        let pending = state.withLock { state -> [CheckedContinuation<Loan, any Error>] in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters.map(\.continuation)
        }
        for waiter in pending { waiter.resume(throwing: closedError) }
        return resources
    }

    /// How many resources are idle now (for tests: a cancelled waiter must not keep one).
    package var idleCount: Int { state.withLock { $0.idle.count } }

    /// How many borrowers are waiting now (for tests: a cancelled waiter must leave the queue).
    package var waiterCount: Int { state.withLock { $0.waiters.count } }

    private var closedError: SyncError { SyncError(.storeClosed, "the \(storeName) store is closed") }
}
