import OfflineSync

extension LocalStoreConformance {
    static let durabilityCases: [ConformanceCase] = [
        ConformanceCase("reopenKeepsDataAndSchemas", requires: .persistent) { ctx in
            var store = try await ctx.open()
            for schema in CRUDFixtures.schemas { try await must(await store.defineTable(schema), "defining \(schema.name)") }
            let people = (0..<50).map { (i: Int) -> Record in
                let fields: [String: Value] = ["name": .string("n\(i)"), "age": .int(Int64(i)), "extra": .bytes([UInt8(i)])]
                let version: String? = i % 2 == 0 ? "v\(i)" : nil
                return Record(id: "p\(i)", fields: fields, version: version, deleted: i % 7 == 0)
            }
            let beta = [Record(id: "b", fields: ["title": "t", "rank": 1, "tags": ["x"], "meta": ["k": 1.5]])]
            try await must(await store.write { tx in
                for r in people { try tx.upsert(r, in: "people") }
                for r in beta { try tx.upsert(r, in: "beta") }
            }, "writing")
            store = try await ctx.reopen(store)
            let (tables, readPeople, readBeta) = try await must(await store.read { tx in
                (try tx.tables(), try tx.records(in: "people", matching: .all), try tx.records(in: "beta", matching: .all))
            }, "reading after reopening")
            try expectEqual(tables, CRUDFixtures.schemas.sorted { Value.utf8Less($0.name, $1.name) }, "schemas after reopening")
            try expectRecords(readPeople, people.sorted { Value.utf8Less($0.id, $1.id) }, "people after reopening")
            try expectRecords(readBeta, beta, "beta after reopening")
            // Still fully usable: the strict table still rejects, queries use the reopened schema.
            try await expectThrows(.typeMismatch, "an undeclared field in the reopened strict table") {
                try await store.write { tx in try tx.upsert(Record(id: "x", fields: ["other": 1]), in: "beta") }
            }
            let older = try await must(await store.read { tx in try tx.count(in: "people", matching: Field("age") >= 40) }, "querying")
            try expectEqual(older, 10, "people aged 40 or more after reopening")
        },
        ConformanceCase("rolledBackAbsentAfterReopen", requires: .persistent) { ctx in
            var store = try await ctx.open()
            let seed = try await TransactionFixtures.seed(store)
            _ = try? await store.write { tx -> Int in
                try tx.upsert(Record(id: "a3", fields: ["balance": 1]), in: "accounts")
                _ = try tx.delete(id: "l1", in: "ledger")
                throw IntentionalRollback(marker: 2)
            }
            try await expectThrows(.typeMismatch, "a transaction refused by the store") {
                try await store.write { tx in
                    try tx.upsert(Record(id: "a9", fields: ["balance": 1]), in: "accounts")
                    try tx.upsert(Record(id: "a1", fields: ["balance": "x"]), in: "accounts")
                }
            }
            store = try await ctx.reopen(store)
            try await TransactionFixtures.expectState(store, seed, "after reopening")
        },
        ConformanceCase("manyCommitsSurvive", requires: .persistent) { ctx in
            var store = try await ctx.open()
            try await must(await store.defineTable(TableSchema("log", fields: [FieldDefinition("i", .int)])), "defining log")
            for i in 0..<200 {
                try await must(await store.write { tx in try tx.upsert(Record(id: "e\(i)", fields: ["i": .int(Int64(i))]), in: "log") }, "commit \(i)")
                if i % 50 == 49 {
                    _ = try await must(await store.write { tx in try tx.delete(id: "e\(i - 1)", in: "log") }, "delete after commit \(i)")
                }
            }
            for round in 1...2 {
                store = try await ctx.reopen(store)
                let (count, sum) = try await must(await store.read { tx in
                    (try tx.count(in: "log", matching: .all), try tx.records(in: "log", matching: .all).compactMap { $0["i"].intValue }.reduce(0, +))
                }, "reading after reopen \(round)")
                try expectEqual(count, 196, "records after reopen \(round)")
                try expectEqual(sum, 19_408 as Int64, "sum of values after reopen \(round)")
                try await must(await store.write { tx in try tx.upsert(Record(id: "round\(round)"), in: "log") }, "writing after reopen \(round)")
                _ = try await must(await store.write { tx in try tx.delete(id: "round\(round)", in: "log") }, "deleting after reopen \(round)")
            }
        },
        ConformanceCase("closedStoreThrows") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(CRUDFixtures.people), "defining people")
            try await must(await store.close(), "closing")
            try await expectThrows(.storeClosed, "read after close") { try await store.read { tx in try tx.tables() } }
            try await expectThrows(.storeClosed, "write after close") {
                try await store.write { tx in try tx.upsert(Record(id: "x"), in: "people") }
            }
            try await expectThrows(.storeClosed, "defineTable after close") { try await store.defineTable(TableSchema("other")) }
            do {
                try await store.close()
            } catch let error as SyncError where error.code == .storeClosed {
                // Closing twice may report that the store is closed.
            } catch {
                throw failure("a second close must succeed or throw storeClosed, got \(describe(error))")
            }
        },
    ]
}
