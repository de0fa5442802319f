import Foundation
import Synchronization
import OfflineSync

typealias ScenarioCase = (name: String, body: @Sendable (ScenarioWorld) async throws -> Void)

/// A `notes` record.
func note(_ id: String, title: String = "", body: String = "", n: Int64 = 0) -> Record {
    Record(id: id, fields: ["title": .string(title), "body": .string(body), "n": .int(n)])
}

/// Holds a value set after a closure that needs it was created.
final class LateBox<T: Sendable>: Sendable {
    private let stored = Mutex<T?>(nil)
    var value: T? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

extension SyncScenarioConformance {
    static func cases(of group: Group) -> [ScenarioCase] {
        switch group {
        case .offlineEdits: return offlineCases
        case .collapse: return collapseCases
        case .conflictPolicies: return conflictCases
        case .purge: return purgeCases
        case .incrementalPull: return incrementalCases
        case .implicitPush: return implicitCases
        }
    }

    static let offlineCases: [ScenarioCase] = [
        ("offline inserts, updates and deletes reach the other client", { world in
            let a = try await world.client("a"), b = try await world.client("b")
            for i in 1...3 { try await a.table("notes").insert(note("n\(i)", title: "t\(i)", n: Int64(i))) }
            try expectEqual(try await b.pull("notes").added, 0, "b sees nothing before a pushes")
            try expectEqual(try await a.queuedOperationCount(), 3, "a's queue before push")
            let pushed = try await a.push()
            try expectEqual(pushed.applied, 3, "operations applied")
            try expectEqual(try await a.queuedOperationCount(), 0, "a's queue after push")
            try expectEqual(try await b.pull("notes").added, 3, "b's pull after a's push")
            try await b.table("notes").update(note("n1", title: "by b", n: 1))
            try await b.table("notes").delete(id: "n2")
            try await b.push()
            let pulled = try await a.pull("notes")
            try expectEqual(pulled.updated, 1, "a's updated count")
            try expectEqual(pulled.deleted, 1, "a's deleted count")
            let n1 = try await a.table("notes").get("n1")
            try expectEqual(n1?["title"], "by b", "n1's title at a")
            try expectEqual(n1?.version, try await b.table("notes").get("n1")?.version, "n1's version at a and b")
            try expectEqual(try await a.table("notes").get("n2"), nil, "n2 at a")
            try expectEqual(try await a.table("notes").count(), 2, "a's record count")
        }),
        ("a push with an empty queue sends nothing", { world in
            let a = try await world.client("a")
            let summary = try await a.push()
            try expectEqual(summary.batches, 0, "requests sent")
        }),
        ("a local transaction is atomic: a thrown error queues nothing", { world in
            let a = try await world.client("a")
            struct Abort: Error {}
            do {
                try await a.transaction { tx in
                    try tx.insert(note("x"), into: "notes")
                    throw Abort()
                }
                throw failure("the transaction did not throw")
            } catch is Abort {}
            try expectEqual(try await a.table("notes").count(), 0, "records after the rolled-back transaction")
            try expectEqual(try await a.queuedOperationCount(), 0, "queue after the rolled-back transaction")
        }),
    ]

