import Foundation
import OfflineSync
import OfflineSyncConformance
@testable import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// The rules explainer says what the rules engine decides, for every identity and row, and
/// why: its decisions are compared with the engine's on seeded shared data, and its reasons
/// on a scripted case.
@Suite("Rules explainer: why can or can't an identity see this row")
struct RuleExplanationTests {
    static let identities = ["ann", "ben", "cat", "dan", "eve"]

    static func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    @Test("every decision equals the engine's: read, insert, update and delete, for every identity and stored row",
          arguments: 0..<4)
    func decisionsMatchTheEngine(seed: Int) async throws {
        let rules = RuleEvaluatorTests.rules
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: rules)
        var random = SplitMix64(seed: UInt64(seed) &+ 0xE7)
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        var lists: [(id: String, owner: String)] = []
        for number in 0..<6 {
            let owner = pick(Self.identities), list = "L\(number)"
            lists.append((list, owner))
            var operations = [Self.insert("lists", list, ["name": .string(list)])]
            for member in Self.identities where random.next() % 2 == 0 {
                operations.append(Self.insert("list_members", "m-\(list)-\(member)", [
                    "list_id": .string(list), "user_id": .string(member), "role": .string(pick(["editor", "viewer"])),
                ]))
            }
            _ = try await service.push(identity: try Identity(owner), operations)
        }
        for number in 0..<12 {
            let list = pick(lists)
            let writer = try await service.store.read { txn in
                try txn.records(in: "list_members", matching: Query(Field("list_id") == .string(list.id) && Field(SystemField.deleted) == false))
            }.compactMap { $0["user_id"].stringValue }.first
            guard let writer else { continue }
            _ = try await service.push(identity: try Identity(writer), [Self.insert("todos", "t\(number)", ["list_id": .string(list.id)])])
            if number % 4 == 0 {
                _ = try await service.push(identity: try Identity(writer), [
                    PushOperation(id: "del-t\(number)", table: "todos", itemId: "t\(number)", kind: .delete, item: nil, baseVersion: nil),
                ])
            }
        }
        _ = try await service.pushReporting(claims: Claims(identity: "eve", roles: ["admin"]), [Self.insert("announcements", "a1", ["text": "hello"])])
        var compared = 0
        for table in ["lists", "list_members", "todos", "announcements"] {
            let rows = try await service.store.read { txn in try txn.records(in: table, matching: .all) }
            for identity in Self.identities {
                for roles in [Set<String>(), ["admin"]] {
                    let claims = Claims(identity: try Identity(identity), roles: roles)
                    for row in rows {
                        let id = row[OfflineSyncService.Meta.item].stringValue ?? row.id
                        let explanation = try await service.explain(claims: claims, table: table, id: id)
                        let inserted = { var copy = row; copy.deleted = false; copy.fields[OfflineSyncService.Meta.owner] = .string(identity); return copy }()
                        let engine = try await service.store.read { txn in
                            let evaluator = service.evaluator
                            return [
                                "read": try evaluator.canRead(row, in: table, claims: claims, txn),
                                "insert": try evaluator.canWrite(.insert, in: table, current: nil, proposed: inserted, claims: claims, txn),
                                "update": try evaluator.canWrite(.update, in: table, current: row, proposed: row, claims: claims, txn),
                                "delete": try evaluator.canWrite(.delete, in: table, current: row, proposed: nil, claims: claims, txn),
                            ]
                        }
                        #expect(explanation.storage == "shared" && explanation.exists && explanation.deleted == row.deleted)
                        for (operation, allowed) in engine {
                            let decision = try #require(explanation.decision(operation))
                            #expect(decision.allowed == allowed, "\(identity) \(roles) \(operation) \(table)/\(id)")
                            #expect(decision.grants.contains(where: \.admits) == allowed)
                            compared += 1
                        }
                    }
                }
            }
        }
        #expect(compared > 500)
        // The pull agrees too: what an identity pulls is what the explainer says it reads.
        for identity in Self.identities {
            let pulled = try await service.pull(identity: try Identity(identity), PullRequest(table: "todos", limit: 1000))
            for record in pulled.records {
                #expect(try await service.explain(claims: Claims(identity: try Identity(identity)), table: "todos", id: record.id)
                    .decision("read")?.allowed == true)
            }
        }
    }

    @Test("the reasons name what each grant found: a missing membership, a role, a claim, another owner")
    func reasons() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: RuleEvaluatorTests.rules)
        _ = try await service.push(identity: "alice", [
            Self.insert("lists", "L1", ["name": "groceries"]),
            Self.insert("list_members", "m-bob", ["list_id": "L1", "user_id": "bob", "role": "viewer"]),
        ])
        _ = try await service.push(identity: "bob", [Self.insert("todos", "T1", ["list_id": "L1"])])

        let carol = try await service.explain(claims: Claims(identity: "carol"), table: "todos", id: "T1")
        let read = try #require(carol.decision("read"))
        #expect(!read.allowed)
        #expect(read.grants.map(\.grant) == ["member: list_members, key: list_id"])
        #expect(read.grants[0].reason == "no live row of 'list_members' has 'user_id' = 'carol' and 'list_id' = 'L1'")

        let bob = try await service.explain(claims: Claims(identity: "bob"), table: "lists", id: "L1")
        #expect(bob.decision("read")?.allowed == true)
        #expect(bob.decision("read")?.grants.map(\.reason) == [
            "the row was created by 'alice', not 'bob'", "'bob' is a member of 'L1' in 'list_members'",
        ])
        let update = try #require(bob.decision("update"))
        #expect(!update.allowed)
        #expect(update.grants.map(\.grant) == ["owner", "member: list_members, key: id, roles: ['editor'], operations: ['update']"])
        #expect(update.grants[1].reason == "'bob' is a member of 'L1' in 'list_members' with role 'viewer', not one of ['editor']")
        #expect(bob.decision("delete")?.grants.map(\.grant) == ["owner"])

        let refused = try await service.push(identity: "alice", [Self.insert("announcements", "A1", ["text": "hi"])])
        #expect(refused.map(\.outcome) == [.rejected(reason: "no grant of the sync rules on table 'announcements' lets this identity insert item 'A1'", status: 403)])
        #expect(refused.map(\.rejectionCode) == [.forbidden])
        let before = try await service.explain(claims: Claims(identity: "alice"), table: "announcements", id: "A1")
        #expect(!before.exists && before.decision("insert")?.allowed == false)
        // Another operation id: the refused one's outcome is remembered and would be replayed.
        _ = try await service.pushReporting(claims: Claims(identity: "alice", roles: ["admin"]), [
            PushOperation(id: "op-admin", table: "announcements", itemId: "A1", kind: .insert, item: Record(id: "A1", fields: ["text": "hi"]),
                          baseVersion: nil),
        ])
        let plain = try await service.explain(claims: Claims(identity: "bob"), table: "announcements", id: "A1")
        #expect(plain.decision("read")?.allowed == true)
        #expect(plain.decision("insert")?.grants.first?.reason == "the token's claim 'roles' holds nothing, not one of ['admin']")
        let admin = try await service.explain(claims: Claims(identity: "bob", roles: ["admin"]), table: "announcements", id: "A1")
        #expect(admin.decision("update")?.allowed == true)

        let missing = try await service.explain(claims: Claims(identity: "bob"), table: "todos", id: "nope")
        #expect(!missing.exists && missing.decision("read")?.allowed == false && missing.decision("read")?.grants.isEmpty == true)
    }

    @Test("an owner-only table is explained per identity, and a table the rules deny is not served")
    func storageKinds() async throws {
        let rules = SyncRules(defaultAccess: .deny, tables: ["notes": .ownerOnly])
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: rules)
        _ = try await service.push(identity: "alice", [Self.insert("notes", "n1", ["text": "mine"])])
        let alice = try await service.explain(claims: Claims(identity: "alice"), table: "notes", id: "n1")
        #expect(alice.storage == "owner-only" && alice.exists && alice.decision("read")?.allowed == true)
        // bob has no row n1 of his own: owner-only rows are kept per identity.
        let bob = try await service.explain(claims: Claims(identity: "bob"), table: "notes", id: "n1")
        #expect(bob.storage == "owner-only" && !bob.exists && bob.decision("read")?.allowed == false)
        #expect(bob.decision("insert")?.allowed == true)
        let secret = try await service.explain(claims: Claims(identity: "alice"), table: "secrets", id: "s1")
        #expect(secret.storage == "not served" && secret.decisions.allSatisfy { !$0.allowed })
    }
}
