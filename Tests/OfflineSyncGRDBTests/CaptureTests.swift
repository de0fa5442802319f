import Foundation
import GRDB
import Logging
import OfflineSync
import OfflineSyncGRDB
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A sync server on a loopback port over an in-memory store, and remotes for identities.
struct LoopbackServer: Sendable {
    let server: SyncServer
    let running: RunningSyncServer

    static func start() async throws -> LoopbackServer {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: .ownerOnly)
        let configuration = SyncServer.Configuration(
            port: 0, tokenSecret: Array("offline-sync test secret, 32+ bytes long".utf8), adminKey: "test-admin-key",
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let server = try await SyncServer(service: service, configuration: configuration)
        return LoopbackServer(server: server, running: try await server.start())
    }

    func remote(_ identity: String) async throws -> HTTPRemoteStore {
        let token = try await server.tokens.mint(identity: identity)
        return HTTPRemoteStore(baseURL: running.baseURL, token: { token })
    }

    /// A second device of `identity` with a store of its own.
    func device(_ identity: String, tables: [TableSchema]) async throws -> SyncContext {
        let context = try await SyncContext(store: InMemoryStore(), remote: try await remote(identity))
        for table in tables { try await context.defineTable(table) }
        return context
    }

    func stop() async throws { try await running.stop() }

    /// A remote for a context that never syncs in its test: a loopback port nothing listens on.
    static func unusedRemote() async throws -> HTTPRemoteStore {
        HTTPRemoteStore(baseURL: "http://127.0.0.1:9", token: { "unused" })
    }
}

/// Opens the app's database with its own migration: `todo` with typed columns, as an app
/// that never heard of OfflineSync would define it.
func appDatabase(_ url: URL, pool: Bool = false) throws -> any DatabaseWriter {
    let database: any DatabaseWriter = pool ? try DatabasePool(path: url.path) : try DatabaseQueue(path: url.path)
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
        try db.create(table: "todo") { t in
            t.primaryKey("id", .text)
            t.column("title", .text)
            t.column("done", .boolean)
        }
    }
    try migrator.migrate(database)
    return database
}

let todoSchema = TableSchema("todo", fields: [FieldDefinition("title", .string), FieldDefinition("done", .bool)])

@Suite("GRDB adapter: the app's own writes are captured, pulls are observed")
struct CaptureTests {
    @Test("a write by raw SQL in a GRDB transaction is queued and pushed once, and a pull is never echoed back")
    func rawSQLWritePushedOnce() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let database = try appDatabase(directory.appendingPathComponent("app.sqlite"))
            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(todoSchema)

            // Two statements on one row in one transaction: one insert reaches the server.
            try await database.write { db in
                try db.execute(sql: "INSERT INTO todo (id, title, done) VALUES ('t1', 'Milk', 0)")
                try db.execute(sql: "UPDATE todo SET done = 1 WHERE id = 't1'")
            }
            let pending = try await app.queuedOperations()
            #expect(pending.map(\.kind) == [.insert])
            #expect(pending.first?.item?["done"] == .bool(true))
            let first = try await app.push()
            #expect(first.sent == 1 && first.applied == 1)
            #expect(try await app.push().sent == 0, "pushed once")

            let phone = try await live.device("alice", tables: [todoSchema])
            _ = try await phone.pull("todo")
            #expect(try await phone.table("todo").get("t1")?.fields == ["title": "Milk", "done": .bool(true)])

            // An update by SQL is sent on the version the push stored: no conflict.
            try await database.write { db in try db.execute(sql: "UPDATE todo SET title = 'Oat milk' WHERE id = 't1'") }
            let update = try await app.queuedOperations()
            #expect(update.map(\.kind) == [.update] && update.first?.changedFields == ["title"])
            #expect(update.first?.baseVersion != nil)
            #expect(try await app.push().applied == 1)