    static let collapseCases: [ScenarioCase] = [
        ("an insert of an id that exists is refused and changes nothing", { world in
            let a = try await world.client("a")
            try await a.table("notes").insert(note("x", title: "first"))
            try await expectThrows(.duplicateId, "inserting a queued id again") {
                try await a.table("notes").insert(note("x", title: "second"))
            }
            let queue = try await a.queuedOperations()
            try expectEqual(queue.map(\.kind), [.insert], "queued kinds")
            try expectEqual(queue.first?.item?["title"], "first", "queued item")
            try await a.push()
            try await expectThrows(.duplicateId, "inserting a pushed id again") {
                try await a.table("notes").insert(note("x", title: "third"))
            }
            try expectEqual(try await a.table("notes").get("x")?["title"], "first", "local title")
            try expectEqual(try await a.queuedOperationCount(), 0, "queue after the refused insert")
            // A refused insert inside a transaction leaves the rest of it to commit.
            try await a.transaction { tx in
                try tx.insert(note("y", title: "kept"), into: "notes")
                _ = try? tx.insert(note("y", title: "refused"), into: "notes")
            }
            try expectEqual(try await a.table("notes").get("y")?["title"], "kept", "y after its transaction")
            try expectEqual(try await a.queuedOperations().map(\.itemId), ["y"], "queued items")
        }),
        ("insert then update queues one insert with the new item", { world in
            let a = try await world.client("a")
            try await a.table("notes").insert(note("x", title: "first"))
            try await a.table("notes").update(note("x", title: "second"))
            let queue = try await a.queuedOperations()
            try expectEqual(queue.map(\.kind), [.insert], "queued kinds")
            try expectEqual(queue.first?.item?["title"], "second", "queued item")
            try await a.push()
            let b = try await world.client("b")
            try await b.pull("notes")
            try expectEqual(try await b.table("notes").get("x")?["title"], "second", "title at b")
        }),
        ("insert then delete queues nothing and sends nothing", { world in
            let a = try await world.client("a")
            try await a.table("notes").insert(note("x"))
            try await a.table("notes").delete(id: "x")
            try expectEqual(try await a.queuedOperationCount(), 0, "queue length")
            try expectEqual(try await a.push().sent, 0, "operations sent")
            let b = try await world.client("b")
            try expectEqual(try await b.pull("notes").added + (try await b.pull("notes").deleted), 0, "changes at b")
        }),
        ("update then update queues one update on the first base version", { world in
            let a = try await world.client("a")
            try await a.table("notes").insert(note("x", title: "v1"))
            try await a.push()
            let base = try await a.table("notes").get("x")?.version
            try await a.table("notes").update(note("x", title: "v2"))
            try await a.table("notes").update(note("x", title: "v3"))
            let queue = try await a.queuedOperations()
            try expectEqual(queue.map(\.kind), [.update], "queued kinds")
            try expectEqual(queue.first?.item?["title"], "v3", "queued item")
            try expectEqual(queue.first?.baseVersion, base, "base version")
            try expectEqual(try await a.push().applied, 1, "applied without conflict")
        }),
        ("update then delete queues one delete", { world in
            let a = try await world.client("a")
            try await a.table("notes").insert(note("x"))
            try await a.push()
            try await a.table("notes").update(note("x", title: "changed"))
            try await a.table("notes").delete(id: "x")
            try expectEqual(try await a.queuedOperations().map(\.kind), [.delete], "queued kinds")
            try await a.push()
            let b = try await world.client("b")
            try await b.pull("notes")
            try expectEqual(try await b.table("notes").count(), 0, "records at b")
        }),
        ("delete then insert queues one update", { world in
            let a = try await world.client("a")
            try await a.table("notes").insert(note("x", title: "old"))
            try await a.push()
            try await a.table("notes").delete(id: "x")
            try await a.table("notes").insert(note("x", title: "new"))
            let queue = try await a.queuedOperations()
            try expectEqual(queue.map(\.kind), [.update], "queued kinds")
            try expectEqual(queue.first?.item?["title"], "new", "queued item")
            try expectEqual(try await a.push().applied, 1, "applied")
            let b = try await world.client("b")
            try await b.pull("notes")
            try expectEqual(try await b.table("notes").get("x")?["title"], "new", "title at b")
        }),
        ("a write during a push queues behind the operation in flight and is not a false conflict", { world in
            let box = LateBox<SyncContext>()
            let written = LateBox<Bool>()
            let a = try await world.client("a", hook: { operations in
                guard written.value == nil, let context = box.value else { return }
                written.value = true
                try await context.table("notes").update(note("x", title: "during push"))
                let queue = try await context.queuedOperations()
                try expectEqual(queue.map(\.kind), [.insert, .update], "queue while the insert is in flight")
                try expectEqual(queue.first?.state, .attempted, "state of the operation in flight")
                try expectEqual(queue.first?.item?["title"], "before", "the operation in flight is not rewritten")
            })
            box.value = a
            // The context's remote holds the hook, which holds the box: empty it at the end, or
            // the context and everything it holds are never freed.
            defer { box.value = nil }
            try await a.table("notes").insert(note("x", title: "before"))
            let summary = try await a.push()
            try expectEqual(summary.applied, 2, "both operations applied")
            try expectEqual(summary.conflictsResolved + summary.failed, 0, "conflicts or failures")
            try expectEqual(try await a.queuedOperationCount(), 0, "queue after push")
            let local = try await a.table("notes").get("x")
            try expectEqual(local?["title"], "during push", "the local edit survived the push response")
            let b = try await world.client("b")
            try await b.pull("notes")
            let remote = try await b.table("notes").get("x")
            try expectEqual(remote?["title"], "during push", "title at b")
            try expectEqual(remote?.version, local?.version, "versions at a and b")
        }),
    ]

