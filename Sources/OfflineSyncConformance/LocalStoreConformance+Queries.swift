import OfflineSync
import OfflineSyncStoreKit

extension LocalStoreConformance {
    static let querySeed: UInt64 = 0x0FF1_14E5_9C00_0001

    static let queryCases: [ConformanceCase] = [
        ConformanceCase("handWrittenQueries") { ctx in
            let store = try await ctx.open()
            let records = QueryFixtures.records(seed: querySeed, count: 300)
            try await Differential.load(store, records)
            try await Differential.check(store, table: QueryFixtures.table, records: records,
                                         queries: QueryFixtures.handWritten(existingId: records[17].id), label: "hand-written query")
        },
        ConformanceCase("randomQueries") { ctx in
            let store = try await ctx.open()
            let records = QueryFixtures.records(seed: querySeed, count: 300)
            try await Differential.load(store, records)
            let queries = QueryFixtures.randomQueries(seed: querySeed &+ 1, count: 200, ids: records.map(\.id))
            try await Differential.check(store, table: QueryFixtures.table, records: records, queries: queries, label: "random query")
        },
        ConformanceCase("computedValues") { ctx in
            // Filters that compute values (OData's tolower, length, year, add, round…): the
            // store answers exactly as the evaluator, in SQL or in Swift.
            let store = try await ctx.open()
            let records = QueryFixtures.records(seed: querySeed, count: 300)
            try await Differential.load(store, records)
            let queries = QueryFixtures.randomExpressionQueries(seed: querySeed &+ 3, count: 250)
            try await Differential.check(store, table: QueryFixtures.table, records: records, queries: queries, label: "computed-value query")
        },
        ConformanceCase("queriesAfterChanges") { ctx in
            // Replacing, deleting and adding records keeps query results (and any index) exact.
            var store = try await ctx.open()
            var records = QueryFixtures.records(seed: querySeed, count: 300)
            try await Differential.load(store, records)
            var rng = SplitMix64(seed: querySeed &+ 2)
            var replaced: [Record] = []
            var deleted: [String] = []
            var kept: [Record] = []
            for (index, record) in records.enumerated() {
                if index % 7 == 0 { deleted.append(record.id); continue }
                if index % 5 == 0 {
                    let changed = QueryFixtures.record(id: record.id, &rng)
                    replaced.append(changed)
                    kept.append(changed)
                } else {
                    kept.append(record)
                }
            }
            let added = QueryFixtures.records(seed: querySeed &+ 3, count: 40, startIndex: 300)
            let toReplace = replaced, toDelete = deleted
            try await must(await store.write { tx in
                for record in toReplace { try tx.upsert(record, in: QueryFixtures.table) }
                for id in toDelete { try tx.delete(id: id, in: QueryFixtures.table) }
                for record in added { try tx.upsert(record, in: QueryFixtures.table) }
            }, "changing the data")
            records = kept + added
            if ctx.capabilities.persistent { store = try await ctx.reopen(store) }
            let queries = QueryFixtures.handWritten(existingId: records[3].id)
                + QueryFixtures.randomQueries(seed: querySeed &+ 4, count: 60, ids: records.map(\.id))
            try await Differential.check(store, table: QueryFixtures.table, records: records, queries: queries, label: "query after changes")
        },
        ConformanceCase("queriesInsideWriteTransaction") { ctx in
            // Queries see the transaction's own uncommitted writes, and not after a rollback.
            let store = try await ctx.open()
            let records = QueryFixtures.records(seed: querySeed, count: 300)
            try await Differential.load(store, records)
            let added = QueryFixtures.records(seed: querySeed &+ 5, count: 25, startIndex: 300)
            let removed = Set(records.prefix(30).map(\.id))
            let changed = records.filter { !removed.contains($0.id) } + added
            let queries = Array(QueryFixtures.handWritten(existingId: records[40].id).prefix(80))
            let results: [[Record]]
            do {
                _ = try await store.write { tx -> Int in
                    for record in added { try tx.upsert(record, in: QueryFixtures.table) }
                    for id in removed { try tx.delete(id: id, in: QueryFixtures.table) }
                    let results = try queries.map { try tx.records(in: QueryFixtures.table, matching: $0) }
                    throw RollbackWithResults(results: results)
                }
                throw failure("write returned normally although its body threw")
            } catch let rollback as RollbackWithResults {
                results = rollback.results
            } catch let failure as ConformanceFailure {
                throw failure
            } catch {
                throw failure("querying inside a write transaction: expected the body's own error back, got \(describe(error))")
            }
            var mismatches: [String] = []
            for (index, (query, actual)) in zip(queries, results).enumerated() {
                if let difference = Render.difference(QueryEvaluator.apply(query, to: changed), actual) {
                    mismatches.append("query #\(index) `\(Render.query(query))` inside the transaction: \(difference)")
                }
            }
            try expect(mismatches.isEmpty, "\(mismatches.count) queries inside a write transaction differ from QueryEvaluator:\n    "
                + mismatches.prefix(5).joined(separator: "\n    "))
            // After the rollback the original data answers again.
            try await Differential.check(store, table: QueryFixtures.table, records: records, queries: queries, label: "query after rollback")
        },
        ConformanceCase("invalidQueries") { ctx in
            let store = try await ctx.open()
            try await Differential.load(store, QueryFixtures.records(seed: querySeed, count: 20))
            for (query, predicateInvalid) in QueryFixtures.invalid {
                try await expectThrows(.invalidQuery, "records(matching: `\(Render.query(query))`)") {
                    try await store.read { tx in try tx.records(in: QueryFixtures.table, matching: query) }
                }
                if predicateInvalid {
                    try await expectThrows(.invalidQuery, "count(matching: `\(Render.predicate(query.predicate))`)") {
                        try await store.read { tx in try tx.count(in: QueryFixtures.table, matching: query.predicate) }
                    }
                }
            }
        },
    ]
}

struct RollbackWithResults: Error {
    let results: [[Record]]
}
