import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Groups at every size, in process: random writes (lists shared and unshared, todos added,
/// edited, deleted and moved between lists) interleaved page by page with pulls of one to three
/// rows, so memberships end and begin while a pull is mid-way; small fan-out limits make
/// lists cross between small and large both ways. After each pull that reaches the end of its
/// table, the rows a client holds are exactly those the oracle says its identity may read; no
/// page ever carries a row the identity may not read, nor removes an id it could never read.
@Suite("Groups small and large: page-by-page pulls interleaved with shares and revocations, against the oracle")
struct GroupScaleTests {
    static let identities = ["ann", "ben", "cat", "dan", "eve"]

    /// The oracle's view of every identity, by table and id, as versions.
    static func views(_ service: OfflineSyncService, includingTombstones: Bool = false) async throws -> [String: [String: [String: String]]] {
        var all: [String: [String: [String: String]]] = [:]
        for identity in identities {
            let view = try await sharedListsOracle(serverStore: service.store, identity: identity, includingTombstones: includingTombstones)
            all[identity] = view.mapValues { $0.mapValues { $0.version ?? "" } }
        }
        return all
    }

    /// 20 seeds, or `OFFLINE_SYNC_SHARED_SEEDS` of them (for `make soak`).
    static let seedCount = Int(ProcessInfo.processInfo.environment["OFFLINE_SYNC_SHARED_SEEDS"] ?? "") ?? 20

    @Test("random writes and pulls of one to three rows, fan-out limits 1 to 3, on memory and SQLite",
          arguments: 0..<seedCount)
    func interleaved(seed: Int) async throws {
        try await withTemporaryDirectory { directory in
            let limit = seed % 3 + 1
            let store: any LocalStore = seed % 2 == 0 ? InMemoryStore()
                : try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false),
                                                       groupFanoutLimit: limit)
            var random = SplitMix64(seed: UInt64(seed) &* 0x2545_F491_4F6C_DD1D &+ 11)
            let context = "seed \(seed), fan-out limit \(limit)"
            var held: [String: [String: [String: String]]] = [:]
            var cursors: [String: [String: String]] = [:]
            /// The ids each identity could ever read (tombstones included) or wrote.
            var everSeen: [String: [String: Set<String>]] = [:]
            var lists: [String] = [], todos: [String] = []
            var step = 0

            func write() async throws {
                step += 1
                let who = Self.identities[Int(random.next() % UInt64(Self.identities.count))]
                var operations: [PushOperation] = []
                func op(_ kind: OperationKind, _ table: String, _ id: String, _ fields: [String: Value]? = nil) {
                    operations.append(PushOperation(id: "op\(step)-\(operations.count)", table: table, itemId: id, kind: kind,
                                                    item: fields.map { Record(id: id, fields: $0) }, baseVersion: nil))
                }
                switch random.next() % 7 {
                case 0:
                    let list = "L\(step)"
                    lists.append(list)
                    op(.insert, "lists", list, ["name": .string(list)])
                    op(.insert, "list_members", "m-\(list)-\(who)", ["list_id": .string(list), "user_id": .string(who)])
                case 1 where !lists.isEmpty, 2 where !lists.isEmpty:
                    let list = lists[Int(random.next() % UInt64(lists.count))]
                    let member = Self.identities[Int(random.next() % UInt64(Self.identities.count))]
                    let owner = try await service.store.read { try $0.record(in: "lists", id: list)?["__owner"].stringValue }
                    // The list's owner adds or removes the member (the membership row's id names both).
                    let id = "m-\(list)-\(member)"
                    let exists = try await service.store.read { try $0.record(in: "list_members", id: id).map { !$0.deleted } } ?? false
                    if exists {
                        op(.delete, "list_members", id)
                    } else {
                        op(.insert, "list_members", id, ["list_id": .string(list), "user_id": .string(member)])
                    }
                    try await push(as: owner ?? who)
                    return
                case 3 where !lists.isEmpty:
                    let id = "t\(step)"
                    todos.append(id)
                    op(.insert, "todos", id, ["list_id": .string(lists[Int(random.next() % UInt64(lists.count))]), "title": "new"])
                case 4 where !todos.isEmpty, 5 where !todos.isEmpty:
                    let id = todos[Int(random.next() % UInt64(todos.count))]
                    let list = lists[Int(random.next() % UInt64(lists.count))]
                    // An edit that may move the todo to another list.
                    op(.update, "todos", id, ["list_id": .string(list), "title": .string("edited \(step)")])
                case 6 where !todos.isEmpty:
                    op(.delete, "todos", todos[Int(random.next() % UInt64(todos.count))])
                default:
                    return
                }
                try await push(as: who)

                /// Pushes the operations; the writer knows the ids it wrote, readable or not.
                func push(as writer: String) async throws {
                    _ = try await service.push(identity: try Identity(writer), operations)
                    for operation in operations { everSeen[writer, default: [:]][operation.table, default: []].insert(operation.itemId) }
                }
            }

            /// One page for `identity` of `table`; checks it leaks nothing; returns whether
            /// the table is read to its end.
            func pullPage(_ identity: String, _ table: String) async throws -> Bool {
                let page = try await service.pull(identity: try Identity(identity), PullRequest(
                    table: table, cursor: cursors[identity]?[table], limit: Int(random.next() % 3) + 1))
                let view = try await Self.views(service)[identity]?[table] ?? [:]
                var rows = held[identity]?[table] ?? [:]
                for record in page.records {
                    #expect(view[record.id] == record.version || record.deleted,
                            "\(context): \(identity) was sent \(table)/\(record.id), which it may not read")
                    rows[record.id] = record.deleted ? nil : record.version
                }
                // A tombstone sent tells its id (the oracle counts live rows only).
                everSeen[identity, default: [:]][table, default: []].formUnion(page.records.map(\.id))
                let seen = everSeen[identity]?[table] ?? []
                for id in page.removed {
                    #expect(seen.contains(id), "\(context): \(identity) was told of \(table)/\(id), which it never could read")
                    rows[id] = nil
                }
                held[identity, default: [:]][table] = rows
                cursors[identity, default: [:]][table] = page.nextCursor
                return page.remaining == 0
            }

            func noteVisible() async throws {
                for (identity, tables) in try await Self.views(service, includingTombstones: true) {
                    for (table, rows) in tables { everSeen[identity, default: [:]][table, default: []].formUnion(rows.keys) }
                }
            }

            for _ in 0..<150 {
                if random.next() % 2 == 0 {
                    try await write()
                    try await noteVisible()
                } else {
                    let identity = Self.identities[Int(random.next() % UInt64(Self.identities.count))]
                    let table = sharedListsTables[Int(random.next() % 3)]
                    if try await pullPage(identity, table) {
                        let expected = try await Self.views(service)[identity]?[table] ?? [:]
                        #expect(held[identity]?[table] ?? [:] == expected,
                                "\(context), step \(step): \(identity)'s \(table) differs from what it may read")
                    }
                }
            }
            for identity in Self.identities {
                for table in sharedListsTables {
                    var pages = 0
                    while try await !pullPage(identity, table) {
                        pages += 1
                        try #require(pages < 2000, "\(context): \(identity)'s pull of \(table) does not end")
                    }
                    let expected = try await Self.views(service)[identity]?[table] ?? [:]
                    #expect(held[identity]?[table] ?? [:] == expected, "\(context), at the end: \(identity)'s \(table)")
                }
            }
            if let store = store as? SQLiteStore { try await store.close() }
        }
    }
}
