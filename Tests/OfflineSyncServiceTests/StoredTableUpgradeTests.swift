import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A service gives the app tables a store already holds its own storage when it opens, not at
/// the first request that touches each: a storage change (here the `__op` column, which
/// stores written before it lack) migrates the table, and on SQLite that rewrites every row
/// with the write lock held.
@Suite("Stored app tables get the service's storage when it opens")
struct StoredTableUpgradeTests {
    /// The storage of an app table as services wrote it before rows kept their operation's
    /// key: the three service columns and the owner's change index.
    static let storageBeforeOperationKey = TableSchema("items", fields: [
        FieldDefinition("__owner", .string), FieldDefinition("__item", .string), FieldDefinition("__seq", .int),
    ], indexes: [IndexDefinition(["__owner", "__seq"])])

    static func insert(_ id: String, _ title: String) -> PushOperation {
        PushOperation(id: "op-\(id)", table: "items", itemId: id, kind: .insert,
                      item: Record(id: id, fields: ["title": .string(title)]), baseVersion: nil)
    }

    /// A store at `path` holding alice's two items in the storage of `storageBeforeOperationKey`,
    /// their rows without the key, as a service of that version left them.
    static func storeWrittenBeforeOperationKey(_ path: String) async throws {
        let store = try await SQLiteStore(path: path)
        let service = try await OfflineSyncService(store: store)
        _ = try await service.push(identity: "alice", [insert("a", "first"), insert("b", "second")])
        // Dropping the column from the schema keeps its values among the undeclared fields;
        // taking them out of every row leaves what the earlier version stored.
        try await store.defineTable(storageBeforeOperationKey)
        let keyed = try await store.write { txn in
            var keyed = 0
            for var row in try txn.records(in: "items", matching: Query()) where row["__op"] != .null {
                row["__op"] = .null
                try txn.upsert(row, in: "items")
                keyed += 1
            }
            return keyed
        }
        #expect(keyed == 2)
        try await store.close()
    }

    static func fieldNames(_ store: SQLiteStore) async throws -> [String] {
        try await store.read { try $0.schema(of: "items").fields.map(\.name) }
    }

    @Test("opening the service adds the operation key's column before any request, and the rows stay readable and writable")
    func upgradedWhenOpened() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("server.sqlite").path
            try await Self.storeWrittenBeforeOperationKey(path)
            let store = try await SQLiteStore(path: path)
            #expect(try await Self.fieldNames(store) == ["__owner", "__item", "__seq"])
            let service = try await OfflineSyncService(store: store)
            #expect(try await Self.fieldNames(store) == ["__owner", "__item", "__seq", "__op"])
            let page = try await service.pull(identity: "alice", PullRequest(table: "items", limit: 10))
            #expect(page.records.map(\.id).sorted() == ["a", "b"])
            #expect(page.records.allSatisfy { $0["__op"] == .null && $0["__owner"] == .null })
            let results = try await service.push(identity: "alice", [Self.insert("c", "third")])
            guard case .applied = results.first?.outcome else { Issue.record("the push after the upgrade was not applied"); return }
            try await store.close()
        }
    }

    @Test("a stored table the service does not serve is left as it is")
    func unservedTableLeftAlone() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("server.sqlite").path
            try await Self.storeWrittenBeforeOperationKey(path)
            let store = try await SQLiteStore(path: path)
            _ = try await OfflineSyncService(store: store, allowUndeclaredTables: false)
            #expect(try await Self.fieldNames(store) == ["__owner", "__item", "__seq"])
            try await store.close()
        }
    }
}
