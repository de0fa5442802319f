import Foundation
import Synchronization
import OfflineSync

// Cases of the `concurrency` group for stores that are ``CommitOrderedStore``s (skipped for
// others): the ranges, the horizon and the stamp horizon, and no lost update among writers
// that run at the same time.

/// A one-shot signal a store's thread waits on (it blocks that thread, never Swift's pool) and
/// a case raises from async code.
private final class Latch: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func open() { semaphore.signal() }
    /// Waits at most 60 s (a case that failed before opening it must not hang the store).
    func wait() { _ = semaphore.wait(timeout: .now() + 60) }
}

/// A value one task sets and another awaits. The first value set is the value; a wait ends
/// with `nil` after 120 s without one, so a case whose writer never got to set it fails
/// instead of hanging the suite.
private final class Rendezvous<T: Sendable>: Sendable {
    private let state = Mutex<(value: T?, waiters: [CheckedContinuation<T?, Never>])>((nil, []))
    func set(_ value: T) {
        let (waiters, first) = state.withLock { state in
            state.value = state.value ?? value
            defer { state.waiters = [] }
            return (state.waiters, state.value!)
        }
        for waiter in waiters { waiter.resume(returning: first) }
    }
    func value() async -> T? {
        let timer = Task { [weak self] in
            // Cancelled once the wait ended: nothing to end then.
            guard (try? await Task.sleep(for: .seconds(120))) != nil else { return }
            self?.expire()
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> T?? in
                if let value = state.value { return .some(value) }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
    /// Ends every wait under way with `nil`.
    private func expire() {
        let waiters = state.withLock { state in
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }
}

extension LocalStoreConformance {
    /// The store as a ``CommitOrderedStore``, or a skip.
    private static func ordered(_ store: any LocalStore) throws -> any CommitOrderedStore {
        guard let ordered = store as? any CommitOrderedStore else {
            throw ConformanceSkip("the store is not a CommitOrderedStore")
        }
        return ordered
    }

    static let commitOrderCases: [ConformanceCase] = [
        ConformanceCase("commitOrderHorizonHoldsBackWhatMayCommitBelow") { ctx in
            // A writer that began first is held open after its write; one that began later
            // commits. A read's horizon stays at or below the open writer's numbers (and its
            // stamp at or below the open writer's clock), though the later one's row is in the
            // snapshot; once both ended the horizon passes both.
            let store = try ordered(try await ctx.open())
            try await must(await store.defineTable(TableSchema("changes", fields: [FieldDefinition("n", .int)])), "defining changes")
            let held = Latch()
            let first = Rendezvous<ChangeOrder?>()
            let earlier = Task {
                do {
                    return try await store.concurrentWrite { txn, order in
                        try txn.upsert(Record(id: "early", fields: ["n": .int(order.first)]), in: "changes")
                        first.set(order)
                        held.wait()
                        return order
                    }
                } catch {
                    first.set(nil)
                    throw error
                }
            }
            guard let arrival = await first.value() else {
                held.open()
                throw failure("the earlier writer neither wrote nor failed within 120 s")
            }
            guard let early = arrival else {
                _ = try await must(await earlier.value, "the earlier writer")
                throw failure("the earlier writer ended before it wrote")
            }
            let late: ChangeOrder
            do {
                late = try await must(await store.concurrentWrite { txn, order in
                    try txn.upsert(Record(id: "late", fields: ["n": .int(order.first)]), in: "changes")
                    return order
                }, "committing the later writer while the earlier one is open")
                let (horizon, sawLate, sawEarly) = try await must(await store.orderedRead(stamps: true) { txn, horizon in
                    (horizon, try txn.record(in: "changes", id: "late") != nil, try txn.record(in: "changes", id: "early") != nil)
                }, "reading while the earlier writer is open")
                try expect(sawLate, "the committed later writer's row is in the snapshot")
                try expect(!sawEarly, "the open writer's row is not in the snapshot")
                try expect(horizon.final <= early.first,
                           "the horizon (\(horizon.final)) is at most the open writer's first number (\(early.first))")
                guard let stamp = horizon.stamp else { throw failure("a read that asked for stamps has no stamp horizon") }
                try expect(stamp <= early.clock, "the stamp horizon (\(stamp)) is at most the open writer's clock (\(early.clock))")
                try expect(early.first + early.count <= late.first || late.first + late.count <= early.first,
                           "the two writers' ranges overlap: \(early.first)+\(early.count) and \(late.first)+\(late.count)")
            } catch {
                held.open()
                _ = try? await earlier.value
                throw error
            }
            held.open()
            _ = try await must(await earlier.value, "committing the earlier writer")
            // Other work on the same server (other stores' writers) may hold the horizon back
            // for a while; it passes both once they end.
            let deadline = ContinuousClock.now + .seconds(60)
            while true {
                let final = try await must(await store.orderedRead(stamps: false) { _, horizon in horizon.final }, "reading the horizon")
                if final > max(early.first, late.first) { break }
                guard ContinuousClock.now < deadline else {
                    throw failure("the horizon (\(final)) stayed at or below a committed writer's number (\(max(early.first, late.first))) for 60 s")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        },
        ConformanceCase("commitOrderRangesNeverOverlapAndFollowCommits") { ctx in
            // 40 writers at once, then one more: no two ranges overlap, each holds at least
            // 1,024 numbers above zero, and one that began after the others committed lies
            // above all of them.
            let store = try ordered(try await ctx.open())
            try await must(await store.defineTable(TableSchema("slots", fields: [FieldDefinition("n", .int)])), "defining slots")
            let orders = try await withThrowingTaskGroup(of: ChangeOrder.self) { group -> [ChangeOrder] in
                for writer in 0..<40 {
                    group.addTask {
                        try await must(await store.concurrentWrite { txn, order in
                            try txn.upsert(Record(id: "w\(writer)", fields: ["n": .int(order.first)]), in: "slots")
                            return order
                        }, "writer \(writer)")
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let sorted = orders.sorted { $0.first < $1.first }
            for order in sorted {
                try expect(order.first > 0 && order.count >= 1024, "a range of \(order.count) numbers from \(order.first)")
            }
            for (lower, upper) in zip(sorted, sorted.dropFirst()) {
                try expect(lower.first + lower.count <= upper.first,
                           "ranges overlap: \(lower.first)+\(lower.count) and \(upper.first)")
            }
            let after = try await must(await store.concurrentWrite { _, order in order }, "a writer after the others")
            try expect(after.first >= sorted.last!.first + sorted.last!.count,
                       "a writer that began after the others committed (\(after.first)) lies above them (\(sorted.last!.first))")
        },
        ConformanceCase("commitOrderHeldRowChangedSinceTheSnapshotRunsTheWriterAgain") { ctx in
            // A concurrent writer's transaction holds rows (HoldingWriteTransaction). One that
            // began before another changed a row and holds the row after that change committed
            // does not go on deciding from the row as its snapshot has it: it runs again, and
            // then holds the row as changed.
            let store = try ordered(try await ctx.open())
            guard store.holdsRows else { throw ConformanceSkip("the store's concurrent writes do not hold rows (holdsRows)") }
            try await must(await store.defineTable(TableSchema("held", fields: [FieldDefinition("n", .int)])), "defining held")
            try await must(await store.concurrentWrite { txn, _ in try txn.upsert(Record(id: "r", fields: ["n": 0]), in: "held") },
                           "writing the row")
            let runs = Mutex(0)
            let began = Rendezvous<Bool>()
            let proceed = Latch()
            let holder = Task {
                do {
                    return try await store.concurrentWrite { txn, _ -> Int64? in
                        let run = runs.withLock { runs in
                            runs += 1
                            return runs
                        }
                        guard let holding = txn as? any HoldingWriteTransaction else {
                            throw failure("a concurrent write's transaction is not a HoldingWriteTransaction")
                        }
                        if run == 1 {
                            began.set(true)
                            proceed.wait()
                        }
                        return try holding.heldRecord(in: "held", id: "r")?["n"].intValue
                    }
                } catch {
                    // Failed before its body began (or in it): the case stops waiting for it.
                    began.set(false)
                    throw error
                }
            }
            guard let started = await began.value() else {
                proceed.open()
                throw failure("the holding writer neither began nor failed within 120 s")
            }
            guard started else {
                _ = try await must(await holder.value, "the holding writer")
                throw failure("the holding writer failed before it began")
            }
            do {
                try await must(await store.concurrentWrite { txn, _ in try txn.upsert(Record(id: "r", fields: ["n": 1]), in: "held") },
                               "changing the row while the other writer is open and has not held it yet")
            } catch {
                proceed.open()
                _ = try? await holder.value
                throw error
            }
            proceed.open()
            let seen = try await must(await holder.value, "the holding writer")
            try expect(seen == 1, "the writer held the row as its snapshot had it (n = \(seen.map(String.init) ?? "none")), not as changed")
            let total = runs.withLock { $0 }
            try expect(total == 2, "the holding writer ran \(total) times, not twice")
        },
        ConformanceCase("commitOrderWritersLoseNoUpdate") { ctx in
            // 8 tasks × 25 concurrent writers, each reading a counter and writing it plus one:
            // the store settles every conflict, so no increment is lost and each saw a distinct
            // value.
            let store = try ordered(try await ctx.open())
            try await checkCounterIncrements(store) { body in try await store.concurrentWrite { tx, _ in try body(tx) } }
        },
    ]
}
