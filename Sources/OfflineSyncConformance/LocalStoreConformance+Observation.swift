import OfflineSync

// Observations (`StoreObserver.observe`) run over any store through the core; these cases
// check that a store's reads and commits give them the contract's behaviour. None of them
// sleeps: "nothing was emitted" is shown by the next value being the one a later, relevant
// commit produced (an emission in between would have been that earlier value).
extension LocalStoreConformance {
    static let observedTable = TableSchema("observed", fields: [
        FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string),
    ])
    static let otherTable = TableSchema("unobserved", fields: [FieldDefinition("n", .int)])

    static func row(_ id: String, _ n: Int64) -> Record { Record(id: id, fields: ["n": .int(n), "s": .string("row \(id)")]) }

    /// A store with both tables and rows a (n 1), b (n 2), c (n 3).
    static func observedStore(_ ctx: CaseContext) async throws -> (any LocalStore, StoreObserver) {
        let store = try await ctx.open()
        try await must(await store.defineTable(observedTable), "defining the observed table")
        try await must(await store.defineTable(otherTable), "defining the other table")
        let observer = StoreObserver(store: store)
        try await observer.write { txn in
            for (id, n) in [("a", 1), ("b", 2), ("c", 3)] { try txn.upsert(row(id, Int64(n)), in: observedTable.name) }
        }
        return (store, observer)
    }

    static func ids(_ records: [Record]?) -> [String] { records?.map(\.id) ?? ["<ended>"] }

    static let observationCases: [ConformanceCase] = [
        ConformanceCase("firstValueThenChanges") { ctx in
            let (_, observer) = try await observedStore(ctx)
            var values = observer.observe(observedTable.name, Query(Field("n") >= 2, order: [SortKey("n")])).makeAsyncIterator()
            try expectEqual(ids(try await values.next()), ["b", "c"], "the first value")
            try await observer.write { try $0.upsert(row("d", 4), in: observedTable.name) }
            try expectEqual(ids(try await values.next()), ["b", "c", "d"], "the value after an insert")
            try await observer.write { _ = try $0.delete(id: "b", in: observedTable.name) }
            try expectEqual(ids(try await values.next()), ["c", "d"], "the value after a delete")
        },
        ConformanceCase("noValueForUnrelatedOrNeutralCommits") { ctx in
            let (_, observer) = try await observedStore(ctx)
            var values = observer.observe(observedTable.name, Query(Field("n") > 10)).makeAsyncIterator()
            try expectEqual(ids(try await values.next()), [], "the first value")
            try await observer.write { try $0.upsert(Record(id: "x", fields: ["n": 50]), in: otherTable.name) }
            try await observer.write { try $0.upsert(row("a", 5), in: observedTable.name) }
            try await observer.write { try $0.upsert(row("z", 0), in: observedTable.name) }
            // The observation is due to look again (two commits touched its table); it must
            // find the result unchanged and keep waiting, so what the waiting task gets is
            // the value of the next relevant commit. (Had it shown the unchanged result, the
            // task would hold it; if the commit below lands before the task looks, the task
            // gets the right value either way, so the case cannot fail wrongly.)
            let waiting = Task { [values] in
                var values = values
                return try await values.next()
            }
            for _ in 0..<100 { await Task.yield() }
            try await observer.write { try $0.upsert(row("m", 11), in: observedTable.name) }
            try expectEqual(ids(try await waiting.value), ["m"], "the next value (earlier commits left the result unchanged)")

            var one = observer.observe(observedTable.name, id: "c").makeAsyncIterator()
            try expect(try await one.next()??.id == "c", "observe(id:) starts with the record")
            try await observer.write { try $0.upsert(row("a", 6), in: observedTable.name) }
            try await observer.write { try $0.upsert(row("c", 30), in: observedTable.name) }
            let changed = try await one.next()
            try expect(changed??["n"] == .int(30), "observe(id:) shows the record's next version, not a commit to another row")
            try await observer.write { _ = try $0.delete(id: "c", in: observedTable.name) }
            let deleted = try await one.next()
            try expect(deleted != nil && deleted! == nil, "observe(id:) shows nil after the delete")
        },
        ConformanceCase("burstsCoalesce") { ctx in
            let (_, observer) = try await observedStore(ctx)
            var values = observer.observe(observedTable.name, Query(Field("n") >= 100)).makeAsyncIterator()
            try expectEqual(ids(try await values.next()), [], "the first value")
            for i in 0..<200 { try await observer.write { try $0.upsert(row("burst\(i)", Int64(100 + i)), in: observedTable.name) } }
            // The consumer read nothing during the 200 commits: its next value is already the last state.
            let next = try await values.next()
            try expectEqual(next?.count ?? -1, 200, "the one value after a burst of 200 commits")
        },
        ConformanceCase("rollbackShowsNothing") { ctx in
            let (_, observer) = try await observedStore(ctx)
            var values = observer.observe(observedTable.name, Query(order: [SortKey("n")])).makeAsyncIterator()
            try expectEqual(ids(try await values.next()), ["a", "b", "c"], "the first value")
            struct Abort: Error {}
            do {
                try await observer.write { txn in
                    try txn.upsert(row("rolled-back", 0), in: observedTable.name)
                    throw Abort()
                }
                throw failure("a write whose closure threw returned")
            } catch is Abort {}
            try await observer.write { try $0.upsert(row("kept", 9), in: observedTable.name) }
            try expectEqual(ids(try await values.next()), ["a", "b", "c", "kept"], "the next value (the rolled-back row never shows)")
        },
        ConformanceCase("cancellationEndsTheObservation") { ctx in
            let (_, observer) = try await observedStore(ctx)
            let (firstSeen, seen) = AsyncStream.makeStream(of: Int.self)
            let observing = Task {
                var count = 0
                for try await value in observer.observe(observedTable.name) {
                    count += 1
                    seen.yield(value.count)
                }
                return count
            }
            var firstSeenIterator = firstSeen.makeAsyncIterator()
            try expectEqual(await firstSeenIterator.next(), 3, "the observing task's first value")
            try expectEqual(observer.observationCount, 1, "live observations while the task iterates")
            observing.cancel()
            let delivered = try await observing.value
            try expectEqual(delivered, 1, "values delivered before the cancellation ended the loop")
            try expectEqual(observer.observationCount, 0, "live observations after the task ended")
            try await observer.write { try $0.upsert(row("after", 1), in: observedTable.name) }
        },
        // A token that moved with the store's own commits would make every observation read
        // again after each of them (and a store that cannot tell answers nil, which is fine).
        ConformanceCase("externalChangeTokenIgnoresOwnCommits") { ctx in
            let (store, observer) = try await observedStore(ctx)
            guard let before = try await store.externalChangeToken() else { return }
            try await observer.write { try $0.upsert(row("own", 7), in: observedTable.name) }
            try await store.write { _ = try $0.delete(id: "a", in: observedTable.name) }
            try await store.defineTable(TableSchema("defined-later"))
            struct Abort: Error {}
            _ = try? await store.write { txn in
                try txn.upsert(row("rolled-back", 0), in: observedTable.name)
                throw Abort()
            }
            try expectEqual(try await store.externalChangeToken(), before, "the token after the store's own commits")
        },
    ]
}
