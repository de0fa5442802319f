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

    /// How many rows the adapter's refusal notes (`__osync_refused`) hold.
    static func refusalNotes(_ database: DatabaseQueue) async throws -> Int {
        try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \"__osync_refused\"") ?? -1 }
    }

    /// A database with the app's `note` table, holding `rows` (SQL values lists).
    static func database(in directory: URL, rows: [String] = []) async throws -> DatabaseQueue {
        let database = try DatabaseQueue(path: directory.appendingPathComponent("app.sqlite").path)
        try await database.write { db in
            try db.create(table: "note") { t in
                t.primaryKey("id", .text)
                t.column("title", .text)
                t.column("tags", .text)
            }
            for row in rows { try db.execute(sql: "INSERT INTO note (id, title, tags) VALUES \(row)") }
        }
        return database
    }

    // Against the old retry, the operation was sent without its item: the server refused it
    // (400), for ever, and `operationErrors()` said so with another error.
    @Test("resolve(.retry) of a refused write whose row still cannot be read leaves it failed with its error, and sends nothing; the write that mends the row sends it")
    func retryOfAnUnreadableRowChangesNothing() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let database = try await Self.database(in: directory)
            let app = try await SyncContext(store: try await GRDBStore(database), remote: try await live.remote("alice"))
            try await app.defineTable(Self.notes)
            try await database.write { db in
                try db.execute(sql: "INSERT INTO note (id, title, tags) VALUES ('bad', 'Broken', '{\"$color\": \"red\"}')")
            }
            let refused = try #require(try await app.operationErrors().first)
            try await app.resolve(refused, with: .retry)
            let still = try await app.operationErrors()
            #expect(still.map(\.operationId) == [refused.operationId])
            #expect(still.first?.code == .schemaMismatch && still.first?.message == refused.message, "\(still)")
            #expect(try await app.push().sent == 0)
            #expect(try await Self.refusalNotes(database) == 1, "the refusal was not taken back")

            // The app's next write mends the row: the refusal is taken back, with its note.
            try await database.write { db in try db.execute(sql: "UPDATE note SET tags = '{\"color\": \"red\"}' WHERE id = 'bad'") }
            #expect(try await app.operationErrors().isEmpty)
            #expect(try await Self.refusalNotes(database) == 0)
            #expect(try await app.push().applied == 1)
            let phone = try await live.device("alice", tables: [Self.notes])
            _ = try await phone.pull("note")
            #expect(try await phone.table("note").get("bad")?.fields == ["title": "Broken", "tags": ["color": "red"]])

            await phone.stop()
            try await app.close()
            try await live.stop()
        }
    }

    // Against the old retry, the operation was sent without its item (400, for ever), and the
    // app's next write dropped the refusal's note though the refusal had not been taken back.
    @Test("resolve(.retry) of a refused write whose row the app mended through the engine sends the row whole; the refusal's note stays until its operation has gone")
    func retrySendsTheMendedRow() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let database = try await Self.database(in: directory, rows: ["('n1', 'One', '{\"k\": 1}')"])
            let app = try await SyncContext(store: try await GRDBStore(database), remote: try await live.remote("alice"))
            try await app.defineTable(Self.notes)
            #expect(try await app.push().applied == 1)

            // One write changes the title and breaks the tags: refused, and noted.
            try await database.write { db in
                try db.execute(sql: "UPDATE note SET title = 'One!', tags = '{\"$k\": 1}' WHERE id = 'n1'")
            }
            let refused = try #require(try await app.operationErrors().first)
            #expect(try await Self.refusalNotes(database) == 1)
            // The app mends the tags through the engine (queued behind the refusal), and retries.
            _ = try await app.table("note").update(Record(id: "n1", fields: ["title": "One!", "tags": ["k": 2]]))
            try await app.resolve(refused, with: .retry)
            #expect(try await app.operationErrors().isEmpty)
            let retried = try #require(try await app.queuedOperations().first { $0.id == refused.operationId })
            #expect(retried.item?.fields == ["title": "One!", "tags": ["k": 2]])
            #expect(retried.changedFields == ["tags", "title"], "its changes were never read: every field counts")

            // A write of the row while the retry waits does not end the refusal: its note stays.
            try await database.write { db in try db.execute(sql: "UPDATE note SET title = 'One!!' WHERE id = 'n1'") }
            #expect(try await Self.refusalNotes(database) == 1)
            var rounds = 0
            while try await app.queuedOperationCount() > 0, rounds < 3 {
                _ = try await app.push()
                rounds += 1
            }
            #expect(try await app.queuedOperationCount() == 0)
            #expect(try await app.operationErrors().isEmpty)
            let phone = try await live.device("alice", tables: [Self.notes])
            _ = try await phone.pull("note")
            #expect(try await phone.table("note").get("n1")?.fields == ["title": "One!!", "tags": ["k": 2]])

            // Its operation has gone: the next write of the row ends the note (once the engine
            // takes the captured write in, at its next transaction: the push), and the write
            // after that counts only the field it changed.
            try await database.write { db in try db.execute(sql: "UPDATE note SET title = 'Two' WHERE id = 'n1'") }
            _ = try await app.push()
            #expect(try await Self.refusalNotes(database) == 0)
            try await database.write { db in try db.execute(sql: "UPDATE note SET title = 'Three' WHERE id = 'n1'") }
            #expect(try await app.queuedOperations().map(\.changedFields) == [["title"]])

            await phone.stop()
            try await app.close()
            try await live.stop()
        }
    }

    // Against the old count, a whole table's count was SQL's count(*), the unreadable row
    // included: 3 here, where the query and a filtered count found 2.
    @Test("a whole table's count agrees with its query and with a filtered count: a row the engine cannot read is in none of them")
    func countsAgree() async throws {
        try await withTemporaryDirectory { directory in
            let database = try await Self.database(in: directory)
            let app = try await SyncContext(store: try await GRDBStore(database), remote: try await LoopbackServer.unusedRemote())
            try await app.defineTable(Self.notes)
            // One row cannot be read; one was refused for its attachment reference, but reads.
            try await database.write { db in
                try db.execute(sql: "INSERT INTO note (id, title, tags) VALUES ('bad', 'Broken', '{\"$color\": \"red\"}')")
                try db.execute(sql: """
                    INSERT INTO note (id, title, tags) VALUES ('ref', 'Odd', '{"$attachment": "not a hash", "size": 1, "contentType": "x"}')
                    """)
                try db.execute(sql: "INSERT INTO note (id, title, tags) VALUES ('good', 'Fine', '{\"color\": \"red\"}')")
            }
            let notes = app.table("note")
            let titled: QueryPredicate = .compare("title", .notEqual, .string(""))
            #expect(try await Set(notes.query().map(\.id)) == ["good", "ref"])
            #expect(try await notes.count() == 2)
            #expect(try await notes.count(titled) == 2)

            // Mended, the row counts; broken again, it does not.
            try await database.write { db in try db.execute(sql: "UPDATE note SET tags = NULL WHERE id = 'bad'") }
            #expect(try await notes.count() == 3)
            #expect(try await notes.count(titled) == 3)
            try await database.write { db in try db.execute(sql: "UPDATE note SET tags = '{\"$shade\": 1}' WHERE id = 'bad'") }
            #expect(try await notes.count() == 2)
            #expect(try await notes.count(titled) == 2)
            try await app.close()
        }
    }
}
