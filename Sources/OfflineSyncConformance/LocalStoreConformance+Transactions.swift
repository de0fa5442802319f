import OfflineSync

extension LocalStoreConformance {
    static let transactionCases: [ConformanceCase] = [
        ConformanceCase("rollbackOnThrow") { ctx in
            let store = try await ctx.open()
            let seed = try await TransactionFixtures.seed(store)
            do {
                _ = try await store.write { tx -> Int in
                    try tx.upsert(Record(id: "a3", fields: ["balance": 7]), in: "accounts")
                    try tx.upsert(Record(id: "a1", fields: ["balance": 0, "note": "changed"]), in: "accounts")
                    _ = try tx.delete(id: "a2", in: "accounts")
                    _ = try tx.delete(id: "l1", in: "ledger")
                    try tx.upsert(Record(id: "l3", fields: ["amount": -1]), in: "ledger")
                    try tx.upsert(Record(id: "l2", fields: ["amount": 999], version: "x"), in: "ledger")
                    _ = try tx.delete(id: "l3", in: "ledger")
                    try tx.upsert(Record(id: "l3", fields: ["amount": -2]), in: "ledger")
                    throw IntentionalRollback(marker: 7)
                }
                throw failure("write returned normally although its body threw")
            } catch let error as IntentionalRollback {
                try expectEqual(error.marker, 7, "the body's error is rethrown unchanged")
            } catch let failure as ConformanceFailure {
                throw failure
            } catch {
                throw failure("expected the body's own error to be rethrown, got \(describe(error))")
            }
            try await TransactionFixtures.expectState(store, seed, "after a rolled-back transaction")
        },
        ConformanceCase("rollbackOnStoreError") { ctx in
            // An error thrown by the store inside the body (here a type mismatch) and not caught
            // rolls back the body's earlier writes.
            let store = try await ctx.open()
            let seed = try await TransactionFixtures.seed(store)
            try await expectThrows(.typeMismatch, "a transaction whose last upsert is refused") {
                try await store.write { tx in
                    try tx.upsert(Record(id: "a9", fields: ["balance": 1]), in: "accounts")
                    _ = try tx.delete(id: "l1", in: "ledger")
                    try tx.upsert(Record(id: "a1", fields: ["balance": "not an int"]), in: "accounts")
                }
            }
            try await TransactionFixtures.expectState(store, seed, "after a transaction failed by the store")
            try await expectThrows(.tableNotDefined, "a transaction writing to an undefined table last") {
                try await store.write { tx in
                    try tx.upsert(Record(id: "a9", fields: ["balance": 1]), in: "accounts")
                    try tx.upsert(Record(id: "x"), in: "nowhere")
                }
            }
            try await TransactionFixtures.expectState(store, seed, "after a transaction that used an undefined table")
        },
        ConformanceCase("readYourOwnWrites") { ctx in
            let store = try await ctx.open()
            _ = try await TransactionFixtures.seed(store)
            let seen = try await must(await store.write { tx -> [String] in
                var seen: [String] = []
                try tx.upsert(Record(id: "new", fields: ["balance": 5]), in: "accounts")
                seen.append("insert:\(try tx.record(in: "accounts", id: "new")?["balance"].intValue.map(String.init) ?? "nil")")
                seen.append("query:\(try tx.records(in: "accounts", matching: Query(Field("balance") == 5)).map(\.id))")
                seen.append("count:\(try tx.count(in: "accounts", matching: .all))")
                try tx.upsert(Record(id: "new", fields: ["balance": 6]), in: "accounts")
                seen.append("replace:\(try tx.record(in: "accounts", id: "new")?["balance"].intValue.map(String.init) ?? "nil")")
                seen.append("old:\(try tx.count(in: "accounts", matching: Field("balance") == 5))")
                seen.append("delete:\(try tx.delete(id: "a1", in: "accounts"))")
                seen.append("gone:\(try tx.record(in: "accounts", id: "a1") == nil)")
                seen.append("all:\(try tx.records(in: "accounts", matching: .all).map(\.id))")
                try tx.upsert(Record(id: "l9", fields: ["amount": 1]), in: "ledger")
                seen.append("other:\(try tx.records(in: "ledger", matching: Query(.all, order: [SortKey("amount")], limit: 1)).map(\.id))")
                return seen
            }, "a write transaction reading its own writes")
            try expectEqual(seen, ["insert:5", "query:[\"new\"]", "count:3", "replace:6", "old:0", "delete:true", "gone:true",
                                   "all:[\"a2\", \"new\"]", "other:[\"l9\"]"],
                            "what a write transaction sees of its own earlier writes")
            let after = try await must(await store.read { tx in try tx.records(in: "accounts", matching: .all).map(\.id) }, "reading after commit")
            try expectEqual(after, ["a2", "new"], "ids after commit")
        },
        ConformanceCase("returnsBodyValue") { ctx in
            let store = try await ctx.open()
            let seed = try await TransactionFixtures.seed(store)
            let written = try await must(await store.write { tx -> [Record] in
                try tx.upsert(Record(id: "r", fields: ["balance": 1]), in: "accounts")
                return try tx.records(in: "ledger", matching: .all)
            }, "a write returning records")
            try expectRecords(written, seed.ledger, "the value a write transaction returned")
            let read = try await must(await store.read { tx in (try tx.count(in: "accounts", matching: .all), "marker") }, "a read returning a tuple")
            try expectEqual(read.0, 3, "count returned from read")
            try expectEqual(read.1, "marker", "string returned from read")
            let nothing: Void = try await must(await store.write { _ in }, "an empty write")
            _ = nothing
        },
        ConformanceCase("sequencesInOneTransaction") { ctx in
            let store = try await ctx.open()
            let seed = try await TransactionFixtures.seed(store)
            try await must(await store.write { tx in
                try tx.upsert(Record(id: "tmp", fields: ["balance": 1]), in: "accounts")
                _ = try tx.delete(id: "tmp", in: "accounts")          // insert then delete: nothing
                _ = try tx.delete(id: "a1", in: "accounts")
                try tx.upsert(Record(id: "a1", fields: ["balance": 2]), in: "accounts") // delete then insert: the new one
                try tx.upsert(Record(id: "a2", fields: ["balance": 3]), in: "accounts")
                _ = try tx.delete(id: "a2", in: "accounts")           // replace then delete: gone
            }, "a transaction with insert/delete sequences")
            let accounts = try await must(await store.read { tx in try tx.records(in: "accounts", matching: .all) }, "reading")
            try expectRecords(accounts, [Record(id: "a1", fields: ["balance": 2])], "net effect of the sequences")
            let ledger = try await must(await store.read { tx in try tx.records(in: "ledger", matching: .all) }, "reading ledger")
            try expectRecords(ledger, seed.ledger, "the other table")
        },
        ConformanceCase("escapedTransactionIsClosed") { ctx in
            let store = try await ctx.open()
            let seed = try await TransactionFixtures.seed(store)
            let box = TransactionBox()
            try await must(await store.write { tx in box.write = tx }, "a write letting its transaction escape")
            try await must(await store.read { tx in box.read = tx }, "a read letting its transaction escape")
            guard let write = box.write, let read = box.read else { throw failure("the transactions were not captured") }
            try await expectThrows(.storeClosed, "upsert on an escaped write transaction") { try write.upsert(Record(id: "late", fields: ["balance": 1]), in: "accounts") }
            try await expectThrows(.storeClosed, "delete on an escaped write transaction") { try write.delete(id: "a1", in: "accounts") }
            try await expectThrows(.storeClosed, "record(in:id:) on an escaped write transaction") { try write.record(in: "accounts", id: "a1") }
            try await expectThrows(.storeClosed, "records(in:matching:) on an escaped write transaction") { try write.records(in: "accounts", matching: .all) }
            try await expectThrows(.storeClosed, "count on an escaped write transaction") { try write.count(in: "accounts", matching: .all) }
            try await expectThrows(.storeClosed, "tables() on an escaped write transaction") { try write.tables() }
            try await expectThrows(.storeClosed, "schema(of:) on an escaped write transaction") { try write.schema(of: "accounts") }
            try await expectThrows(.storeClosed, "record(in:id:) on an escaped read transaction") { try read.record(in: "accounts", id: "a1") }
            try await expectThrows(.storeClosed, "records(in:matching:) on an escaped read transaction") { try read.records(in: "accounts", matching: .all) }
            try await expectThrows(.storeClosed, "tables() on an escaped read transaction") { try read.tables() }
            // Escaped from a transaction that rolled back, too.
            let failed = TransactionBox()
            _ = try? await store.write { tx -> Int in failed.write = tx; throw IntentionalRollback(marker: 1) }
            if let escaped = failed.write {
                try await expectThrows(.storeClosed, "upsert on a transaction escaped from a rolled-back write") {
                    try escaped.upsert(Record(id: "late2"), in: "accounts")
                }
            }
            try await TransactionFixtures.expectState(store, seed, "after using escaped transactions")
        },
    ]
}

