import Foundation
import OfflineSync

typealias RemoteCase = (name: String, body: @Sendable (ConformanceBackend) async throws -> Void)

/// Builds a push operation with a fresh id.
func makeOperation(_ kind: OperationKind, _ itemId: String, _ fields: [String: Value] = [:],
                   base: String? = nil, table: String = "items") -> PushOperation {
    PushOperation(id: UUID().uuidString, table: table, itemId: itemId, kind: kind,
                  item: kind == .delete ? nil : Record(id: itemId, fields: fields), baseVersion: base)
}

/// Pushes one operation and returns its outcome.
func pushOne(_ remote: any RemoteStore, _ operation: PushOperation,
             file: String = #fileID, line: Int = #line) async throws -> PushOutcome {
    let results = try await must(await remote.push([operation]), "push", file: file, line: line)
    try expectEqual(results.count, 1, "number of results", file: file, line: line)
    try expectEqual(results[0].operationId, operation.id, "result operation id", file: file, line: line)
    return results[0].outcome
}

/// Pushes one operation that must be applied; returns the remote's record.
func applyOne(_ remote: any RemoteStore, _ operation: PushOperation,
              file: String = #fileID, line: Int = #line) async throws -> Record {
    let outcome = try await pushOne(remote, operation, file: file, line: line)
    guard case .applied(let record) = outcome else {
        throw ConformanceFailure("\(operation.kind.rawValue) of '\(operation.itemId)': expected applied, got \(outcome)", file: file, line: line)
    }
    return record
}

/// Pulls every page after `cursor`; returns the records in order and the final cursor.
func pullAll(_ remote: any RemoteStore, table: String = "items", predicate: QueryPredicate = .all,
             cursor: String? = nil, limit: Int = 100,
             file: String = #fileID, line: Int = #line) async throws -> (records: [Record], cursor: String?) {
    var records: [Record] = []
    var cursor = cursor
    for _ in 0..<10_000 {
        let page = try await must(await remote.pull(PullRequest(table: table, predicate: predicate, cursor: cursor, limit: limit)),
                                  "pull", file: file, line: line)
        records += page.records
        cursor = page.nextCursor
        if page.remaining == 0 { return (records, cursor) }
        try expect(!page.records.isEmpty, "a page with remaining \(page.remaining) but no records", file: file, line: line)
    }
    throw ConformanceFailure("pull did not finish after 10,000 pages", file: file, line: line)
}

extension RemoteStoreConformance {
    static func cases(of group: Group) -> [RemoteCase] {
        switch group {
        case .pushOutcomes: return pushOutcomeCases
        case .conflicts: return conflictCases
        case .idempotentReplay: return replayCases
        case .cursorPulls: return cursorCases
        case .concurrentWriters: return concurrentCases
        case .tombstones: return tombstoneCases
        case .identityIsolation: return isolationCases
        case .sharedRules: return rulesCases
        }
    }

    static let pushOutcomeCases: [RemoteCase] = [
        ("insert, update and delete are applied with new versions", { backend in
            let remote = try await backend.remote("alice")
            let inserted = try await applyOne(remote, makeOperation(.insert, "a", ["title": "one", "n": 1]))
            try expectEqual(inserted.id, "a", "inserted id")
            try expectEqual(inserted.fields, ["title": "one", "n": 1], "inserted fields")
            try expect(inserted.version != nil && inserted.updatedAt != nil, "an applied insert carries version and updatedAt")
            try expect(!inserted.deleted, "an insert is not a tombstone")
            let updated = try await applyOne(remote, makeOperation(.update, "a", ["title": "two"], base: inserted.version))
            try expectEqual(updated.fields, ["title": "two"], "updated fields")
            try expect(updated.version != inserted.version, "an update gets a new version")
            let deleted = try await applyOne(remote, makeOperation(.delete, "a", base: updated.version))
            try expect(deleted.deleted, "an applied delete returns a tombstone")
            try expect(deleted.version != updated.version, "a delete gets a new version")
        }),
        ("a batch returns one result per operation, in order", { backend in
            let remote = try await backend.remote("alice")
            let operations = (0..<120).map { makeOperation(.insert, "item-\($0)", ["n": .int(Int64($0))]) }
            let results = try await must(await remote.push(operations), "push of 120")
            try expectEqual(results.map(\.operationId), operations.map(\.id), "result ids in order")
            for result in results {
                guard case .applied = result.outcome else {
                    throw failure("operation \(result.operationId) was not applied: \(result.outcome)")
                }
            }
            try expectEqual(try await pullAll(remote).records.count, 120, "records pulled after the batch")
        }),
        ("an update of a missing item is rejected and changes nothing", { backend in
            let remote = try await backend.remote("alice")
            let outcome = try await pushOne(remote, makeOperation(.update, "ghost", ["x": 1], base: "v0"))
            guard case .rejected = outcome else { throw failure("expected rejected, got \(outcome)") }
            try expectEqual(try await pullAll(remote).records.count, 0, "records after a rejected update")
        }),
        ("an operation on an invalid table name is rejected, not thrown", { backend in
            let remote = try await backend.remote("alice")
            let outcome = try await pushOne(remote, makeOperation(.insert, "a", ["x": 1], table: "__reserved"))
            guard case .rejected = outcome else { throw failure("expected rejected, got \(outcome)") }
        }),
        ("every value kind survives a push and a pull", { backend in
            let remote = try await backend.remote("alice")
            let fields: [String: Value] = [
                "b": true, "i": .int(Int64.min), "d": .double(-0.0), "s": "é e\u{301} 😀", "bytes": .bytes([0, 255, 1]),
                "date": .date(Timestamp(millisecondsSince1970: -1)), "a": [1, "x", nil], "o": ["k": ["n": 2.5]],
            ]
            let applied = try await applyOne(remote, makeOperation(.insert, "v", fields))
            try expectEqual(applied.fields, fields, "fields of the applied record")
            let pulled = try await pullAll(remote).records
            try expectEqual(pulled.first?.fields ?? [:], fields, "fields of the pulled record")
        }),
    ]

