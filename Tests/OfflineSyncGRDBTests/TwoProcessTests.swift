import Foundation
import GRDB
import OfflineSync
import OfflineSyncGRDB
import OfflineSyncTestSupport
import Testing

@Suite("GRDB adapter: an app and its extension on one database file")
struct TwoProcessTests {
    static let notes = TableSchema("notes", fields: [FieldDefinition("writer", .string), FieldDefinition("n", .int)])

    /// The app (this process) and an extension (`offline-sync-harness grdb-extension-writer`)
    /// write the app's `notes` table by SQL at once, each on its own `DatabasePool`; each sees
    /// the other's rows in a GRDB `ValueObservation`, and the app pushes every write once.
    @Test("both processes write; each one's observation sees the other's rows; every write is pushed once",
          .timeLimit(.minutes(5)))  // a hang, not the whole suite's load
    func appAndExtension() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("app.sqlite")
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            let pool = try DatabasePool(path: url.path, configuration: configuration)
            try await pool.write { db in
                try db.create(table: "notes") { t in
                    t.primaryKey("id", .text)
                    t.column("writer", .text)
                    t.column("n", .integer)
                }
            }
            let live = try await LoopbackServer.start()
            let store = try await GRDBStore(pool)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(Self.notes)
            let relay = Task { try await store.relayChangesFromOtherProcesses(every: .milliseconds(20)) }
            let seen = Box<[String]>([])
            let observing = Task {
                let ids = ValueObservation.tracking { db in try String.fetchAll(db, sql: "SELECT id FROM notes") }.removeDuplicates()
                for try await value in ids.values(in: pool) { seen.value = value }
            }

            let count = 100
            let widget = try HarnessChild(["grdb-extension-writer", "--database", url.path, "--name", "w",
                                           "--count", String(count), "--observe", "--until-total", String(2 * count)])
            let ready = await eventually(timeout: .seconds(60)) { widget.lines.contains("ready") || widget.ended }
            try #require(ready && widget.lines.contains("ready"), "the extension did not open the database: \(widget.lines)")
            widget.send("go")
            for i in 0..<count {
                try await pool.write { db in
                    try db.execute(sql: "INSERT INTO notes (id, writer, n) VALUES (?, 'a', ?)", arguments: ["a-\(i)", i])
                }
            }
            // The app's observation shows the extension's rows; the extension's shows the app's.
            #expect(await eventually(timeout: .seconds(60)) { seen.value.count == 2 * count })
            #expect(await eventually(timeout: .seconds(60)) { widget.lines.contains("seen total=\(2 * count) others=\(count)") })
            try await offThePool { widget.process.waitUntilExit() }
            #expect(widget.process.terminationStatus == 0, "\(widget.lines.suffix(3))")
            observing.cancel()
            relay.cancel()

            let pending = try await app.queuedOperations()
            #expect(pending.count == 2 * count && pending.allSatisfy { $0.kind == .insert })
            #expect(Set(pending.map(\.itemId)).count == 2 * count)
            let pushed = try await app.push()
            #expect(pushed.sent == 2 * count && pushed.applied == 2 * count)
            #expect(try await app.push().sent == 0)
            let phone = try await live.device("alice", tables: [Self.notes])
            _ = try await phone.pull("notes")
            #expect(try await phone.table("notes").count() == 2 * count)
            await phone.stop()
            await app.stop()
            try await store.close()
            try await live.stop()
        }
    }
}
