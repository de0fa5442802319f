import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A store written by the first version of group logs kept the entries of items that left a
/// group under the group's key; this version keeps them under the closed key, and its sweeps
/// read only those from the log. Opening such a store moves them, so a member's pull still
/// removes a row that left the group.
@Suite("Group logs written by the first version open with left items under the closed key")
struct GroupLogUpgradeTests {
    static func insert(_ id: String, _ table: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    /// Every todo id `identity` holds after pulling from `cursor` to the end, starting from `held`.
    static func pullTodos(_ service: OfflineSyncService, _ identity: String, from cursor: String?,
                          holding held: Set<String>) async throws -> (Set<String>, String?) {
        var held = held, cursor = cursor
        while true {
            let page = try await service.pull(identity: try Identity(identity), PullRequest(table: "todos", cursor: cursor, limit: 2))
            for record in page.records { if record.deleted { held.remove(record.id) } else { held.insert(record.id) } }
            held.subtract(page.removed)
            cursor = page.nextCursor
            if page.remaining == 0 { return (held, cursor) }
        }
    }

    @Test("an entry left under the group's key moves to the closed key, and the pulls that sweep it still remove its row")
    func closedEntriesMove() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("server.sqlite").path
            let rules = sharedListsRules(ownerReadsMembers: false)
            var store = try await SQLiteStore(path: path)
            var service = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: 1)
            _ = try await service.push(identity: "alice", [
                Self.insert("L", "lists", ["name": "shared"]), Self.insert("P", "lists", ["name": "private"]),
                Self.insert("m-alice-L", "list_members", ["list_id": "L", "user_id": "alice"]),
                Self.insert("m-alice-P", "list_members", ["list_id": "P", "user_id": "alice"]),
                Self.insert("m-bob-L", "list_members", ["list_id": "L", "user_id": "bob"]),
                Self.insert("t1", "todos", ["list_id": "L", "title": "stays"]),
                Self.insert("t2", "todos", ["list_id": "L", "title": "leaves"]),
            ])
            let (bobBefore, bobCursor) = try await Self.pullTodos(service, "bob", from: nil, holding: [])
            #expect(bobBefore == ["t1", "t2"])
            // t2 moves to alice's private list: it leaves the large group of L.
            _ = try await service.push(identity: "alice", [PushOperation(
                id: "move-t2", table: "todos", itemId: "t2", kind: .update,
                item: Record(id: "t2", fields: ["list_id": "P", "title": "leaves"]), baseVersion: nil)])
            // Bob leaves L and joins it again before he pulls: his pull then sweeps L's whole log,
            // where only the closed entry tells that t2, which he holds, left.
            _ = try await service.push(identity: "alice", [PushOperation(id: "remove-bob", table: "list_members", itemId: "m-bob-L",
                                                                         kind: .delete, item: nil, baseVersion: nil)])
            let readded = try await service.push(identity: "alice", [PushOperation(
                id: "readd-bob", table: "list_members", itemId: "m-bob-L", kind: .insert,
                item: Record(id: "m-bob-L", fields: ["list_id": "L", "user_id": "bob"]), baseVersion: nil)])
            guard case .applied = readded.first?.outcome else { Issue.record("bob was not added again"); return }

            // Make the store as the first version wrote it: every entry under its group's key,
            // and no marker.
            let moved = try await store.write { txn -> Int in
                var moved = 0
                for var row in try txn.records(in: "__srv_glog", matching: .all) {
                    guard let group = row["group"].stringValue, group.hasPrefix("x") else { continue }
                    row["group"] = .string(String(group.dropFirst()))
                    try txn.upsert(row, in: "__srv_glog")
                    moved += 1
                }
                #expect(try txn.delete(id: "__glog_closed", in: "__srv_tables"))
                return moved
            }
            #expect(moved >= 1, "t2's entry in L's log is closed")
            try await store.close()

            store = try await SQLiteStore(path: path)
            service = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: 1)
            let groups = try await store.read { txn in
                try txn.records(in: "__srv_glog", matching: Query(Field("item") == "t2" && Field("table") == "todos")).compactMap { $0["group"].stringValue }
            }
            #expect(groups.contains { $0.hasPrefix("x") }, "t2's closed entry is under the closed key again")
            #expect(try await store.read { try $0.record(in: "__srv_tables", id: "__glog_closed") } != nil)

            // Bob's pull from before the move removes t2; carol, added now, moves in t1 only.
            let (bobAfter, _) = try await Self.pullTodos(service, "bob", from: bobCursor, holding: bobBefore)
            #expect(bobAfter == ["t1"])
            _ = try await service.push(identity: "alice", [Self.insert("m-carol-L", "list_members", ["list_id": "L", "user_id": "carol"])])
            let (carol, _) = try await Self.pullTodos(service, "carol", from: nil, holding: [])
            #expect(carol == ["t1"])
            try await store.close()
        }
    }
}
