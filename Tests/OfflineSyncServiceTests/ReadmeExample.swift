import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite

struct Todo: SyncModel, Equatable {
    static let tableName = "todos"
    static let indexes = [IndexDefinition(Columns.done)]

    var id: String
    var title: String
    var done: Bool
    var version: String?                       // assigned by the server

    enum Columns {                             // typed columns for queries
        static let title = Column(\Todo.title, CodingKeys.title)
        static let done = Column(\Todo.done, CodingKeys.done)
    }
}

/// One user's phone and laptop: the phone writes offline and pushes, the laptop watches its
/// open todos and pulls. Returns what the laptop's screen shows.
func readmeExample(in folder: URL) async throws -> [Todo] {
    let service = try await OfflineSyncService(store: try await SQLiteStore(path: folder.appendingPathComponent("server.sqlite").path))
    func device(_ name: String) async throws -> SyncContext {
        let store = try await SQLiteStore(path: folder.appendingPathComponent("\(name).sqlite").path)
        let context = try await SyncContext(store: store, remote: service.remote(for: "alice"))
        try await context.defineTable(Todo.self)       // the schema comes from Todo's coding keys
        return context
    }
    let phone = try await device("phone"), laptop = try await device("laptop")

    try await phone.table(Todo.self).insert(Todo(id: "t1", title: "Buy milk", done: false))  // offline: queued
    try await phone.transaction { txn in                 // several writes, one commit, one batch
        try txn.insert(Todo(id: "t2", title: "Call mum", done: false))
        try txn.update(Todo(id: "t1", title: "Buy oat milk", done: false))
    }
    try await phone.push()                               // in queue order

    let open = laptop.table(Todo.self).observe(Todo.filter(Todo.Columns.done == false).order(Todo.Columns.title.ascending))
    var screen = open.makeAsyncIterator()                // a live query: now, then after each change
    _ = try await screen.next()                          // [] — nothing pulled yet
    try await laptop.table(Todo.self).pull(queryId: "all")  // incremental: only what changed
    return try await screen.next() ?? []                 // the pulled page, in one new result
}
