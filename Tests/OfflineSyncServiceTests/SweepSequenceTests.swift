import Foundation
import OfflineSync
@testable import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A move-in's sweep resumes, once done, past its event's whole sequence. Whatever else the
/// caller's log holds at that sequence must be served before the sweep, not skipped; and two
/// events at one sequence, which a sweep's cursor cannot tell apart, are refused as damage.
@Suite("A sweep's event shares its sequence with nothing it skips")
struct SweepSequenceTests {
    static func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    /// Alice's list of 9 todos; bob joins it. Returns the sequence of bob's move-in event.
    static func bobJoins(_ service: OfflineSyncService, _ store: SQLiteStore) async throws -> Int64 {
        var setup = [insert("lists", "L", ["name": "groceries"]), insert("list_members", "m-alice", ["list_id": "L", "user_id": "alice"])]
        setup += (0..<9).map { insert("todos", "t\($0)", ["list_id": "L", "title": .string("todo \($0)")]) }
        _ = try await service.push(identity: "alice", setup)
        _ = try await service.push(identity: "alice", [insert("list_members", "m-bob", ["list_id": "L", "user_id": "bob"])])
        return try await store.read { txn in
            let events = try txn.records(in: OfflineSyncService.ViewRow.table, matching: Query(
                OfflineSyncService.ViewRow.after(0, identity: "bob", table: "todos") && .not(.isNull("group"))))
            guard events.count == 1, case .int(let sequence) = events[0]["sequence"] else {
                throw SyncError(.notFound, "bob has \(events.count) membership events for todos")
            }
            return sequence
        }
    }

    /// Writes an entry for bob at `sequence`: `item` left his view.
    static func removal(_ item: String, at sequence: Int64, group: GroupKey? = nil, _ store: SQLiteStore) async throws {
        try await store.write { txn in
            if let group {
                try OfflineSyncService.ViewRow.event(identity: "bob", table: "todos", group: group, sequence: sequence, visible: false)
                    .save(txn)
            } else {
                try OfflineSyncService.ViewRow(id: OfflineSyncService.ViewRow.id(identity: "bob", table: "todos", item: item),
                                               identity: "bob", table: "todos", item: item, sequence: sequence, visible: false).save(txn)
            }
        }
    }

    @Test("an entry at the event's sequence is served although the sweep takes several pages")
    func entryBesideTheEventIsServed() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false), groupFanoutLimit: 1)
            let event = try await Self.bobJoins(service, store)
            // Its id sorts after the event's, as the log returns entries of one sequence.
            try await Self.removal("ghost", at: event, store)
            var cursor: String?
            var rows: Set<String> = []
            var removed: Set<String> = []
            for _ in 0..<20 {
                let page = try await service.pull(identity: "bob", PullRequest(table: "todos", cursor: cursor, limit: 4))
                rows.formUnion(page.records.map(\.id))
                removed.formUnion(page.removed)
                cursor = page.nextCursor
                if page.remaining == 0 { break }
            }
            #expect(rows == Set((0..<9).map { "t\($0)" }))
            #expect(removed.contains("ghost"), "the entry at the move-in's sequence was skipped")
            try await store.close()
        }
    }

    @Test("two membership events at one sequence are refused as damage")
    func twoEventsAtOneSequenceAreRefused() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false), groupFanoutLimit: 1)
            let event = try await Self.bobJoins(service, store)
            try await Self.removal("", at: event, group: GroupKey("another group"), store)
            let error = await #expect(throws: SyncError.self) {
                _ = try await service.pull(identity: "bob", PullRequest(table: "todos", cursor: nil, limit: 4))
            }
            #expect(error?.code == .corrupted)
            try await store.close()
        }
    }
}
