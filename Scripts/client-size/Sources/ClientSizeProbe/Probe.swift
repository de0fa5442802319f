// What both measured clients do, so they differ only in the remote they link: a SQLite store,
// one table, a write, a sync and the first event of the change channel.
import Foundation
import OfflineSync
import OfflineSyncSQLite

/// Runs the client against the server at `arguments[1]` with token `arguments[2]` and a store
/// at `arguments[3]`, over the remote `makeRemote` makes from the URL and the token.
public func runProbe<Remote: RemoteStore & RemoteChangeSource>(
    _ arguments: [String], makeRemote: (_ server: String, _ token: String) -> Remote
) async throws {
    guard arguments.count == 4 else {
        print("usage: \(arguments[0]) SERVER-URL TOKEN STORE-FILE")
        exit(2)
    }
    let remote = makeRemote(arguments[1], arguments[2])
    let context = try await SyncContext(store: try await SQLiteStore(path: arguments[3]), remote: remote)
    try await context.defineTable(TableSchema("notes", fields: [FieldDefinition("title", .string)]))
    _ = try await context.table("notes").insert(Record(id: UUID().uuidString, fields: ["title": "hello"]))
    try await context.sync(["notes"])
    let first = await remote.changes(device: nil).first { _ in true }
    print("synced; channel: \(first.map { String(describing: $0) } ?? "ended")")
}
