import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A move-in's sweep of a group counts what remains once and then subtracts each page's rows,
/// while nothing is committed to a shared table. Every page's count must be the one a fresh
/// count gives: a service opened anew for each page (nothing remembered) answers the same
/// request, page by page, also after a todo joins the list in the middle of the sweep.
@Suite("A sweep's remaining count, kept between pages, equals a fresh count")
struct SweepRemainingTests {
    static func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    @Test("each page's remaining count and rows agree with a service that counts afresh")
    func keptCountsAgreeWithFreshOnes() async throws {
        try await withTemporaryDirectory { directory in
            let rules = sharedListsRules(ownerReadsMembers: false)
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let service = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: 1)
            var setup = [Self.insert("lists", "L", ["name": "groceries"]),
                         Self.insert("list_members", "m-alice", ["list_id": "L", "user_id": "alice"])]
            setup += (0..<23).map { Self.insert("todos", String(format: "t%02d", $0), ["list_id": "L", "title": .string("todo \($0)")]) }
            _ = try await service.push(identity: "alice", setup)
            _ = try await service.push(identity: "alice", [Self.insert("list_members", "m-bob", ["list_id": "L", "user_id": "bob"])])

            var cursor: String?
            var held: Set<String> = []
            var pages = 0
            while true {
                let request = PullRequest(table: "todos", cursor: cursor, limit: 4)
                let page = try await service.pull(identity: "bob", request)
                let fresh = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: 1)
                    .pull(identity: "bob", request)
                #expect(page.remaining == fresh.remaining, "page \(pages): remaining \(page.remaining), counted afresh \(fresh.remaining)")
                #expect(page.records.map(\.id) == fresh.records.map(\.id))
                #expect(page.nextCursor == fresh.nextCursor)
                held.formUnion(page.records.map(\.id))
                cursor = page.nextCursor
                pages += 1
                if pages == 2 {
                    // A commit in the middle of the sweep: the kept count no longer holds.
                    _ = try await service.push(identity: "alice", [Self.insert("todos", "t23", ["list_id": "L", "title": "late"])])
                }
                if page.remaining == 0 { break }
                #expect(pages < 20, "the sweep does not end")
                if pages >= 20 { break }
            }
            #expect(held == Set((0..<24).map { String(format: "t%02d", $0) }))
            #expect(pages >= 6)
            try await store.close()
        }
    }
}