            // A change pulled from the other device is written with the capture silenced.
            _ = try await phone.pull("todo")
            _ = try await phone.table("todo").update(Record(id: "t1", fields: ["title": "Soy milk", "done": .bool(false)]))
            _ = try await phone.push()
            _ = try await app.pull("todo")
            #expect(try await app.queuedOperations().isEmpty, "the pulled row is not queued back")
            let title = try await database.read { db in try String.fetchOne(db, sql: "SELECT title FROM todo WHERE id = 't1'") }
            #expect(title == "Soy milk")

            // A delete by SQL reaches the other device.
            try await database.write { db in try db.execute(sql: "DELETE FROM todo WHERE id = 't1'") }
            #expect(try await app.queuedOperations().map(\.kind) == [.delete])
            #expect(try await app.push().applied == 1)
            _ = try await phone.pull("todo")
            #expect(try await phone.table("todo").get("t1") == nil)

            // An insert and a delete before any push cancel out.
            try await database.write { db in
                try db.execute(sql: "INSERT INTO todo (id, title) VALUES ('t2', 'Bread')")
                try db.execute(sql: "DELETE FROM todo WHERE id = 't2'")
            }
            #expect(try await app.queuedOperations().isEmpty)
            await phone.stop()
            await app.stop()
            try await store.close()
            try await live.stop()
        }
    }

    // The limits of these tests catch a hang: alone they take under a second, but under the
    // whole suite's load on two cores every await of theirs waits its turn.
    @Test("a GRDB ValueObservation of the app's table fires on a pull", .timeLimit(.minutes(4)), arguments: [false, true])
    func observationFiresOnPull(pool: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let database = try appDatabase(directory.appendingPathComponent("app.sqlite"), pool: pool)
            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(todoSchema)
            let observation = ValueObservation.tracking { db in
                try String.fetchAll(db, sql: "SELECT title FROM todo ORDER BY id")
            }.removeDuplicates()
            var titles = observation.values(in: database).makeAsyncIterator()
            #expect(try await titles.next() == [])

            let phone = try await live.device("alice", tables: [todoSchema])
            _ = try await phone.table("todo").insert(Record(id: "p1", fields: ["title": "from the phone"]))
            _ = try await phone.push()
            _ = try await app.pull("todo")
            #expect(try await titles.next() == ["from the phone"])
            await phone.stop()
            await app.stop()
            try await store.close()
            try await live.stop()
        }
    }

    @Test("rows the app had before its table synced are queued as inserts; an engine write is not captured twice")
    func adoptionAndEngineWrites() async throws {
        try await withTemporaryDirectory { directory in
            let database = try appDatabase(directory.appendingPathComponent("app.sqlite"))
            try await database.write { db in
                try db.execute(sql: "INSERT INTO todo (id, title, done) VALUES ('old', 'Before sync', 1)")
            }
            let store = try await GRDBStore(database)
            let live = try await LoopbackServer.start()
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(todoSchema)
            _ = try await app.table("todo").insert(Record(id: "new", fields: ["title": "Through the engine"]))
            let pending = try await app.queuedOperations()
            #expect(Set(pending.map(\.itemId)) == ["old", "new"] && pending.allSatisfy { $0.kind == .insert })
            // The engine's row is an ordinary row of the app's table.
            let title = try await database.read { db in try String.fetchOne(db, sql: "SELECT title FROM todo WHERE id = 'new'") }
            #expect(title == "Through the engine")
            #expect(try await app.push().applied == 2)
            await app.stop()
            try await store.close()
            try await live.stop()
        }
    }
}

