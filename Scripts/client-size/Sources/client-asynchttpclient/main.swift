// A whole client in little code: a SQLite store, one table, a write, a sync and the change
// channel, so the binary links what an app's sync needs and no more.
import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncHTTP

let arguments = CommandLine.arguments
guard arguments.count == 4 else {
    print("usage: \(arguments[0]) SERVER-URL TOKEN STORE-FILE")
    exit(2)
}
let (server, token, file) = (arguments[1], arguments[2], arguments[3])
let remote = HTTPRemoteStore(baseURL: server, token: { token })
let context = try await SyncContext(store: try await SQLiteStore(path: file), remote: remote)
try await context.defineTable(TableSchema("notes", fields: [FieldDefinition("title", .string)]))
_ = try await context.table("notes").insert(Record(id: UUID().uuidString, fields: ["title": "hello"]))
try await context.sync(["notes"])
let first = await remote.changes().first { _ in true }
print("synced; channel: \(first.map { String(describing: $0) } ?? "ended")")