    /// A and B share record r; A changes the title and pushes; B changes the body and pushes.
    static func conflict(_ world: ScenarioWorld, resolver: any ConflictResolver, clientLater: Bool = true,
                         file: String = #fileID, line: Int = #line)
        async throws -> (a: SyncContext, b: SyncContext, b2: SyncContext, push: PushSummary) {
        let a = try await world.client("a")
        let b = try await world.client("b", options: SyncOptions(conflictResolver: resolver))
        try await a.table("notes").insert(note("r", title: "t0", body: "b0"))
        try await a.push()
        try await b.pull("notes")
        if clientLater {
            try await a.table("notes").update(note("r", title: "tA", body: "b0"))
            try await a.push()
            try await Task.sleep(nanoseconds: 5_000_000)
            try await b.table("notes").update(note("r", title: "t0", body: "bB"))
        } else {
            try await b.table("notes").update(note("r", title: "t0", body: "bB"))
            try await Task.sleep(nanoseconds: 5_000_000)
            try await a.table("notes").update(note("r", title: "tA", body: "b0"))
            try await a.push()
        }
        let push = try await must(await b.push(), "b's push", file: file, line: line)
        let c = try await world.client("c-\(UUID().uuidString.prefix(8))")
        try await c.pull("notes")
        return (a, b, c, push)
    }

    static func expectTitleBody(_ context: SyncContext, _ title: String, _ body: String, _ who: String,
                                file: String = #fileID, line: Int = #line) async throws {
        let r = try await context.table("notes").get("r")
        try expectEqual(r?["title"], .string(title), "title at \(who)", file: file, line: line)
        try expectEqual(r?["body"], .string(body), "body at \(who)", file: file, line: line)
    }

    static let conflictCases: [ScenarioCase] = [
        ("server wins", { world in
            let (_, b, server, push) = try await conflict(world, resolver: ConflictPolicy.serverWins)
            try expectEqual(push.conflictsResolved, 1, "conflicts resolved")
            try await expectTitleBody(server, "tA", "b0", "the server")
            try await expectTitleBody(b, "tA", "b0", "b")
            try expectEqual(try await b.queuedOperationCount(), 0, "b's queue")
        }),
        ("client wins", { world in
            let (_, b, server, _) = try await conflict(world, resolver: ConflictPolicy.clientWins)
            try await expectTitleBody(server, "t0", "bB", "the server")
            try await expectTitleBody(b, "t0", "bB", "b")
            try expectEqual(try await b.table("notes").get("r")?.version, try await server.table("notes").get("r")?.version, "b's version")
        }),
        ("last writer wins: the later client edit wins", { world in
            let (_, _, server, _) = try await conflict(world, resolver: ConflictPolicy.lastWriterWins, clientLater: true)
            try await expectTitleBody(server, "t0", "bB", "the server")
        }),
        ("last writer wins: the later server edit wins", { world in
            let (_, b, server, _) = try await conflict(world, resolver: ConflictPolicy.lastWriterWins, clientLater: false)
            try await expectTitleBody(server, "tA", "b0", "the server")
            try await expectTitleBody(b, "tA", "b0", "b")
        }),
        ("field-level merge keeps both edits", { world in
            let (a, b, server, _) = try await conflict(world, resolver: ConflictPolicy.fieldLevelMerge)
            try await expectTitleBody(server, "tA", "bB", "the server")
            try await expectTitleBody(b, "tA", "bB", "b")
            try await a.pull("notes")
            try await expectTitleBody(a, "tA", "bB", "a")
        }),
        ("a resolver's merged record is sent", { world in
            let resolver = ClosureConflictResolver { conflict in
                .merged(Record(id: conflict.itemId, fields: ["title": "merged", "body": "merged", "n": 7]))
            }
            let (_, b, server, _) = try await conflict(world, resolver: resolver)
            try await expectTitleBody(server, "merged", "merged", "the server")
            try await expectTitleBody(b, "merged", "merged", "b")
        }),
        ("discarding the client's change removes the local copy until the next pull", { world in
            let (_, b, _, _) = try await conflict(world, resolver: ClosureConflictResolver { _ in .discardClient })
            try expectEqual(try await b.table("notes").get("r"), nil, "b's copy after discard")
            try expectEqual(try await b.queuedOperationCount(), 0, "b's queue")
            try await b.pull("notes")
            try await expectTitleBody(b, "tA", "b0", "b after pull")
        }),
        ("a conflict left for the app waits in operation errors without blocking other items", { world in
            let (_, b, server, push) = try await conflict(world, resolver: ClosureConflictResolver { _ in .leaveForApp })
            try expectEqual(push.failed, 1, "failed operations")
            let errors = try await b.operationErrors()
            try expectEqual(errors.count, 1, "operation errors")
            try expectEqual(errors.first?.status, 409, "status")
            try expectEqual(errors.first?.serverRecord?["title"], "tA", "server record in the error")
            try await expectTitleBody(b, "t0", "bB", "b (kept local)")
            try await b.table("notes").insert(note("other", title: "o"))
            try await b.push()
            try await server.pull("notes")
            try expectEqual(try await server.table("notes").get("other")?["title"], "o", "another item was pushed")
            try await b.resolve(errors[0], with: .retry)
            try await b.push()
            try await server.pull("notes")
            try await expectTitleBody(server, "t0", "bB", "the server after retry")
            try expectEqual(try await b.operationErrors().count, 0, "errors after retry")
            try expectEqual(try await b.queuedOperationCount(), 0, "b's queue after retry")
        }),
    ]

    static let purgeCases: [ScenarioCase] = [
        ("purge refuses while operations are pending, unless forced", { world in
            let a = try await world.client("a")
            try await a.table("notes").insert(note("x"))
            try await expectThrows(.pendingOperations, "purge with a pending insert") {
                try await a.purge("notes")
            }
            try expectEqual(try await a.table("notes").count(), 1, "records after the refused purge")
            try expectEqual(try await a.queuedOperationCount(), 1, "queue after the refused purge")
            try await a.purge("notes", force: true)
            try expectEqual(try await a.table("notes").count(), 0, "records after the forced purge")
            try expectEqual(try await a.queuedOperationCount(), 0, "queue after the forced purge")
            try expectEqual(try await a.push().sent, 0, "nothing is sent after the forced purge")
        }),
        ("purge of a query removes only matching records and resets cursors", { world in
            let a = try await world.client("a"), b = try await world.client("b")
            for i in 0..<5 { try await b.table("notes").insert(note("p\(i)", n: Int64(i))) }
            try await b.push()
            try await a.pull("notes", queryId: "q")
            try expect(try await a.cursor(table: "notes", queryId: "q") != nil, "a cursor is stored")
            try await a.purge("notes", query: Query(Field("n") < 3))
            try expectEqual(try await a.table("notes").query().map(\.id), ["p3", "p4"], "records after purge")
            try expectEqual(try await a.cursor(table: "notes", queryId: "q"), nil, "cursor after purge")
            let again = try await a.pull("notes", queryId: "q")
            try expectEqual(again.added, 3, "records brought back by the next pull")
            try expectEqual(again.received, 5, "records received (the pull restarted from the beginning)")
            try expectEqual(try await a.table("notes").count(), 5, "records after the pull")
        }),
    ]

    static let incrementalCases: [ScenarioCase] = [
        ("a query id pulls only what changed since its cursor", { world in
            let a = try await world.client("a"), b = try await world.client("b")
            for i in 0..<5 { try await b.table("notes").insert(note("i\(i)", n: Int64(i))) }
            try await b.push()
            let first = try await a.pull("notes", queryId: "q")
            try expect(first.isFullSync, "the first pull is a full sync")
            try expectEqual(first.added, 5, "added by the first pull")
            try await b.table("notes").update(note("i0", title: "changed"))
            try await b.table("notes").insert(note("i5", n: 5))
            try await b.push()
            let second = try await a.pull("notes", queryId: "q")
            try expect(!second.isFullSync, "the second pull is a delta sync")
            try expectEqual([second.added, second.updated, second.deleted], [1, 1, 0], "added, updated, deleted")
            let third = try await a.pull("notes", queryId: "q")
            try expectEqual(third.added + third.updated + third.deleted, 0, "changes in a pull with nothing new")
            let full = try await a.pull("notes")
            try expect(full.isFullSync, "a pull without a query id is full")
            try expectEqual(full.received, 6, "a full pull receives every record")
            try expectEqual(full.added + full.updated, 0, "records changed by a full pull of unchanged data")
        }),
        ("a filtered pull brings only matching records", { world in
            let a = try await world.client("a"), b = try await world.client("b")
            for i in 0..<10 { try await b.table("notes").insert(note("f\(i)", n: Int64(i))) }
            try await b.push()
            let pulled = try await a.pull("notes", query: Query(Field("n") >= 7), queryId: "big")
            try expectEqual(pulled.added, 3, "records with n >= 7")
            try expectEqual(try await a.table("notes").query(Query(order: [SortKey("n")])).map(\.id), ["f7", "f8", "f9"], "ids")
        }),
        ("pages are applied one by one with their cursor", { world in
            let a = try await world.client("a", options: SyncOptions(pullPageSize: 3))
            let b = try await world.client("b")
            try await b.transaction { tx in
                for i in 0..<10 { try tx.insert(note("pg\(i)", n: Int64(i)), into: "notes") }
            }
            try await b.push()
            let pulled = try await a.pull("notes", queryId: "q")
            try expectEqual(pulled.pages, 4, "pages of 3 for 10 records")
            try expectEqual(pulled.added, 10, "records added")
        }),
        ("a page naming an id more than once ends as its rows applied one by one", { world in
            let pages = LateBox<[PullPage]>()
            let a = try await world.client("a", pulling: pages)
            func row(_ id: String, _ version: String, deleted: Bool = false) -> Record {
                var record = deleted ? Record(id: id) : note(id, title: "\(id) \(version)")
                record.version = version
                record.updatedAt = Timestamp(millisecondsSince1970: 1_700_000_000_000)
                record.deleted = deleted
                return record
            }
            pages.value = [PullPage(records: [row("e", "1"), row("f", "1"), row("g", "1")], nextCursor: "1", remaining: 0)]
            try expectEqual(try await a.pull("notes", queryId: "q").added, 3, "rows the first page added")
            pages.value = [PullPage(records: [
                row("a", "1"), row("a", "2"),                   // added, then updated
                row("b", "1"), row("b", "2", deleted: true),    // added, then deleted
                row("c", "1", deleted: true),                   // a tombstone of a row never held
                row("e", "1"),                                  // unchanged
                row("f", "2"),                                  // updated
                row("g", "2", deleted: true), row("g", "3"),    // deleted, then added again
                row("d", "1"),                                  // added
            ], nextCursor: "2", remaining: 0)]
            let pulled = try await a.pull("notes", queryId: "q")
            try expectEqual([pulled.added, pulled.updated, pulled.deleted], [4, 2, 2], "added, updated, deleted")
            let held = try await a.table("notes").query(Query(order: [SortKey("id")]))
            try expectEqual(held.map(\.id), ["a", "d", "e", "f", "g"], "the rows held")
            try expectEqual(held.map { $0.version ?? "-" }, ["2", "1", "1", "2", "3"], "their versions")
            try expectEqual(held.map { $0["title"] }, ["a 2", "d 1", "e 1", "f 2", "g 3"].map(Value.string), "their titles")
        }),
    ]

    static let implicitCases: [ScenarioCase] = [
        ("pulling a table with pending operations pushes them first", { world in
            let a = try await world.client("a"), b = try await world.client("b")
            try await a.table("notes").insert(note("x", title: "from a"))
            try await a.pull("notes")
            try expectEqual(try await a.queuedOperationCount(), 0, "a's queue after its pull")
            try expect(try await a.table("notes").get("x")?.version != nil, "x has a server version at a")
            try await b.pull("notes")
            try expectEqual(try await b.table("notes").get("x")?["title"], "from a", "x at b")
        }),
        ("a pull never overwrites a record with a queued operation", { world in
            let a = try await world.client("a", options: SyncOptions(conflictResolver: ClosureConflictResolver { _ in .leaveForApp }))
            let b = try await world.client("b")
            try await a.table("notes").insert(note("r", title: "t0"))
            try await a.push()
            try await b.pull("notes")
            try await b.table("notes").update(note("r", title: "from b"))
            try await b.push()
            try await a.table("notes").update(note("r", title: "from a"))
            let pulled = try await a.pull("notes")
            try expectEqual(pulled.skippedPending, 1, "remote changes skipped for the pending record")
            try expectEqual(try await a.table("notes").get("r")?["title"], "from a", "a's local edit")
            try expectEqual(try await a.operationErrors().count, 1, "the conflict waits for the app")
        }),
    ]
}
