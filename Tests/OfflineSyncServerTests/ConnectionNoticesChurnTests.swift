import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// A notification connection's subscriptions follow the identity's large groups: a group it
/// leaves stops costing it a subscription, however often memberships churn.
@Suite("A connection keeps no relay for a group its identity left")
struct ConnectionNoticesChurnTests {
    static func insert(_ id: String, _ table: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)-\(UUID())", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields),
                      baseVersion: nil)
    }

    @Test("bob joins and leaves three large lists in turn: his connection's subscriptions go back to his own each time")
    func leftGroupsAreDropped() async throws {
        // A fan-out limit of 2: a list of four members is large, heard through its topic.
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: true), groupFanoutLimit: 2) { live in
            let feed = try #require(live.server.feed as? LocalChangeFeed)
            let alice = try await live.remote("alice"), bob = try await live.remote("bob")
            let heard = EventLog(bob.changes())
            #expect(await heard.waitFor(.subscribed))
            let own = feed.subscriptionCount
            for round in 1...3 {
                let list = "L\(round)"
                _ = try await alice.push([Self.insert(list, "lists", ["name": .string(list)])] + ["alice", "bob", "carol", "dan"].map {
                    Self.insert("m-\(list)-\($0)", "list_members", ["list_id": .string(list), "user_id": .string($0)])
                })
                #expect(await eventually(timeout: .seconds(20)) { feed.subscriptionCount == own + 1 },
                        "round \(round): bob's connection does not hear \(list) (\(feed.subscriptionCount) subscriptions)")
                _ = try await alice.push([PushOperation(id: "op-leave-\(list)", table: "list_members", itemId: "m-\(list)-bob",
                                                        kind: .delete, item: nil, baseVersion: nil)])
                #expect(await eventually(timeout: .seconds(20)) { feed.subscriptionCount == own },
                        "round \(round): bob's connection still relays \(list) (\(feed.subscriptionCount) subscriptions)")
            }
            await heard.stop()
        }
    }
}
