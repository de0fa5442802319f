import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Two groups whose keys differ only in Unicode normalisation are two groups: the stores
/// compare their values by bytes, so everything the service keeps about a group while a push
/// runs (its members, whether it changed, whether it converts) must too.
@Suite("Group keys are compared by bytes within a push")
struct GroupKeyExactnessTests {
    static let composed = "jos\u{E9}", decomposed = "jose\u{301}"

    static func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert,
                      item: Record(id: id, fields: fields), baseVersion: nil)
    }

    static func push(_ service: OfflineSyncService, _ who: String, _ operations: [PushOperation]) async throws
        -> OfflineSyncService.PushReport {
        let report = try await service.pushReporting(claims: Claims(identity: try Identity(who)), operations)
        for result in report.results {
            guard case .applied = result.outcome else {
                Issue.record("\(result.operationId): \(result.outcome)")
                return report
            }
        }
        return report
    }

    /// Two lists, `josé` spelled both ways: ann's (with ann and cat) and ben's (with ben and cat).
    static func twoLists(fanoutLimit: Int) async throws -> OfflineSyncService {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: sharedListsRules(ownerReadsMembers: false),
                                                   groupFanoutLimit: fanoutLimit)
        for (owner, list) in [("ann", composed), ("ben", decomposed)] {
            _ = try await push(service, owner, [
                insert("lists", list, ["name": .string(owner)]),
                insert("list_members", "m-\(owner)-\(owner)", ["list_id": .string(list), "user_id": .string(owner)]),
                insert("list_members", "m-\(owner)-cat", ["list_id": .string(list), "user_id": "cat"]),
            ])
        }
        return service
    }

    /// ann's and ben's cursors at the end of their todos.
    static func cursors(_ service: OfflineSyncService) async throws -> [String: String] {
        var cursors: [String: String] = [:]
        for reader in ["ann", "ben"] {
            let page = try await service.pull(identity: try Identity(reader), PullRequest(table: "todos", limit: 100))
            #expect(page.records.isEmpty && page.remaining == 0)
            cursors[reader] = page.nextCursor
        }
        return cursors
    }

    @Test("a push into both small groups tells each group's own members")
    func smallGroupsKeepTheirOwnMembers() async throws {
        let service = try await Self.twoLists(fanoutLimit: 100)
        // ann and ben have pulled their (empty) lists: what follows reaches them through
        // their own logs, not through a first pull's sweep of their groups.
        let cursors = try await Self.cursors(service)
        // cat, a member of both, writes into both in one push.
        _ = try await Self.push(service, "cat", [
            Self.insert("todos", "t-ann", ["list_id": .string(Self.composed), "title": "for ann"]),
            Self.insert("todos", "t-ben", ["list_id": .string(Self.decomposed), "title": "for ben"]),
        ])
        for (reader, expected) in [("ann", "t-ann"), ("ben", "t-ben")] {
            let page = try await service.pull(identity: try Identity(reader), PullRequest(table: "todos", cursor: cursors[reader], limit: 100))
            #expect(page.records.map(\.id) == [expected], "\(reader)'s todos")
        }
    }

    @Test("a push into both large groups reports both as changed")
    func largeGroupsAreReportedApart() async throws {
        let service = try await Self.twoLists(fanoutLimit: 1)
        let cursors = try await Self.cursors(service)
        let report = try await Self.push(service, "cat", [
            Self.insert("todos", "t-ann", ["list_id": .string(Self.composed), "title": "for ann"]),
            Self.insert("todos", "t-ben", ["list_id": .string(Self.decomposed), "title": "for ben"]),
        ])
        let changed = report.groupsChanged["todos"] ?? []
        #expect(changed.count == 2, "\(changed)")
        // Each member's notification connection listens to its own groups, which the
        // report names: cat to both.
        for (reader, count) in [("ann", 1), ("ben", 1), ("cat", 2)] {
            let subscribed = try await service.groupSubscriptions(claims: Claims(identity: try Identity(reader)))
                .filter { $0.value.contains("todos") }.keys
            #expect(subscribed.count == count && Set(subscribed).isSubset(of: changed), "\(reader): \(subscribed) of \(changed)")
        }
        for (reader, expected) in [("ann", "t-ann"), ("ben", "t-ben")] {
            let page = try await service.pull(identity: try Identity(reader), PullRequest(table: "todos", cursor: cursors[reader], limit: 100))
            #expect(page.records.map(\.id) == [expected], "\(reader)'s todos")
        }
    }
}

/// Two shared rows whose ids differ only in Unicode normalisation are two rows in every
/// answer that gathers rows by id: a pull page read through the caller's view, a pull page
/// read in table order, and a query.
@Suite("Item ids are compared by bytes in pull pages and queries")
struct ItemIdExactnessTests {
    static let ids = [GroupKeyExactnessTests.composed, GroupKeyExactnessTests.decomposed]

    @Test("a member's pull of a list, a first one and one from a cursor, and its query hold both todos")
    func viewPagesAndQueries() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: sharedListsRules(ownerReadsMembers: false))
        _ = try await GroupKeyExactnessTests.push(service, "ann", [
            GroupKeyExactnessTests.insert("lists", "L", ["name": "L"]),
            GroupKeyExactnessTests.insert("list_members", "m-ann", ["list_id": "L", "user_id": "ann"]),
            GroupKeyExactnessTests.insert("list_members", "m-ben", ["list_id": "L", "user_id": "ben"]),
        ])
        let before = try await service.pull(identity: "ben", PullRequest(table: "todos"))
        _ = try await GroupKeyExactnessTests.push(service, "ann", Self.ids.map {
            GroupKeyExactnessTests.insert("todos", $0, ["list_id": "L", "title": .string($0)])
        })
        // ben's first pull sweeps the list; his pull from a cursor reads his own log.
        for cursor in [nil, before.nextCursor] {
            let page = try await service.pull(identity: "ben", PullRequest(table: "todos", cursor: cursor))
            #expect(page.records.map { Array($0.id.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
                    == Self.ids.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }, "from \(cursor ?? "the start")")
        }
        let rows = try await service.query(identity: "ben", table: "todos")
        #expect(Set(rows.map { ExactString($0.id) }) == Set(Self.ids.map(ExactString.init)))
        #expect(try await service.count(identity: "ben", table: "todos") == 2)
    }

    @Test("a pull of a table everyone reads holds both rows")
    func tablePages() async throws {
        let rules = SyncRules(tables: ["notes": TableRules(read: [Grant(.everyone)], write: [Grant(.everyone)])])
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: rules)
        _ = try await GroupKeyExactnessTests.push(service, "ann", Self.ids.map {
            GroupKeyExactnessTests.insert("notes", $0, ["text": .string($0)])
        })
        let page = try await service.pull(identity: "ben", PullRequest(table: "notes"))
        #expect(Set(page.records.map { ExactString($0.id) }) == Set(Self.ids.map(ExactString.init)))
        #expect(page.records.count == 2)
    }
}