    static let conflictCases: [RemoteCase] = [
        ("an update on a stale version is a conflict with the current record", { backend in
            let remote = try await backend.remote("alice")
            let v1 = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            let v2 = try await applyOne(remote, makeOperation(.update, "a", ["n": 2], base: v1.version))
            let outcome = try await pushOne(remote, makeOperation(.update, "a", ["n": 3], base: v1.version))
            guard case .conflict(let server) = outcome else { throw failure("expected conflict, got \(outcome)") }
            try expectEqual(server.version, v2.version, "conflict carries the current version")
            try expectEqual(server.fields, ["n": 2], "conflict carries the current fields")
            let pulled = try await pullAll(remote).records
            try expectEqual(pulled.map(\.fields), [["n": 2]], "the conflicting update changed nothing")
        }),
        ("a delete on a stale version is a conflict", { backend in
            let remote = try await backend.remote("alice")
            let v1 = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            _ = try await applyOne(remote, makeOperation(.update, "a", ["n": 2], base: v1.version))
            let outcome = try await pushOne(remote, makeOperation(.delete, "a", base: v1.version))
            guard case .conflict(let server) = outcome else { throw failure("expected conflict, got \(outcome)") }
            try expect(!server.deleted, "the record is still alive")
        }),
        ("an insert of an existing id is a conflict", { backend in
            let remote = try await backend.remote("alice")
            let v1 = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            let outcome = try await pushOne(remote, makeOperation(.insert, "a", ["n": 9]))
            guard case .conflict(let server) = outcome else { throw failure("expected conflict, got \(outcome)") }
            try expectEqual(server.version, v1.version, "conflict carries the existing record")
        }),
        ("an update of a deleted item is a conflict with the tombstone", { backend in
            let remote = try await backend.remote("alice")
            let v1 = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            _ = try await applyOne(remote, makeOperation(.delete, "a", base: v1.version))
            let outcome = try await pushOne(remote, makeOperation(.update, "a", ["n": 2], base: v1.version))
            guard case .conflict(let server) = outcome else { throw failure("expected conflict, got \(outcome)") }
            try expect(server.deleted, "the conflict carries the tombstone")
        }),
        ("an insert over a tombstone brings the item back", { backend in
            let remote = try await backend.remote("alice")
            let v1 = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            _ = try await applyOne(remote, makeOperation(.delete, "a", base: v1.version))
            let again = try await applyOne(remote, makeOperation(.insert, "a", ["n": 5]))
            try expect(!again.deleted, "the re-inserted record is alive")
        }),
    ]

    static let replayCases: [RemoteCase] = [
        ("a replayed batch gets its first outcomes and is applied once", { backend in
            let remote = try await backend.remote("alice")
            let batch = (0..<10).map { makeOperation(.insert, "r\($0)", ["n": .int(Int64($0))]) }
            let first = try await must(await remote.push(batch), "first push")
            let (before, cursor) = try await pullAll(remote)
            let second = try await must(await remote.push(batch), "replayed push")
            try expectEqual(second, first, "outcomes of the replay")
            let (after, _) = try await pullAll(remote, cursor: cursor)
            try expectEqual(after.count, 0, "changes after the replay")
            try expectEqual(before.count, 10, "records after the first push")
        }),
        ("a replayed update is not a false conflict after a later change", { backend in
            let remote = try await backend.remote("alice")
            let v1 = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            let update = makeOperation(.update, "a", ["n": 2], base: v1.version)
            let first = try await pushOne(remote, update)
            guard case .applied(let v2) = first else { throw failure("expected applied, got \(first)") }
            _ = try await applyOne(remote, makeOperation(.update, "a", ["n": 3], base: v2.version))
            let replay = try await pushOne(remote, update)
            try expectEqual(replay, first, "outcome of the replayed update")
            let records = try await pullAll(remote).records
            try expectEqual(records.map(\.fields), [["n": 3]], "the replay did not overwrite the later change")
        }),
        ("a replayed conflicting operation returns the same conflict", { backend in
            let remote = try await backend.remote("alice")
            _ = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            let insert = makeOperation(.insert, "a", ["n": 2])
            let first = try await pushOne(remote, insert)
            let second = try await pushOne(remote, insert)
            try expectEqual(second, first, "outcome of the replayed conflict")
        }),
    ]