/// Holds a transaction that escaped its closure, to check it refuses later use.
final class TransactionBox: @unchecked Sendable {
    // @unchecked Sendable: written inside the transaction body, read only after the awaited
    // `write`/`read` returned, so the accesses are ordered by that await.
    var write: (any LocalWriteTransaction)?
    var read: (any LocalReadTransaction)?
}

enum TransactionFixtures {
    struct Seed: Sendable {
        var accounts: [Record]
        var ledger: [Record]
    }

    /// Defines `accounts` and `ledger` and fills them.
    static func seed(_ store: any LocalStore, file: String = #fileID, line: Int = #line) async throws -> Seed {
        let seed = Seed(
            accounts: [Record(id: "a1", fields: ["balance": 100]), Record(id: "a2", fields: ["balance": 50], version: "v")],
            ledger: [Record(id: "l1", fields: ["amount": 100, "memo": "opening"]), Record(id: "l2", fields: ["amount": 50])])
        try await must(await store.defineTable(TableSchema("accounts", fields: [FieldDefinition("balance", .int, indexed: true)])), "defining accounts", file: file, line: line)
        try await must(await store.defineTable(TableSchema("ledger", fields: [FieldDefinition("amount", .int)])), "defining ledger", file: file, line: line)
        try await must(await store.write { tx in
            for r in seed.accounts { try tx.upsert(r, in: "accounts") }
            for r in seed.ledger { try tx.upsert(r, in: "ledger") }
        }, "seeding", file: file, line: line)
        return seed
    }

