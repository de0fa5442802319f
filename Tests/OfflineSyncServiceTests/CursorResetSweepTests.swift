import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A cursor reset ends with the local table equal to what the identity may read now: rows
/// seen through a grant it lost leave, queued local writes stay.
// Two minutes: the limit catches a hang; one minute was reached under the whole suite's load
// on two cores, with nothing hung.
@Suite("A reset cursor sweeps the rows the identity may no longer read", .timeLimit(.minutes(2 * sanitizerSlowdown)))
struct CursorResetSweepTests {
    static let admin = Condition(claim: "roles", values: ["admin"])
    /// `reports` is read by admins only; `notes` is owner-only.
    static let rules = SyncRules(tables: [
        "reports": TableRules(read: [Grant(.everyone, when: [admin])], write: [Grant(.everyone, when: [admin])]),
    ])

    static func insert(_ id: String, _ title: String) -> PushOperation {
        PushOperation(id: "op-\(id)", table: "reports", itemId: id, kind: .insert, item: Record(id: id, fields: ["title": .string(title)]),
                      baseVersion: nil)
    }

    static func ids(_ context: SyncContext) async throws -> [String] {
        try await context.table("reports").query().map(\.id).sorted()
    }

    @Test("a device that read reports with the admin role and syncs without it keeps none of them, but keeps its queued draft")
    func lostRoleSweeps() async throws {
        try await withTemporaryDirectory { directory in
            let service = try await OfflineSyncService(store: InMemoryStore(), rules: Self.rules)
            _ = try await service.push(claims: Claims(identity: "boss", roles: ["admin"]), [
                Self.insert("r1", "q1"), Self.insert("r2", "q2"), Self.insert("r3", "q3"),
            ])
            let store = try await SQLiteStore(path: directory.appendingPathComponent("device.sqlite").path)
            let withRole = try await SyncContext(store: store, remote: service.remote(for: Claims(identity: "u", roles: ["admin"])))
            try await withRole.defineTable(TableSchema("reports"))
            try await withRole.sync(["reports"])
            #expect(try await Self.ids(withRole) == ["r1", "r2", "r3"])

            // The role is gone: a new token, the same device. A draft written offline is queued.
            // `clientWins` keeps a refused write (and its row) for the app instead of compensating.
            let withoutRole = try await SyncContext(store: store, remote: service.remote(for: Claims(identity: "u")),
                                                    options: SyncOptions(conflictResolver: ConflictPolicy.clientWins))
            _ = try await withoutRole.table("reports").insert(Record(id: "draft", fields: ["title": "mine"]))
            var events = withoutRole.events().makeAsyncIterator()
            try await withoutRole.sync(["reports"])
            // What the identity may read now is nothing; the draft stays with its operation
            // (refused by the server, it waits in operationErrors for the app).
            #expect(try await service.pull(claims: Claims(identity: "u"), PullRequest(table: "reports")).records.isEmpty)
            #expect(try await Self.ids(withoutRole) == ["draft"])
            #expect(try await withoutRole.operationErrors().map(\.itemId) == ["draft"])
            var removed: [String] = []
            while let event = await events.next() {
                if case .removedFromView(_, let ids) = event { removed += ids }
                if case .modelSynced = event { break }
            }
            #expect(removed.sorted() == ["r1", "r2", "r3"])
            // Nothing is left of the sweep: no marks, no note; the next pull is incremental.
            #expect(try await store.read { try $0.count(in: "__sweep_marks", matching: .all) } == 0)
            #expect(try await store.read { try $0.records(in: SystemTables.config, matching: .all) }
                        .allSatisfy { $0["keyType"] != "sweep" })
            try await withoutRole.sync(["reports"])
            #expect(try await Self.ids(withoutRole) == ["draft"])

            // The role comes back: the view is resent, and every report returns.
            let again = try await SyncContext(store: store, remote: service.remote(for: Claims(identity: "u", roles: ["admin"])))
            try await again.sync(["reports"])
            #expect(try await Self.ids(again).filter { $0 != "draft" } == ["r1", "r2", "r3"])
            try await store.close()
        }
    }

    @Test("a filtered pull's reset sweeps nothing: its resend holds only the rows its predicate matches")
    func filteredResetDoesNotSweep() async throws {
        try await withTemporaryDirectory { directory in
            let service = try await OfflineSyncService(store: InMemoryStore(), rules: Self.rules)
            _ = try await service.push(claims: Claims(identity: "boss", roles: ["admin"]), [
                Self.insert("r1", "q1"), Self.insert("r2", "q2"), Self.insert("r3", "q3"),
            ])
            let store = try await SQLiteStore(path: directory.appendingPathComponent("device.sqlite").path)
            let admin = Claims(identity: "u", roles: ["admin"])
            let only = Query(Field("title") == "q1")
            let first = try await SyncContext(store: store, remote: service.remote(for: admin))
            try await first.defineTable(TableSchema("reports"))
            try await first.sync(["reports"])
            _ = try await first.pull("reports", query: only, queryId: "only-q1")
            // The filtered cursor's reading mode changes twice (without the role, then with it
            // again): each time its pull is reset and resends what the filter matches.
            let without = try await SyncContext(store: store, remote: service.remote(for: Claims(identity: "u")))
            _ = try await without.pull("reports", query: only, queryId: "only-q1")
            let back = try await SyncContext(store: store, remote: service.remote(for: admin))
            let summary = try await back.pull("reports", query: only, queryId: "only-q1")
            #expect(summary.isFullSync, "the filtered pull was not reset")
            #expect(try await Self.ids(back) == ["r1", "r2", "r3"], "a filtered resend swept rows outside its filter")
            try await store.close()
        }
    }

    @Test("a sweep cut short by a stopped pull resumes marking and sweeps when a later pull ends")
    func resumedSweep() async throws {
        try await withTemporaryDirectory { directory in
            let service = try await OfflineSyncService(store: InMemoryStore(), rules: Self.rules)
            _ = try await service.push(claims: Claims(identity: "boss", roles: ["admin"]), (1...5).map { Self.insert("r\($0)", "q") })
            let store = try await SQLiteStore(path: directory.appendingPathComponent("device.sqlite").path)
            let withRole = try await SyncContext(store: store, remote: service.remote(for: Claims(identity: "u", roles: ["admin"])),
                                                 options: SyncOptions(pullPageSize: 2))
            try await withRole.defineTable(TableSchema("reports"))
            try await withRole.sync(["reports"])
            #expect(try await Self.ids(withRole).count == 5)
            // A stale row the server never resends: written straight to the store, as a row
            // seen through a grant since lost would be, with no queued operation.
            try await store.write { try $0.upsert(Record(id: "stale", fields: ["title": "gone"]), in: "reports") }
            // The table's epoch changes on the server side by a role round trip: without the
            // role the view is empty, so bring the role back at once for the resend.
            let other = try await SyncContext(store: store, remote: service.remote(for: Claims(identity: "u")),
                                              options: SyncOptions(pullPageSize: 2))
            try await other.sync(["reports"])
            #expect(try await Self.ids(other).isEmpty)
            let back = try await SyncContext(store: store, remote: service.remote(for: Claims(identity: "u", roles: ["admin"])),
                                             options: SyncOptions(pullPageSize: 2))
            try await store.write { try $0.upsert(Record(id: "stale", fields: ["title": "gone"]), in: "reports") }
            // The resend is cut after its first page: the pull's task is cancelled once a page
            // has been applied (its progress event), leaving the sweep's note and marks behind.
            let events = back.events()
            let pull = Task { try await back.pull("reports", queryId: "default") }
            for await event in events { if case .pullProgress = event { pull.cancel(); break } }
            if case .failure = await pull.result {
                // Cut short: the rows seen so far are marked, the stale one is still there.
                #expect(try await Self.ids(back).contains("stale"), "the stale row went before the resend ended")
                #expect(try await store.read { try $0.count(in: "__sweep_marks", matching: .all) } > 0)
            }
            // The next pull goes on with the resend and sweeps at its end.
            _ = try await back.pull("reports", queryId: "default")
            #expect(try await Self.ids(back) == ["r1", "r2", "r3", "r4", "r5"])
            try await store.close()
        }
    }
}
