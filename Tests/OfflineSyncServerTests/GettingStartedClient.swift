import Foundation
import OfflineSync            // models, the context, requests, observations, the sync status
import OfflineSyncSQLite      // the local store
import OfflineSyncURLSession  // URLSessionRemoteStore: the sync server over HTTP, and its network monitor

/// A todo of a shared list. Swift names properties in camelCase, the sync rules name the
/// server's snake_case fields: the coding keys map one to the other, and the rules'
/// `key: list_id` then finds `listId`.
struct ListTodo: SyncModel, Equatable {
    static let tableName = "todos"
    static let indexes = [IndexDefinition(Columns.listId)]

    var id: UUID
    var listId: String
    var title: String
    var done: Bool
    var version: String?                 // assigned by the server

    enum CodingKeys: String, CodingKey {
        case id, title, done, version
        case listId = "list_id"          // the field the rules and the server see
    }

    enum Columns {
        static let listId = Column(\ListTodo.listId, CodingKeys.listId)
        static let done = Column(\ListTodo.done, CodingKeys.done)
    }
}

/// Opens the app's store and keeps its todos in sync with the server in the background.
/// `token` returns the identity provider's current access token; it is asked again after
/// a 401, and a refusal after that halts background sync until `start` is called again.
func startSyncing(server: String, storeFile: String,
                  token: @escaping @Sendable () async throws -> String) async throws -> SyncContext {
    let store = try await SQLiteStore(path: storeFile)
    let remote = URLSessionRemoteStore(baseURL: server, token: token)
    let context = try await SyncContext(store: store, remote: remote)
    try await context.defineTable(ListTodo.self)
    // Syncs now and after every change the server announces, whenever the server is
    // reachable (this monitor probes it; feed a ManualNetworkMonitor from the platform's
    // reachability API instead, if you have one).
    await context.start(models: [ListTodo.self], network: remote.networkMonitor())
    return context
}

/// What a status bar says about sync.
func statusLine(_ status: SyncStatus) -> String {
    if let failure = status.lastError {
        switch failure.kind {
        case .authentication: return "signed out: sign in to sync"   // halted: call start again
        case .store: return "storage problem: \(failure.error.message)"
        case .transient: return failure.willRetry ? "offline, retrying" : failure.error.message
        case .rejected, .cancelled: return failure.error.message      // the server answered: it refused
        }
    }
    if let (table, refused) = status.tableErrors.min(by: { $0.key < $1.key }) {
        return "\(table) not synced: \(refused.error.message)"       // the other tables still sync
    }
    if status.uploading || status.downloading { return "syncing…" }
    return status.hasSynced ? "up to date" : "not synced yet"
}

/// The open todos of one list, now and after every change, as a screen shows them.
func openTodos(of list: String, in context: SyncContext) -> ObservedValue<[ListTodo]> {
    context.table(ListTodo.self).observe(
        ListTodo.filter(ListTodo.Columns.listId == list && ListTodo.Columns.done == false).order(ListTodo.Columns.listId.ascending))
}