    /// Fails unless both tables hold exactly the seed.
    static func expectState(_ store: any LocalStore, _ seed: Seed, _ when: String, file: String = #fileID, line: Int = #line) async throws {
        let (accounts, ledger, accountCount, ledgerCount) = try await must(await store.read { tx in
            (try tx.records(in: "accounts", matching: .all), try tx.records(in: "ledger", matching: .all),
             try tx.count(in: "accounts", matching: .all), try tx.count(in: "ledger", matching: .all))
        }, "reading \(when)", file: file, line: line)
        try expectRecords(accounts, seed.accounts, "accounts \(when)", file: file, line: line)
        try expectRecords(ledger, seed.ledger, "ledger \(when)", file: file, line: line)
        try expectEqual(accountCount, seed.accounts.count, "count of accounts \(when)", file: file, line: line)
        try expectEqual(ledgerCount, seed.ledger.count, "count of ledger \(when)", file: file, line: line)
        let byId = try await must(await store.read { tx in
            (try tx.record(in: "accounts", id: "a3"), try tx.record(in: "accounts", id: "a9"), try tx.record(in: "ledger", id: "l3"))
        }, "reading ids \(when)", file: file, line: line)
        try expect(byId.0 == nil && byId.1 == nil && byId.2 == nil, "records written by a failed transaction exist \(when)", file: file, line: line)
    }
}
