import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A store whose memberships were written before group rows existed gets them at open, so a
/// large group's writes stop fanning out to each member.
@Suite("Group rows are counted when a store from before them opens")
struct GroupRowsUpgradeTests {
    static func insert(_ id: String, _ table: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    /// Own-log entries of the members (not the writer) for `table`.
    static func ownEntries(_ store: any LocalStore, _ table: String) async throws -> Int {
        try await store.read { txn in
            try txn.records(in: "__srv_view", matching: .all).filter { $0["table"] == .string(table) && $0["identity"] != "alice" }.count
        }
    }

    @Test("a large list without a group row is counted and converted at open; its next write adds no own-log entry per member")
    func groupRowsAreBackfilled() async throws {
        let store = InMemoryStore()
        let rules = sharedListsRules(ownerReadsMembers: true)
        let members = ["alice", "bob", "carol", "dan", "erin"]
        do {
            let service = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: 2)
            _ = try await service.push(identity: "alice", [Self.insert("L1", "lists", ["name": "team"])] + members.map {
                Self.insert("m-\($0)", "list_members", ["list_id": "L1", "user_id": .string($0)])
            })
        }
        // As a version before group rows left the store: no group row, no marked reach, no
        // note that groups were counted.
        try await store.write { txn in
            for table in ["__srv_groups"] {
                let rows = try txn.records(in: table, matching: .all)
                _ = try txn.delete(ids: rows.map(\.id), in: table)
            }
            for var reach in try txn.records(in: "__srv_reach", matching: .all) {
                reach["marked"] = false
                try txn.upsert(reach, in: "__srv_reach")
            }
            _ = try txn.delete(id: "__groups_counted", in: "__srv_tables")
        }
        #expect(try await store.read { try $0.count(in: "__srv_groups", matching: .all) } == 0)

        let upgraded = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: 2)
        let groups = try await store.read { try $0.records(in: "__srv_groups", matching: .all) }
        #expect(groups.count == 1)
        #expect(groups.first?["members"] == .int(Int64(members.count)))
        #expect(groups.first?["mode"] == "large")
        let marked = try await store.read { try $0.records(in: "__srv_reach", matching: .all) }.filter { $0["marked"] == true }
        #expect(marked.count >= members.count, "each member reads the list's log")

        let before = try await Self.ownEntries(store, "todos")
        _ = try await upgraded.push(identity: "alice", [Self.insert("t1", "todos", ["list_id": "L1", "title": "plan"])])
        #expect(try await Self.ownEntries(store, "todos") == before, "the write fanned out to the members")
        // Every member still reads the todo, through the list's log.
        for member in members {
            let page = try await upgraded.pull(identity: try Identity(member), PullRequest(table: "todos"))
            #expect(page.records.map(\.id) == ["t1"], "\(member)")
        }
    }

    @Test("a group that cannot be converted at open stops the open with the store's error; the other groups are converted all the same")
    func unreadableRowStopsTheOpen() async throws {
        let store = InMemoryStore()
        let rules = sharedListsRules(ownerReadsMembers: true)
        do {
            let service = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: 2)
            _ = try await service.push(identity: "alice", [Self.insert("L1", "lists", ["name": "one"]), Self.insert("L2", "lists", ["name": "two"])]
                + ["alice", "bob", "carol"].flatMap { member in ["L1", "L2"].map { list in
                    Self.insert("m-\(list)-\(member)", "list_members", ["list_id": .string(list), "user_id": .string(member)])
                } })
        }
        // As a version before group rows left it, and with bob's reach row of L1 unreadable
        // (its identity is gone: no version writes that).
        try await store.write { txn in
            _ = try txn.delete(ids: try txn.records(in: "__srv_groups", matching: .all).map(\.id), in: "__srv_groups")
            for var reach in try txn.records(in: "__srv_reach", matching: .all) {
                reach["marked"] = false
                if reach["identity"] == "bob", case .string(let group) = reach["group"], group.contains("L1") { reach["identity"] = .null }
                try txn.upsert(reach, in: "__srv_reach")
            }
            _ = try txn.delete(id: "__groups_counted", in: "__srv_tables")
        }
        // Before, the open succeeded, L1 stayed converting (every write to it fanning out to
        // each member, with nothing said), and L2, after it, was never converted.
        do {
            _ = try await OfflineSyncService(store: store, rules: rules, groupFanoutLimit: 2)
            Issue.record("the open succeeded over an unreadable reach row")
        } catch let error as SyncError {
            #expect(error.code == .corrupted, "\(error)")
            #expect(error.message.contains("__srv_reach"), "\(error.message)")
        }
        let modes = try await store.read { txn in try txn.records(in: "__srv_groups", matching: .all).map(\.["mode"]) }
        #expect(modes.sorted { "\($0)" < "\($1)" } == ["converting", "large"], "\(modes)")
    }
}
