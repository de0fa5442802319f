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
        ConformanceCase("sameShapeWithOtherValues") { ctx in
            // Queries that differ only in their literals (a SQL store may translate such a
            // shape once and bind the values): each value gives exactly the evaluator's
            // result, also after a new declared field moves the columns under the same shape.
            let store = try await ctx.open()
            var schema = TableSchema("shapes", fields: [
                FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string), FieldDefinition("t", .string),
            ])
            try await must(await store.defineTable(schema), "defining table shapes")
            let records = ShapeFixtures.records()
            try await must(await store.write { tx in for record in records { try tx.upsert(record, in: "shapes") } },
                           "writing \(records.count) records")
            for round in 0..<2 {
                let queries = ShapeFixtures.queries()
                try await Differential.check(store, table: "shapes", records: records, queries: queries,
                                             label: "same-shape query, schema \(round + 1)")
                schema = TableSchema("shapes", fields: [FieldDefinition("added\(round)", .int)] + schema.fields)
                try await must(await store.defineTable(schema), "adding a field in front of the others")
            }
        },
        ConformanceCase("batchedReads") { ctx in
            // read(_:) answers each read as its own call would: committed data, then the
            // transaction's own uncommitted writes (which a store may still hold in memory),
            // and the typed error of a read that fails.
            let store = try await ctx.open()
            var records = QueryFixtures.records(seed: querySeed, count: 300)
            try await Differential.load(store, records)
            let queries = Array(QueryFixtures.handWritten(existingId: records[9].id).prefix(60))
            func batch(_ ids: [String]) -> [LocalRead] {
                ids.map { LocalRead.record(table: QueryFixtures.table, id: $0) }
                    + queries.map { LocalRead.records(table: QueryFixtures.table, query: $0) }
            }
            func check(_ answers: [[Record]], ids: [String], data: [Record], _ when: String) throws {
                try expect(answers.count == ids.count + queries.count,
                           "read(_:) \(when): \(answers.count) answers to \(ids.count + queries.count) reads")
                for (id, answer) in zip(ids, answers) {
                    try expectRecords(answer, data.filter { $0.id.utf8.elementsEqual(id.utf8) }, "read(_:) of id \(Render.string(id)) \(when)")
                }
                for (query, answer) in zip(queries, answers.dropFirst(ids.count)) {
                    if let difference = Render.difference(QueryEvaluator.apply(query, to: data), answer) {
                        throw failure("read(_:) of `\(Render.query(query))` \(when): \(difference)")
                    }
                }
            }
            let ids = [records[0].id, "absent", records[299].id, records[0].id]
            let committedReads = batch(ids)
            let committed = try await must(await store.read { tx in try tx.read(committedReads) }, "read(_:) in a read transaction")
            try check(committed, ids: ids, data: records, "in a read transaction")
            // More ids than one statement reads (a store may read by id in chunks), with
            // repeats and misses.
            let manyIds = (0..<100).map { records[$0 * 3].id } + (0..<30).map { "absent-\($0)" } + (0..<7).map { records[$0 * 3].id }
            let manyReads = batch(manyIds)
            let many = try await must(await store.read { tx in try tx.read(manyReads) }, "read(_:) of 137 ids in a read transaction")
            try check(many, ids: manyIds, data: records, "of 137 ids in a read transaction")

            let added = QueryFixtures.records(seed: querySeed &+ 6, count: 20, startIndex: 300)
            let removed = records[1].id
            let changed = QueryFixtures.records(seed: querySeed &+ 7, count: 1, startIndex: 2).map {
                Record(id: records[2].id, fields: $0.fields)
            }
            let ownIds = [added[0].id, removed, changed[0].id, added[19].id, records[5].id]
            let ownReads = batch(ownIds)
            do {
                _ = try await store.write { tx -> Int in
                    for record in added + changed { try tx.upsert(record, in: QueryFixtures.table) }
                    try tx.delete(id: removed, in: QueryFixtures.table)
                    throw RollbackWithResults(results: try tx.read(ownReads))
                }
                throw failure("write returned normally although its body threw")
            } catch let rollback as RollbackWithResults {
                let data = records.filter { $0.id != removed && $0.id != changed[0].id } + added + changed
                try check(rollback.results, ids: ownIds, data: data, "of the transaction's own writes")
            }
            records = try await must(await store.read { tx in try tx.records(in: QueryFixtures.table, matching: .all) }, "reading all")
            try expect(records.count == 300, "the rolled-back writes left \(records.count) records, not 300")

            try await expectThrows(.invalidQuery, "read(_:) with an invalid query among valid reads") {
                try await store.read { tx in
                    try tx.read([.record(table: QueryFixtures.table, id: "absent"),
                                 .records(table: QueryFixtures.table, query: QueryFixtures.invalid[0].query)])
                }
            }
            try await expectThrows(.tableNotDefined, "read(_:) of a table never defined") {
                try await store.read { tx in try tx.read([.record(table: "never_defined", id: "x")]) }
            }
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

/// Records and queries of three shapes, each with values that differ in kind, in bytes but
/// not canonically (é / e + combining acute), in length (empty, CJK).
enum ShapeFixtures {
    static let strings = ["a", "b", "", "é", "e\u{301}", "ab", "日本"]

    static func records() -> [Record] {
        (0..<120).map { i in
            var fields: [String: Value] = ["n": .int(Int64(i % 9)), "s": .string(strings[i % strings.count])]
            if i % 5 != 0 { fields["t"] = .string(strings[(i / 3) % strings.count]) }
            return Record(id: "r\(i)", fields: fields)
        }
    }

    /// Each shape with every value, in two rounds (the second finds every shape translated).
    static func queries() -> [Query] {
        var queries: [Query] = []
        for value in strings {
            queries.append(Query(Field("s") == .string(value), order: [SortKey("n", ascending: false)], limit: 3))
            queries.append(Query(Field("t") != .string(value) && Field("n") >= 4, order: [SortKey("s")]))
            queries.append(Query(Field("id") == .string("r1\(value)") || Field("s") < .string(value), order: [SortKey("t")], offset: 2))
        }
        for n in 0..<10 { queries.append(Query(Field("n") == .int(Int64(n)) && Field("s") > "a", offset: 1)) }
        for n in 0..<4 { queries.append(Query(Field("n") < .int(Int64(n * 3)), order: [SortKey("s")], limit: n, offset: n % 2)) }
        return queries + queries
    }
}

struct RollbackWithResults: Error {
    let results: [[Record]]
}