    static let cursorCases: [RemoteCase] = [
        ("pages come in commit order with exact remaining counts", { backend in
            let remote = try await backend.remote("alice")
            for i in 0..<10 { _ = try await applyOne(remote, makeOperation(.insert, "c\(i)", ["n": .int(Int64(i))])) }
            var cursor: String? = nil
            var seen: [String] = []
            var remainders: [Int] = []
            while true {
                let page = try await remote.pull(PullRequest(table: "items", cursor: cursor, limit: 3))
                seen += page.records.map(\.id)
                remainders.append(page.remaining)
                cursor = page.nextCursor
                if page.remaining == 0 { break }
            }
            try expectEqual(seen, (0..<10).map { "c\($0)" }, "ids in commit order")
            try expectEqual(remainders, [7, 4, 1, 0], "remaining after each page")
            let tail = try await remote.pull(PullRequest(table: "items", cursor: cursor, limit: 3))
            try expectEqual(tail.records.count, 0, "records after the last cursor")
            try expectEqual(tail.remaining, 0, "remaining after the last cursor")
        }),
        ("a changed item comes again, once, at its new position", { backend in
            let remote = try await backend.remote("alice")
            let a = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            _ = try await applyOne(remote, makeOperation(.insert, "b", ["n": 1]))
            let (_, cursor) = try await pullAll(remote)
            let a2 = try await applyOne(remote, makeOperation(.update, "a", ["n": 2], base: a.version))
            let (changes, _) = try await pullAll(remote, cursor: cursor)
            try expectEqual(changes.map(\.id), ["a"], "changes after the cursor")
            try expectEqual(changes.first?.version, a2.version, "the new version")
            let (all, _) = try await pullAll(remote)
            try expectEqual(all.map(\.id), ["b", "a"], "a full pull lists each item once, in commit order")
        }),
        ("a predicate filters changes but tombstones come through", { backend in
            let remote = try await backend.remote("alice")
            for i in 0..<10 { _ = try await applyOne(remote, makeOperation(.insert, "p\(i)", ["n": .int(Int64(i))])) }
            _ = try await applyOne(remote, makeOperation(.delete, "p1", base: nil))
            let (records, _) = try await pullAll(remote, predicate: Field("n") >= 7, limit: 2)
            try expectEqual(Set(records.map(\.id)), ["p7", "p8", "p9", "p1"], "ids matching n >= 7 plus the tombstone")
        }),
        ("a malformed cursor is refused with invalidCursor", { backend in
            let remote = try await backend.remote("alice")
            _ = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            try await expectThrows(.invalidCursor, "pull with a malformed cursor") {
                try await remote.pull(PullRequest(table: "items", cursor: "not a cursor", limit: 10))
            }
        }),
    ]