@Suite("GRDB adapter: an app that syncs while it reads and writes its pool")
struct ConcurrentAppTests {
    /// The shape of PowerSync's GRDB freeze (powersync-swift #125): a `DatabasePool` app
    /// starts syncing and keeps observing and writing while pulls land. Every access the
    /// adapter makes is an async GRDB access, so none holds a GRDB queue while it waits.
    // The limit catches a deadlock; the work takes under a second alone, but under the whole
    // suite's load on two cores each of its thousand awaits waits its turn.
    @Test("a started context on the app's pool, observed and written while it syncs, never deadlocks", .timeLimit(.minutes(6)))
    func startObserveAndWriteUnderLoad() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let database = try appDatabase(directory.appendingPathComponent("app.sqlite"), pool: true)
            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(todoSchema)
            await app.start(tables: ["todo"], network: ManualNetworkMonitor(online: true))
            let counts = ValueObservation.tracking { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM todo") ?? 0 }
                .removeDuplicates().values(in: database)

            let phone = try await live.device("alice", tables: [todoSchema])
            let rounds = 10, perRound = 10
            async let phoneWrites: Void = {
                for round in 0..<rounds {
                    for n in 0..<perRound {
                        _ = try await phone.table("todo").insert(Record(id: "phone-\(round)-\(n)", fields: ["title": "p"]))
                    }
                    _ = try await phone.push()
                }
            }()
            async let appWrites: Void = {
                for n in 0..<(rounds * perRound) {
                    try await database.write { db in
                        try db.execute(sql: "INSERT INTO todo (id, title) VALUES (?, 'a')", arguments: ["app-\(n)"])
                    }
                    // A read of the app's own, and one through the engine, between writes.
                    _ = try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM todo") }
                    if n % 10 == 0 { _ = try await app.table("todo").get("app-\(n)") }
                }
            }()
            try await phoneWrites
            try await appWrites
            // The app pushes its own writes; the phone's have arrived through the started loop,
            // and a last sync takes what a notice lost under load would have missed.
            _ = try await app.push()
            try await app.sync(["todo"])
            let total = 2 * rounds * perRound
            for try await count in counts where count == total { break }
            _ = try await phone.pull("todo")
            #expect(try await phone.table("todo").count() == total)
            #expect(try await app.queuedOperations().isEmpty)
            await phone.stop()
            await app.stop()
            try await store.close()
            try await live.stop()
        }
    }
}

@Suite("GRDB adapter: the app's migrations keep queued writes")
struct MigrationTests {
    /// A new app version adds a column and fills it in its migration while writes made
    /// offline under the old schema are queued: they are pushed with the new column's
    /// values, the fix-up folded into them.
    @Test("a migration that adds and fills a column pushes the writes queued before it")
    func addColumnKeepsQueuedWrites() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("app.sqlite")
            let live = try await LoopbackServer.start()
            do {
                // Version 1, offline: writes queue up.
                let database = try appDatabase(url)
                let store = try await GRDBStore(database)
                let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
                try await app.defineTable(todoSchema)
                _ = try await app.table("todo").insert(Record(id: "e1", fields: ["title": "Through the engine"]))
                try await database.write { db in try db.execute(sql: "INSERT INTO todo (id, title) VALUES ('s1', 'By SQL')") }
                #expect(try await app.queuedOperations().count == 2)
                await app.stop()
                try await store.close()
            }
            // Version 2: the app's migrator adds `priority` and fills it in.
            let database = try DatabaseQueue(path: url.path)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { _ in }
            migrator.registerMigration("v2") { db in
                try db.alter(table: "todo") { t in t.add(column: "priority", .integer) }
                try db.execute(sql: "UPDATE todo SET priority = 1")
            }
            try migrator.migrate(database)
            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            let v2 = TableSchema("todo", fields: todoSchema.fields + [FieldDefinition("priority", .int)])
            try await app.defineTable(v2)
            let pending = try await app.queuedOperations()
            #expect(pending.map(\.kind) == [.insert, .insert])
            #expect(pending.allSatisfy { $0.item?["priority"] == .int(1) })
            #expect(try await app.push().applied == 2)
            let phone = try await live.device("alice", tables: [v2])
            _ = try await phone.pull("todo")
            #expect(try await phone.table("todo").get("s1")?.fields == ["title": "By SQL", "priority": .int(1)])
            #expect(try await phone.table("todo").get("e1")?.fields == ["title": "Through the engine", "priority": .int(1)])
            await phone.stop()
            await app.stop()
            try await store.close()
            try await live.stop()
        }
    }
}

