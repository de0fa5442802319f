import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncStoreKit
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// The list APIs over shared tables read the caller's view source by source and merge the
/// pages: every page and count must equal the oracle's, with rows that two grants admit
/// (a list its owner is also a member of, a membership naming its reader in a list it
/// owns), rows whose key is null, tombstones, a filter, and a member of more lists than
/// one source holds.
@Suite("Lists and counts of shared tables against the oracle")
struct SharedListTests {
    static let identities = ["ann", "ben", "cat", "dan", "eve"]

    @Test("pages in two orders, counts with and without tombstones, and a filter, for every identity",
          arguments: 0..<6)
    func listsMatchTheOracle(seed: Int) async throws {
        try await withTemporaryDirectory { directory in
            let store: any LocalStore = seed % 2 == 0 ? InMemoryStore()
                : try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: true))
            var random = SplitMix64(seed: UInt64(seed) &+ 0x51)
            func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
            func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
                PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert,
                              item: Record(id: id, fields: fields), baseVersion: nil)
            }
            func push(_ who: String, _ operations: [PushOperation]) async throws {
                for result in try await service.push(identity: try Identity(who), operations) {
                    guard case .applied = result.outcome else { Issue.record("\(result.operationId): \(result.outcome)"); return }
                }
            }
            // eve's 520 lists, ann a member of each: ann's member grant needs two sources.
            let big = (0..<520).map { "B\($0)" }
            try await push("eve", big.map { insert("lists", $0, ["name": .string($0)]) })
            try await push("eve", big.map { insert("list_members", "m-\($0)-ann", ["list_id": .string($0), "user_id": "ann"]) })
            try await push("ann", big.prefix(40).enumerated().map { index, list in
                insert("todos", "bt\(index)", ["list_id": .string(list), "title": .string("t\(index % 4)")])
            })
            // Twelve small lists with random owners and members, the owner often a member too.
            var lists: [(id: String, owner: String)] = []
            for number in 0..<12 {
                let owner = pick(Self.identities), list = "S\(number)"
                lists.append((list, owner))
                var operations = [insert("lists", list, ["name": .string(list)])]
                for member in Self.identities where random.next() % 3 == 0 {
                    operations.append(insert("list_members", "m-\(list)-\(member)", ["list_id": .string(list), "user_id": .string(member)]))
                }
                if random.next() % 4 == 0 {
                    // A membership naming no one: read through the list, never through `user_id`.
                    operations.append(insert("list_members", "m-\(list)-nobody", ["list_id": .string(list)]))
                }
                try await push(owner, operations)
            }
            // Todos, written by members (a writer must be one), some deleted afterwards.
            for number in 0..<60 {
                let list = pick(lists)
                let members = try await service.store.read { txn in
                    try txn.records(in: "list_members", matching: Query(Field("list_id") == .string(list.id) && Field(SystemField.deleted) == false))
                }.compactMap { $0["user_id"].stringValue }
                guard let writer = members.first else { continue }
                let id = "t\(number)"
                try await push(writer, [insert("todos", id, ["list_id": .string(list.id), "title": .string("t\(number % 4)")])])
                if random.next() % 5 == 0 {
                    try await push(writer, [PushOperation(id: "del-\(id)", table: "todos", itemId: id, kind: .delete, item: nil, baseVersion: nil)])
                }
            }

            for identity in Self.identities {
                let claims = try Claims(identity: Identity(identity))
                let live = try await sharedListsOracle(serverStore: store, identity: identity, ownerReadsMembers: true)
                let all = try await sharedListsOracle(serverStore: store, identity: identity, includingTombstones: true,
                                                      ownerReadsMembers: true)
                for table in sharedListsTables {
                    let context = "seed \(seed), \(identity), \(table)"
                    let expected = live[table] ?? [:]
                    #expect(try await service.count(claims: claims, table: table) == expected.count, "\(context): count")
                    #expect(try await service.count(claims: claims, table: table, includeDeleted: true) == (all[table] ?? [:]).count,
                            "\(context): count with tombstones")
                    let title: QueryPredicate = Field("title") == "t1"
                    #expect(try await service.count(claims: claims, table: table, predicate: title)
                            == expected.values.filter { $0["title"] == "t1" }.count, "\(context): filtered count")
                    for order in [[SortKey(SystemField.id)], [SortKey("title", ascending: false), SortKey(SystemField.id)]] {
                        let sorted = expected.values.sorted { QueryEvaluator.areInIncreasingOrder($0, $1, order) }.map(\.id)
                        // Small pages, or five pages of ann's 500-odd lists (each page reads every source).
                        let size = max(7, expected.count / 5 + 1)
                        var paged: [String] = []
                        while true {
                            let page = try await service.query(claims: claims, table: table, order: order, offset: paged.count, limit: size)
                            paged += page.map(\.id)
                            if page.count < size { break }
                        }
                        #expect(paged == sorted, "\(context): pages in \(order.map(\.field))")
                    }
                    let filtered = try await service.query(claims: claims, table: table, predicate: title, order: [SortKey(SystemField.id)])
                    #expect(filtered.map(\.id) == expected.values.filter { $0["title"] == "t1" }.map(\.id).sorted(by: Value.utf8Less),
                            "\(context): filtered list")
                }
            }
            if let store = store as? SQLiteStore { try await store.close() }
        }
    }
}
