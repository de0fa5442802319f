import Foundation
import GRDB                   // the app's own database, as before
import OfflineSync            // the sync context
import OfflineSyncGRDB        // GRDBStore: syncs the app's own GRDB tables
import OfflineSyncURLSession  // the sync server over HTTP, with Foundation's URLSession

/// The app's record, as any GRDB app has it: nothing about sync in it.
struct Todo: Codable, FetchableRecord, PersistableRecord, Equatable {
    var id: String
    var title: String
    var done: Bool
}

/// Opens the app's database with its own migrations. A synced table is an ordinary table
/// whose key is a text column named `id`.
func openAppDatabase(path: String) throws -> DatabasePool {
    // A damaged file is reported as SyncError.corrupted or .notADatabase, and left as it is.
    try GRDBStore.checkDatabaseFile(atPath: path)
    var configuration = Configuration()
    configuration.busyMode = .timeout(5)   // an app extension may hold the write lock a moment
    let database = try DatabasePool(path: path, configuration: configuration)
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
        try db.create(table: "todo") { t in
            t.primaryKey("id", .text)
            t.column("title", .text).notNull()
            t.column("done", .boolean).notNull().defaults(to: false)
        }
    }
    try migrator.migrate(database)
    return database
}

/// Syncs the app's `todo` table with the server in the background: the app's own writes are
/// pushed, and the server's changes land in the table, where the app's observations see them.
func startSyncing(_ database: DatabasePool, server: String,
                  token: @escaping @Sendable () async throws -> String) async throws -> SyncContext {
    let store = try await GRDBStore(database)
    let remote = URLSessionRemoteStore(baseURL: server, token: token)
    let context = try await SyncContext(store: store, remote: remote)
    try await context.defineTable(TableSchema("todo", fields: [FieldDefinition("title", .string),
                                                               FieldDefinition("done", .bool)]))
    await context.start(tables: ["todo"], network: remote.networkMonitor())
    return context
}

/// The app writes as it always has: the triggers queue the write for the server in the same
/// transaction.
func addTodo(_ title: String, to database: DatabasePool) async throws {
    try await database.write { db in
        try Todo(id: UUID().uuidString, title: title, done: false).insert(db)
    }
}

/// The app's screen: its own observation, updated by its writes and by pulls alike.
func todoTitles(in database: DatabasePool) -> AsyncValueObservation<[String]> {
    ValueObservation.tracking { db in try Todo.order(Column("title")).fetchAll(db).map(\.title) }
        .removeDuplicates()
        .values(in: database)
}