@Suite("GRDB adapter: a table made from a SyncModel is an ordinary GRDB table")
struct SyncModelTableTests {
    /// The model the engine writes through its typed API.
    struct Visit: SyncModel, Equatable {
        static let tableName = "visit"
        var id: String
        var place: String
        var at: Date
        var rating: Double
        var version: String?
    }

    /// The app's own GRDB record for the same table, with no sync in it.
    struct VisitRow: Codable, FetchableRecord, PersistableRecord, Equatable {
        static let databaseTableName = "visit"
        var id: String
        var place: String
        var at: Date
        var rating: Double
    }

    @Test("defineTable(Model.self) creates a typed table that GRDB records read and write, dates included")
    func modelTableIsAGRDBTable() async throws {
        try await withTemporaryDirectory { directory in
            let database = try DatabaseQueue(path: directory.appendingPathComponent("app.sqlite").path)
            let store = try await GRDBStore(database)
            let context = try await SyncContext(store: store, remote: try await LoopbackServer.unusedRemote())
            try await context.defineTable(Visit.self)
            let at = Date(timeIntervalSince1970: 1_790_000_000.125)
            _ = try await context.table(Visit.self).insert(Visit(id: "v1", place: "Museum", at: at, rating: 4.5))
            // The app's GRDB record reads what the engine wrote, and the column types are GRDB's.
            let read = try await database.read { db in try VisitRow.fetchOne(db, key: "v1") }
            #expect(read == VisitRow(id: "v1", place: "Museum", at: at, rating: 4.5))
            let types = try await database.read { db in try db.columns(in: "visit").map(\.type) }
            #expect(types == ["TEXT", "TEXT", "DATETIME", "DOUBLE"])
            // And the engine reads what the app's record wrote, queued once.
            try await database.write { db in
                try VisitRow(id: "v2", place: "Park", at: at.addingTimeInterval(60), rating: 3).insert(db)
            }
            #expect(try await context.table(Visit.self).get("v2")?.at == at.addingTimeInterval(60))
            #expect(try await context.queuedOperations().map(\.itemId).sorted() == ["v1", "v2"])
            try await context.close()
        }
    }
}

@Suite("GRDB adapter: a migration that rebuilds a synced table")
struct RebuiltTableTests {
    /// SQLite's way to change a column's type or constraints is to build a new table, copy the
    /// rows, drop the old one and rename: the drop takes the capture triggers with it. The
    /// next `defineTable` (every launch makes one) installs them again.
    @Test("after the app rebuilds its table and defines it again, its writes are captured")
    func rebuiltTableIsCapturedAgain() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("app.sqlite")
            let database = try appDatabase(url)
            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await LoopbackServer.unusedRemote())
            try await app.defineTable(todoSchema)
            try await database.write { db in
                try db.execute(sql: "CREATE TABLE todo_new (id TEXT NOT NULL PRIMARY KEY, title TEXT NOT NULL DEFAULT '', done BOOLEAN)")
                try db.execute(sql: "INSERT INTO todo_new SELECT id, coalesce(title, ''), done FROM todo")
                try db.execute(sql: "DROP TABLE todo")
                try db.execute(sql: "ALTER TABLE todo_new RENAME TO todo")
            }
            try await app.defineTable(todoSchema)
            try await database.write { db in try db.execute(sql: "INSERT INTO todo (id, title) VALUES ('r1', 'After the rebuild')") }
            #expect(try await app.queuedOperations().map(\.itemId) == ["r1"])
            try await app.close()
        }
    }
}
