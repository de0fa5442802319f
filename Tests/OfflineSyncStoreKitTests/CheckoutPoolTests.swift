import OfflineSync
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// ``CheckoutPool``'s waits end when their task is cancelled, and no resource is lost to a
/// waiter that left.
@Suite("CheckoutPool: a cancelled waiter leaves the queue", .timeLimit(.minutes(sanitizerSlowdown)))
struct CheckoutPoolTests {
    @Test("a waiter cancelled while it waits throws CancellationError and leaves the queue; the resource goes to the next waiter")
    func cancelledWaiterLeaves() async throws {
        let pool = CheckoutPool(["only"], storeName: "test")
        let held = try await pool.acquire()
        let cancelled = Task { try await pool.acquire() }
        // Waiting: the pool's queue holds it (only polling can see that).
        #expect(await eventually { pool.waiterCount == 1 })
        cancelled.cancel()
        // Before the fix the wait ignored the cancellation: this await never returned.
        let outcome = await cancelled.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(pool.waiterCount == 0, "the cancelled waiter is still queued")

        let next = Task { try await pool.acquire() }
        #expect(await eventually { pool.waiterCount == 1 })
        pool.release(held)
        // Handed to the live waiter, not to the one that left.
        let lent = try await next.value
        #expect(lent == "only")
        #expect(pool.idleCount == 0)
        pool.release(lent)
        #expect(pool.idleCount == 1)
    }

    @Test("a waiter cancelled as a resource is handed to it: the resource is lent or given back, never lost")
    func cancellationRacingRelease() async throws {
        let pool = CheckoutPool([7], storeName: "test")
        for _ in 0..<200 {
            let held = try await pool.acquire()
            let waiter = Task { try await pool.acquire() }
            async let cancelling: Void = waiter.cancel()
            pool.release(held)
            await cancelling
            switch await waiter.result {
            case .success(let resource):
                // The hand-off completed before the cancellation reached the waiter.
                pool.release(resource)
            case .failure(let error):
                #expect(error is CancellationError, "\(error)")
            }
            #expect(pool.idleCount == 1 && pool.waiterCount == 0, "a resource was lost or a waiter stayed queued")
        }
    }

    @Test("an idle resource is lent even to a cancelled task; closing fails the waiters with storeClosed")
    func idleAndClosed() async throws {
        let pool = CheckoutPool([1], storeName: "test")
        let gate = Gate()
        let lending = Task {
            await gate.wait()
            return try await pool.acquire()
        }
        lending.cancel()
        gate.open()
        #expect(try await lending.value == 1)
        let waiter = Task { try await pool.acquire() }
        #expect(await eventually { pool.waiterCount == 1 })
        pool.close()
        let code = await syncErrorCode { _ = try await waiter.value }
        #expect(code == .storeClosed)
    }

    @Test("tryAcquire lends only an idle resource; acquire(within:) gives up after its time, leaving the queue, and takes one returned in time")
    func boundedBorrowing() async throws {
        let pool = CheckoutPool(["only"], storeName: "test")
        let held = try #require(pool.tryAcquire())
        #expect(pool.tryAcquire() == nil)
        // Every resource held (by work that hangs, say): nil after the time, and no waiter left.
        #expect(try await pool.acquire(within: .milliseconds(20)) == nil)
        #expect(pool.waiterCount == 0)
        // One returned while it waits is taken.
        let waiting = Task { try await pool.acquire(within: .seconds(600)) }
        #expect(await eventually { pool.waiterCount == 1 })
        pool.release(held)
        let lent = try await waiting.value
        #expect(lent == "only" && pool.idleCount == 0)
        // Cancelled while it waits: CancellationError, nothing lost.
        let cancelled = Task { try await pool.acquire(within: .seconds(600)) }
        #expect(await eventually { pool.waiterCount == 1 })
        cancelled.cancel()
        let outcome = await cancelled.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        pool.release(try #require(lent))
        #expect(pool.idleCount == 1 && pool.waiterCount == 0)
        pool.close()
        #expect(pool.tryAcquire() == nil)
    }
}
