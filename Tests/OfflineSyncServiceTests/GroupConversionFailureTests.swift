import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Synchronization
import Testing

/// A group that crosses the fan-out limit with more members than one conversion step marks
/// finishes converting after its push commits, in writes of its own. When one of those fails,
/// the push stands and its report says which group's change failed and with what code (a
/// server logs it); the next push into the group finishes the conversion.
@Suite("A group's change of mode that fails after its push is reported")
struct GroupConversionFailureTests {
    /// A real SQLite store whose `number`th write from the arming fails with `busy`, once.
    final class FailingWriteStore: LocalStore {
        let inner: any LocalStore
        private let remaining = Mutex<Int?>(nil)

        init(_ inner: any LocalStore) { self.inner = inner }

        /// Fails the `number`th write from now.
        func fail(write number: Int) { remaining.withLock { $0 = number } }

        func defineTable(_ schema: TableSchema) async throws { try await inner.defineTable(schema) }

        func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
            try await inner.read(body)
        }

        func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
            let fails = remaining.withLock { left -> Bool in
                guard let count = left else { return false }
                left = count == 1 ? nil : count - 1
                return count == 1
            }
            if fails { throw SyncError(.busy, "a write failed by the test") }
            return try await inner.write(body)
        }

        func close() async throws { try await inner.close() }
    }

    static let rules = SyncRules(
        memberships: ["members": Membership(table: "members", member: "user_id", group: "list_id")],
        tables: [
            "todos": TableRules(read: [Grant(.member("members", key: "list_id", roles: nil))],
                                write: [Grant(.member("members", key: "list_id", roles: nil))]),
            "members": TableRules(read: [Grant(.identityField("user_id"))], write: [Grant(.everyone)]),
        ])

    static func membership(_ number: Int) -> PushOperation {
        let id = "m\(number)"
        return PushOperation(id: "op-\(id)", table: "members", itemId: id, kind: .insert,
                             item: Record(id: id, fields: ["list_id": "L", "user_id": .string("user-\(number)")]), baseVersion: nil)
    }

    @Test("a conversion step after the push fails: the push stands, the report names the group with the code, the next push into it converts it")
    func reported() async throws {
        try await withTemporaryDirectory { directory in
            let store = FailingWriteStore(try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path))
            // A limit the group reaches with more members than one step marks (1,000).
            let service = try await OfflineSyncService(store: store, rules: Self.rules, groupFanoutLimit: 1001)
            let admin = try Claims(identity: Identity("admin"))
            let small = try await service.pushReporting(claims: admin, (0..<1001).map(Self.membership))
            #expect(small.results.allSatisfy { if case .applied = $0.outcome { true } else { false } })
            #expect(small.groupChangesFailed.isEmpty)

            // The 1,002nd member: the push (write 1) marks the first step's members; the next
            // step, in a write of its own (write 2), fails.
            store.fail(write: 2)
            let crossing = try await service.pushReporting(claims: admin, [Self.membership(1001)])
            guard case .applied = crossing.results.first?.outcome else {
                Issue.record("the crossing membership was not applied: \(crossing.results)")
                return
            }
            #expect(crossing.groupChangesFailed.count == 1)
            #expect(crossing.groupChangesFailed.values.first == .busy)

            // A member's todo: its push logs to the converting group and finishes converting it.
            let member = try Claims(identity: Identity("user-5"))
            let todo = try await service.pushReporting(claims: member, [PushOperation(
                id: "op-t", table: "todos", itemId: "t", kind: .insert, item: Record(id: "t", fields: ["list_id": "L"]), baseVersion: nil)])
            guard case .applied = todo.results.first?.outcome else {
                Issue.record("the todo was not applied: \(todo.results)")
                return
            }
            #expect(todo.groupChangesFailed.isEmpty)
            #expect(Set(todo.groupsChanged["todos"] ?? []) == Set(crossing.groupChangesFailed.keys),
                    "the todo was logged to the group, which is large now")
            #expect(!todo.regrouped.isEmpty, "the step that failed marked its members this time")
            try await store.close()
        }
    }
}
