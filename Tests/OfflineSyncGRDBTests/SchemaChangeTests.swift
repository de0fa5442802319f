import Foundation
import GRDB
import OfflineSync
import OfflineSyncGRDB
import OfflineSyncTestSupport
import Testing

/// A new app version renames or drops a synced column while writes made offline under the
/// old schema are still queued.
@Suite("GRDB adapter: renaming and dropping a synced column keep the queued writes")
struct SchemaChangeTests {
    static let renamed = TableSchema("todo", fields: [FieldDefinition("name", .string), FieldDefinition("done", .bool)])

    /// Version 1 of the app, offline after one push: the pushed row `e1` edited by SQL and a
    /// new row `s2` inserted by SQL, both queued.
    private func versionOneWithQueuedWrites(_ url: URL, _ live: LoopbackServer) async throws {
        let database = try appDatabase(url)
        let store = try await GRDBStore(database)
        let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
        try await app.defineTable(todoSchema)
        _ = try await app.table("todo").insert(Record(id: "e1", fields: ["title": "First", "done": false]))
        #expect(try await app.push().applied == 1)
        try await database.write { db in
            try db.execute(sql: "UPDATE todo SET title = 'Edited offline' WHERE id = 'e1'")
            try db.execute(sql: "INSERT INTO todo (id, title) VALUES ('s2', 'Added offline')")
        }
        #expect(try await app.queuedOperations().map(\.changedFields) == [["title"], ["title"]])
        await app.stop()
        try await store.close()
    }

    /// `renameSyncedColumn` renames the field in the queued writes: they are pushed under the
    /// new name. An app that renamed the column with its own SQL first is refused by
    /// `defineTable` with a typed error that keeps the queue, and the same call then finishes
    /// the rename.
    @Test("a renamed column's queued writes are pushed under the new name (Docs/GRDB.md's migration)", arguments: [false, true])
    func renameMapsQueuedWrites(renamedBySQLFirst: Bool) async throws {
        let example = try DocumentExample(in: "Docs/GRDB.md", showing: "Tests/OfflineSyncGRDBTests/GRDBRenameExample.swift")
        #expect(example.shown == example.source, "the guide shows GRDBRenameExample.swift as it is")
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("app.sqlite")
            let live = try await LoopbackServer.start()
            try await versionOneWithQueuedWrites(url, live)

            let database = try DatabaseQueue(path: url.path)
            if renamedBySQLFirst {
                try await database.write { db in try db.execute(sql: "ALTER TABLE todo RENAME COLUMN title TO name") }
                let store = try await GRDBStore(database)
                let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
                let error = await #expect(throws: SyncError.self) { try await app.defineTable(Self.renamed) }
                #expect(error?.code == .schemaMismatch)
                #expect(error?.message.contains("renameSyncedColumn") == true)
                #expect(try await store.read { txn in try txn.count(in: "__operations", matching: .all) } == 2)
                try await app.close()
            }
            var migrator = DatabaseMigrator()
            registerVersionTwo(in: &migrator)
            try migrator.migrate(database)

            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(Self.renamed)
            let pending = try await app.queuedOperations()
            #expect(pending.map(\.changedFields) == [["name"], ["name"]])
            #expect(pending.map { $0.item?.fields["title"] } == [nil, nil])
            #expect(pending.map { $0.item?["name"] } == [.string("Edited offline"), .string("Added offline")])
            // The capture reads the renamed column.
            try await database.write { db in try db.execute(sql: "UPDATE todo SET name = 'Renamed, then edited' WHERE id = 's2'") }
            #expect(try await app.queuedOperations().last?.item?["name"] == .string("Renamed, then edited"))
            #expect(try await app.table("todo").get("e1")?["name"] == .string("Edited offline"))
            #expect(try await app.push().applied == 2)

            let phone = try await live.device("alice", tables: [Self.renamed])
            _ = try await phone.pull("todo")
            #expect(try await phone.table("todo").get("e1")?["name"] == .string("Edited offline"))
            #expect(try await phone.table("todo").get("s2")?.fields == ["name": "Renamed, then edited"])
            await phone.stop()
            try await app.close()
            try await live.stop()
        }
    }

    /// A table of 64 fields: positions from 62 on share one bit of a note's mask. A change
    /// noted in the last field before the first one is dropped is still queued as the last
    /// field's.
    @Test("a drop keeps a noted change in a field past the 62nd")
    func dropKeepsAWideTablesNotes() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("app.sqlite")
            let live = try await LoopbackServer.start()
            let fields = (0..<64).map { FieldDefinition("f\($0)", .int) }
            do {
                let store = try await GRDBStore(try DatabaseQueue(path: url.path))
                let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
                try await app.defineTable(TableSchema("wide", fields: fields))
                _ = try await app.table("wide").insert(Record(id: "w1", fields: Dictionary(uniqueKeysWithValues: fields.map { ($0.name, Value.int(0)) })))
                #expect(try await app.push().applied == 1)
                try await app.close()
            }
            let database = try DatabaseQueue(path: url.path)
            try await database.write { db in try db.execute(sql: "UPDATE wide SET f63 = 7 WHERE id = 'w1'") }
            try await database.write { db in try db.dropSyncedColumn("f0", fromTable: "wide") }
            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(TableSchema("wide", fields: Array(fields.dropFirst())))
            let pending = try await app.queuedOperations()
            #expect(pending.count == 1)
            #expect(pending.first?.changedFields.contains("f63") == true, "\(pending.first?.changedFields ?? [])")
            #expect(pending.first?.item?["f63"] == .int(7))
            try await app.close()
            try await live.stop()
        }
    }

    /// `dropSyncedColumn` refuses while a queued write carries the field, changing nothing;
    /// once the queue holds none, it drops the column, and a change the triggers noted in
    /// another column before the drop is queued as that column's.
    @Test("dropping a column is refused while queued writes carry it, then done without losing a noted change")
    func dropRefusedWhileQueued() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("app.sqlite")
            let live = try await LoopbackServer.start()
            try await versionOneWithQueuedWrites(url, live)

            let database = try DatabaseQueue(path: url.path)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v2") { db in try db.dropSyncedColumn("title", fromTable: "todo") }
            let error = #expect(throws: SyncError.self) { try migrator.migrate(database) }
            #expect(error?.code == .pendingOperations)
            #expect(try await database.read { db in try db.columns(in: "todo").map(\.name) } == ["id", "title", "done"])

            // Pushed, then one more change by SQL, noted by the triggers and not yet queued.
            do {
                let store = try await GRDBStore(database)
                let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
                try await app.defineTable(todoSchema)
                #expect(try await app.push().applied == 2)
                try await app.close()
            }
            try await database.write { db in try db.execute(sql: "UPDATE todo SET done = 1 WHERE id = 'e1'") }
            try migrator.migrate(database)
            #expect(try await database.read { db in try db.columns(in: "todo").map(\.name) } == ["id", "done"])

            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            let v2 = TableSchema("todo", fields: [FieldDefinition("done", .bool)])
            try await app.defineTable(v2)
            let pending = try await app.queuedOperations()
            #expect(pending.map(\.changedFields) == [["done"]])
            #expect(pending.first?.item?.fields == ["done": true])
            #expect(try await app.push().applied == 1)
            let phone = try await live.device("alice", tables: [v2])
            _ = try await phone.pull("todo")
            #expect(try await phone.table("todo").get("e1")?["done"] == true)
            await phone.stop()
            try await app.close()
            try await live.stop()
        }
    }
}
