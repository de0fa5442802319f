import Foundation
import GRDB
import OfflineSync
import OfflineSyncGRDB
import OfflineSyncTestSupport
import Testing

@Suite("GRDB adapter: a row the engine cannot read stops nothing else")
struct UnreadableRowTests {
    static let notes = TableSchema("note", fields: [FieldDefinition("title", .string), FieldDefinition("tags", .object)])

    // Against the old capture the first engine transaction after the bad row threw
    // schemaMismatch, and every one after it: queuedOperationCount(), push() and sync() all
    // threw for the whole store, and no later row reached the server.
    @Test("each unreadable row is one failed operation naming it; later rows are pushed; writing the row again sends it",
          .timeLimit(.minutes(4)))  // a hang, not the whole suite's load
    func unreadableRowIsReportedAndTheRestSyncs() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let database = try DatabaseQueue(path: directory.appendingPathComponent("app.sqlite").path)
            try await database.write { db in
                try db.create(table: "note") { t in
                    t.primaryKey("id", .text)
                    t.column("title", .text)
                    t.column("tags", .text)
                }
            }
            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(Self.notes)

            // A key that starts with a single '$' is reserved (it is no value), and an
            // attachment reference must have its shape: neither row can be read.
            try await database.write { db in
                try db.execute(sql: "INSERT INTO note (id, title, tags) VALUES ('bad', 'Broken', '{\"$color\": \"red\"}')")
                try db.execute(sql: """
                    INSERT INTO note (id, title, tags) VALUES ('ref', 'Odd', '{"$attachment": "not a hash", "size": 1, "contentType": "x"}')
                    """)
            }
            try await database.write { db in
                try db.execute(sql: "INSERT INTO note (id, title, tags) VALUES ('good', 'Fine', '{\"color\": \"red\"}')")
            }
            #expect(try await app.queuedOperationCount() == 3)
            let errors = try await app.operationErrors().sorted { $0.itemId < $1.itemId }
            #expect(errors.map(\.itemId) == ["bad", "ref"])
            #expect(errors.allSatisfy { $0.table == "note" && $0.kind == .insert && $0.clientRecord == nil })
            #expect(errors.map(\.code) == [.schemaMismatch, .invalidValue])
            #expect(errors.first?.message.contains("column 'tags'") == true, "\(errors.first?.message ?? "")")

            // The rest syncs, and so does a row written afterwards.
            try await app.sync(["note"])
            try await database.write { db in try db.execute(sql: "INSERT INTO note (id, title) VALUES ('later', 'After')") }
            #expect(try await app.push().applied == 1)
            let phone = try await live.device("alice", tables: [Self.notes])
            _ = try await phone.pull("note")
            #expect(try await phone.table("note").query().map(\.id) == ["good", "later"])
            #expect(try await phone.table("note").get("good")?.fields == ["title": "Fine", "tags": ["color": "red"]])

            // The engine reads around the row it cannot read: a query leaves it out, a read by
            // id leaves out the column, and the app's value stays as the app wrote it. The row
            // with the malformed reference reads (as a pulled one would); only its write was refused.
            #expect(try await app.table("note").query().map(\.id) == ["good", "later", "ref"])
            #expect(try await app.table("note").get("bad")?.fields == ["title": "Broken"])
            let kept = try await database.read { db in try String.fetchOne(db, sql: "SELECT tags FROM note WHERE id = 'bad'") }
            #expect(kept == "{\"$color\": \"red\"}")

            // Writing the rows again takes the refusals back: they are queued and pushed.
            try await database.write { db in
                try db.execute(sql: "UPDATE note SET tags = '{\"$$color\": \"red\"}' WHERE id = 'bad'")
                try db.execute(sql: "UPDATE note SET tags = NULL WHERE id = 'ref'")
            }
            #expect(try await app.operationErrors().isEmpty)
            let queued = try await app.queuedOperations()
            #expect(queued.map(\.kind) == [.insert, .insert])
            #expect(Set(queued.map(\.itemId)) == ["bad", "ref"])
            #expect(try await app.push().applied == 2)
            _ = try await phone.pull("note")
            #expect(try await phone.table("note").get("bad")?.fields == ["title": "Broken", "tags": ["$color": "red"]])
            #expect(try await phone.table("note").get("ref")?.fields == ["title": "Odd"])
            #expect(try await app.queuedOperationCount() == 0)

            await phone.stop()
            try await app.close()
            try await live.stop()
        }
    }

    @Test("a known row made unreadable holds back its own queued write, and the write that mends it sends every field")
    func knownRowHeldBackThenMended() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let database = try DatabaseQueue(path: directory.appendingPathComponent("app.sqlite").path)
            try await database.write { db in
                try db.create(table: "note") { t in
                    t.primaryKey("id", .text)
                    t.column("title", .text)
                    t.column("tags", .text)
                }
                try db.execute(sql: "INSERT INTO note (id, title, tags) VALUES ('n1', 'One', '{\"k\": 1}')")
            }
            let store = try await GRDBStore(database)
            let app = try await SyncContext(store: store, remote: try await live.remote("alice"))
            try await app.defineTable(Self.notes)
            #expect(try await app.push().applied == 1)

            // One write changes the title and breaks the tags: neither is sent while the row
            // cannot be read.
            try await database.write { db in
                try db.execute(sql: "UPDATE note SET title = 'One!', tags = '{\"$k\": 1}' WHERE id = 'n1'")
            }
            #expect(try await app.operationErrors().map(\.kind) == [.update])
            #expect(try await app.push().sent == 0)
            // Mending only the tags sends the title too.
            try await database.write { db in try db.execute(sql: "UPDATE note SET tags = '{\"k\": 2}' WHERE id = 'n1'") }
            #expect(try await app.operationErrors().isEmpty)
            let queued = try await app.queuedOperations()
            #expect(queued.map(\.kind) == [.update] && queued.first?.changedFields == ["tags", "title"])
            #expect(try await app.push().applied == 1)
            let phone = try await live.device("alice", tables: [Self.notes])
            _ = try await phone.pull("note")
            #expect(try await phone.table("note").get("n1")?.fields == ["title": "One!", "tags": ["k": 2]])

            await phone.stop()
            try await app.close()
            try await live.stop()
        }
    }
}