    static let concurrentCases: [RemoteCase] = [
        ("a puller beside four writers sees every item's final version, in order, no duplicates", { backend in
            let writers = 4, perWriter = 30
            let finals = try await withThrowingTaskGroup(of: [String: String].self) { group in
                for w in 0..<writers {
                    group.addTask {
                        let remote = try await backend.remote("shared")
                        var versions: [String: String] = [:]
                        for i in 0..<perWriter {
                            let id = "w\(w)-\(i % 10)"
                            let op = versions[id] == nil
                                ? makeOperation(.insert, id, ["w": .int(Int64(w)), "i": .int(Int64(i))])
                                : makeOperation(.update, id, ["w": .int(Int64(w)), "i": .int(Int64(i))], base: versions[id])
                            versions[id] = try await applyOne(remote, op).version
                        }
                        return versions
                    }
                }
                group.addTask {
                    // The puller: loops while writers run.
                    let remote = try await backend.remote("shared")
                    var cursor: String? = nil
                    var seen: [String: String] = [:]
                    for _ in 0..<200 {
                        let (records, next) = try await pullAll(remote, cursor: cursor, limit: 7)
                        for record in records { seen[record.id] = record.version }
                        cursor = next
                        try await Task.sleep(nanoseconds: 1_000_000)
                    }
                    return ["__puller__": cursor ?? ""].merging(seen) { a, _ in a }
                }
                var merged: [String: String] = [:]
                var pullerState: [String: String] = [:]
                for try await result in group {
                    if let cursor = result["__puller__"] {
                        pullerState = result
                        pullerState["__cursor__"] = cursor
                    } else {
                        merged.merge(result) { a, _ in a }
                    }
                }
                return (merged, pullerState)
            }
            let (written, pulled) = finals
            // Catch up after the writers are done, from the puller's own cursor.
            let remote = try await backend.remote("shared")
            let (tail, _) = try await pullAll(remote, cursor: pulled["__cursor__"].flatMap { $0.isEmpty ? nil : $0 }, limit: 7)
            var seen = pulled
            for record in tail { seen[record.id] = record.version }
            for (id, version) in written {
                try expectEqual(seen[id], version, "final version of '\(id)' as the puller saw it")
            }
            // A full pull lists every item exactly once.
            let (all, _) = try await pullAll(remote, limit: 9)
            try expectEqual(all.count, Set(all.map(\.id)).count, "items listed twice in a full pull")
            try expectEqual(all.count, written.count, "items in a full pull")
        }),
    ]

    static let tombstoneCases: [RemoteCase] = [
        ("a delete reaches a puller as a tombstone, before and after its cursor", { backend in
            let remote = try await backend.remote("alice")
            let a = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            let (_, cursor) = try await pullAll(remote)
            let tombstone = try await applyOne(remote, makeOperation(.delete, "a", base: a.version))
            let (changes, _) = try await pullAll(remote, cursor: cursor)
            try expectEqual(changes.map(\.id), ["a"], "changes after the delete")
            try expect(changes.first?.deleted == true, "the change is a tombstone")
            try expectEqual(changes.first?.version, tombstone.version, "tombstone version")
            let (all, _) = try await pullAll(remote)
            try expect(all.count == 1 && all[0].deleted, "a full pull includes the tombstone")
        }),
        ("deleting a tombstone again is harmless", { backend in
            let remote = try await backend.remote("alice")
            let a = try await applyOne(remote, makeOperation(.insert, "a", ["n": 1]))
            let first = try await applyOne(remote, makeOperation(.delete, "a", base: a.version))
            let second = try await applyOne(remote, makeOperation(.delete, "a", base: a.version))
            try expect(second.deleted, "still a tombstone")
            try expectEqual(second.version, first.version, "a second delete changes nothing")
        }),
    ]

    static let isolationCases: [RemoteCase] = [
        ("identities never see or touch each other's rows", { backend in
            let alice = try await backend.remote("alice")
            let bob = try await backend.remote("bob")
            let a = try await applyOne(alice, makeOperation(.insert, "shared-id", ["owner": "alice"]))
            try expectEqual(try await pullAll(bob).records.count, 0, "bob's pull before he writes")
            let b = try await applyOne(bob, makeOperation(.insert, "shared-id", ["owner": "bob"]))
            try expectEqual(b.fields, ["owner": "bob"], "bob's insert of the same id is his own record")
            // Bob cannot update or delete Alice's row, even with her version.
            let update = try await pushOne(bob, makeOperation(.update, "shared-id", ["owner": "mallory"], base: a.version))
            guard case .conflict(let seen) = update else { throw failure("expected conflict, got \(update)") }
            try expectEqual(seen.fields, ["owner": "bob"], "the conflict shows bob's own record only")
            let delete = try await pushOne(bob, makeOperation(.delete, "only-alice", base: nil))
            guard case .rejected = delete else { throw failure("expected rejected for a row bob does not have, got \(delete)") }
            _ = try await applyOne(alice, makeOperation(.insert, "only-alice", ["owner": "alice"]))
            let deleteAgain = try await pushOne(bob, makeOperation(.delete, "only-alice", base: nil))
            guard case .rejected = deleteAgain else { throw failure("bob deleted alice's row: \(deleteAgain)") }
            let aliceRows = try await pullAll(alice).records
            try expectEqual(Set(aliceRows.map { $0.fields["owner"] ?? .null }), ["alice"], "alice's rows")
            try expectEqual(aliceRows.count, 2, "alice's row count")
            let bobRows = try await pullAll(bob, predicate: Field("owner") != "bob").records
            try expectEqual(bobRows.count, 0, "bob's rows owned by others")
            // Predicates on reserved names cannot widen the scope.
            try await expectThrows(anyOf: [.invalidQuery, .rejected], "a predicate naming the owner column") {
                try await bob.pull(PullRequest(table: "items", predicate: Field("__owner") == "alice", limit: 10))
            }
        }),
    ]
}
