import OfflineSync

extension LocalStoreConformance {
    static let concurrencyCases: [ConformanceCase] = [
        ConformanceCase("readModifyWriteCounter") { ctx in
            // 8 tasks × 25 write transactions, each reading a counter and writing it plus one:
            // serializable transactions lose no update, and every increment saw a distinct value.
            let store = try await ctx.open()
            try await checkCounterIncrements(store) { body in try await store.write(body) }
        },
        ConformanceCase("readersNeverSeePartialTransactions") { ctx in
            // Writers set four records in each of two tables to one value per transaction;
            // concurrent readers must always find all eight equal.
            let store = try await ctx.open()
            for table in ["left", "right"] {
                try await must(await store.defineTable(TableSchema(table, fields: [FieldDefinition("v", .int, indexed: true)])), "defining \(table)")
            }
            let ids = ["p0", "p1", "p2", "p3"]
            try await must(await store.write { tx in
                for table in ["left", "right"] { for id in ids { try tx.upsert(Record(id: id, fields: ["v": 0]), in: table) } }
            }, "seeding the pairs")
            let problems = try await withThrowingTaskGroup(of: [String].self) { group -> [String] in
                for writer in 1...4 {
                    group.addTask {
                        for i in 0..<25 {
                            let v = Value.int(Int64(writer * 1000 + i))
                            try await must(await store.write { tx in
                                for id in ids {
                                    try tx.upsert(Record(id: id, fields: ["v": v]), in: "left")
                                    try tx.upsert(Record(id: id, fields: ["v": v, "by": .int(Int64(writer))]), in: "right")
                                }
                            }, "writer \(writer) transaction \(i)")
                        }
                        return []
                    }
                }
                for reader in 1...4 {
                    group.addTask {
                        var problems: [String] = []
                        for i in 0..<40 {
                            let values = try await must(await store.read { tx -> [Value] in
                                let left = try ids.map { try tx.record(in: "left", id: $0)?["v"] ?? .null }
                                let right = try tx.records(in: "right", matching: .all).map { $0["v"] }
                                let count = try tx.count(in: "left", matching: Field("v") == (left.first ?? .null))
                                return left + right + [.int(Int64(count))]
                            }, "reader \(reader) read \(i)")
                            let pairValues = values.dropLast()
                            if pairValues.count != 8 || Set(pairValues).count != 1 || values.last != .int(4) {
                                problems.append("reader \(reader) read \(i) saw \(values.map(Render.value))")
                            }
                        }
                        return problems
                    }
                }
                var all: [String] = []
                for try await found in group { all += found }
                return all
            }
            try expect(problems.isEmpty, "readers saw partial transactions (values must be 8 equal values, then the count 4): \(problems.prefix(3).joined(separator: "; "))")
        },
        ConformanceCase("snapshotCountsDuringInserts") { ctx in
            // Each write inserts two records; a read transaction always counts an even number,
            // and a count and a query in one read agree.
            let store = try await ctx.open()
            try await must(await store.defineTable(TableSchema("pairs", fields: [FieldDefinition("batch", .int)])), "defining pairs")
            let problems = try await withThrowingTaskGroup(of: [String].self) { group -> [String] in
                group.addTask {
                    for i in 0..<60 {
                        try await must(await store.write { tx in
                            try tx.upsert(Record(id: "\(i)-a", fields: ["batch": .int(Int64(i))]), in: "pairs")
                            try tx.upsert(Record(id: "\(i)-b", fields: ["batch": .int(Int64(i))]), in: "pairs")
                        }, "inserting pair \(i)")
                    }
                    return []
                }
                for reader in 1...3 {
                    group.addTask {
                        var problems: [String] = []
                        for i in 0..<40 {
                            let (count, rows) = try await must(await store.read { tx in
                                (try tx.count(in: "pairs", matching: .all), try tx.records(in: "pairs", matching: .all).count)
                            }, "reader \(reader) read \(i)")
                            if count % 2 != 0 || count != rows { problems.append("count \(count), rows \(rows)") }
                        }
                        return problems
                    }
                }
                var all: [String] = []
                for try await found in group { all += found }
                return all
            }
            try expect(problems.isEmpty, "readers saw half a transaction or an inconsistent snapshot: \(problems.prefix(5).joined(separator: "; "))")
            let final = try await must(await store.read { tx in try tx.count(in: "pairs", matching: .all) }, "final count")
            try expectEqual(final, 120, "records after 60 two-record transactions")
        },
        ConformanceCase("confinedWritesLoseNothing") { ctx in
            // Writes confined to table a, to table b, and unconfined writes of both, all
            // incrementing counters at once: each table's counter ends exact (no confined
            // writer lost another's update, nor an unconfined one's), and a confined write
            // that throws leaves nothing.
            let store = try await ctx.open()
            for table in ["a", "b"] {
                try await must(await store.defineTable(TableSchema(table, fields: [FieldDefinition("n", .int)])), "defining \(table)")
            }
            try await must(await store.write { tx in
                for table in ["a", "b"] { try tx.upsert(Record(id: "c", fields: ["n": 0]), in: table) }
            }, "writing the counters")
            @Sendable func increment(_ tx: any LocalWriteTransaction, _ table: String) throws {
                let n = try tx.record(in: table, id: "c")?["n"].intValue ?? -1_000_000
                try tx.upsert(Record(id: "c", fields: ["n": .int(n + 1)]), in: table)
            }
            let rounds = 20
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<6 {
                    group.addTask {
                        for i in 0..<rounds {
                            switch task % 3 {
                            case 0: try await must(await store.write(confinedTo: ["a"]) { try increment($0, "a") }, "confined increment \(i) of a")
                            case 1: try await must(await store.write(confinedTo: ["b"]) { try increment($0, "b") }, "confined increment \(i) of b")
                            default: try await must(await store.write { tx in try increment(tx, "a"); try increment(tx, "b") },
                                                    "unconfined increment \(i)")
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            struct Refused: Error {}
            do {
                try await store.write(confinedTo: ["a"]) { tx in
                    try increment(tx, "a")
                    throw Refused()
                }
                throw failure("a confined write whose closure threw returned")
            } catch is Refused {}
            let counters = try await must(await store.read { tx in
                try ["a", "b"].map { try tx.record(in: $0, id: "c")?["n"] }
            }, "reading the counters")
            try expectEqual(counters, [.int(Int64(4 * rounds)), .int(Int64(4 * rounds))],
                            "each counter after \(2 * rounds) confined and \(2 * rounds) unconfined increments (one write threw)")
        },
    ]

    /// 8 tasks × 25 increments of one counter, each read and written back plus one by
    /// `increment`, which runs its body in one write transaction of the kind under test: no
    /// update may be lost, and every increment must have seen a distinct earlier value.
    static func checkCounterIncrements(
        _ store: any LocalStore,
        through increment: @escaping @Sendable (@escaping @Sendable (any LocalWriteTransaction) throws -> Void) async throws -> Void
    ) async throws {
        try await must(await store.defineTable(TableSchema("counters", fields: [FieldDefinition("n", .int)])), "defining counters")
        try await must(await store.defineTable(TableSchema("log", fields: [FieldDefinition("seen", .int)])), "defining log")
        try await must(await store.write { tx in try tx.upsert(Record(id: "c", fields: ["n": 0]), in: "counters") }, "writing the counter")
        let tasks = 8, perTask = 25
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    for i in 0..<perTask {
                        try await must(await increment { tx in
                            let n = try tx.record(in: "counters", id: "c")?["n"].intValue ?? -1_000_000
                            try tx.upsert(Record(id: "c", fields: ["n": .int(n + 1)]), in: "counters")
                            try tx.upsert(Record(id: "log-\(task)-\(i)", fields: ["seen": .int(n)]), in: "log")
                        }, "increment \(i) of task \(task)")
                    }
                }
            }
            try await group.waitForAll()
        }
        let (counter, seen) = try await must(await store.read { tx in
            (try tx.record(in: "counters", id: "c")?["n"], try tx.records(in: "log", matching: Query(.all, order: [SortKey("seen")])).map { $0["seen"] })
        }, "reading the result")
        try expectEqual(counter, .int(Int64(tasks * perTask)), "the counter after \(tasks * perTask) concurrent increments")
        try expectEqual(seen.count, tasks * perTask, "log entries")
        let expected = (0..<(tasks * perTask)).map { Value.int(Int64($0)) }
        if seen != expected {
            let firstBad = zip(seen, expected).enumerated().first { $0.element.0 != $0.element.1 }
            throw failure("increments did not each see a distinct earlier value (lost or duplicated update); first at position \(firstBad?.offset ?? -1): saw \(firstBad.map { Render.value($0.element.0) } ?? "-")")
        }
    }
}
