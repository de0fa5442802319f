import Foundation
import GRDB
import OfflineSync
import OfflineSyncGRDB
import OfflineSyncTestSupport
import Testing

@Suite("GRDB adapter: an app's own Codable record holds an Attachment")
struct GRDBAttachmentTests {
    /// One device: the app's database with its migration, and a context on a store in it.
    static func device(_ url: URL, _ live: LoopbackServer) async throws -> (DatabaseQueue, SyncContext) {
        let database = try DatabaseQueue(path: url.path)
        var migrator = DatabaseMigrator()
        registerInspections(in: &migrator)
        try migrator.migrate(database)
        let store = try await GRDBStore(database)
        let context = try await SyncContext(store: store, remote: try await live.remote("alice"))
        try await context.defineTable(inspectionSchema)
        return (database, context)
    }

    // Against the old column codec the first device's capture threw schemaMismatch ("the key
    // '$attachment' starts with '$'") from every transaction, so queuedOperations() threw;
    // with the column hand-written as "$$attachment", the second device's Inspection failed
    // to decode (keyNotFound '$attachment').
    @Test("the guide shows GRDBAttachmentExample.swift as it is; a photo written with GRDB on one device is decoded, and its bytes read, on another",
          .timeLimit(.minutes(4)))  // a hang, not the whole suite's load
    func photoTravelsInTheAppsRecord() async throws {
        let example = try DocumentExample(in: "Docs/GRDB.md", showing: "Tests/OfflineSyncGRDBTests/GRDBAttachmentExample.swift")
        #expect(example.shown == example.source, "the guide shows GRDBAttachmentExample.swift as it is")

        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let (phoneDatabase, phone) = try await Self.device(directory.appendingPathComponent("phone.sqlite"), live)
            let (laptopDatabase, laptop) = try await Self.device(directory.appendingPathComponent("laptop.sqlite"), live)
            let jpeg = Data((0..<300_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 11) })

            try await addInspection(site: "north", jpeg: jpeg, context: phone, database: phoneDatabase)
            // The column holds what the app's Attachment encodes; the engine reads it as a reference.
            let column = try await phoneDatabase.read { db in try String.fetchOne(db, sql: "SELECT photo FROM inspection") }
            #expect(column?.hasPrefix("{\"$attachment\":") == true, "\(column ?? "NULL")")
            let queued = try await phone.queuedOperations()
            #expect(queued.map(\.kind) == [.insert])
            let item = try #require(queued.first?.item)
            let reference = try #require(try OfflineSync.Attachment(value: item["photo"]))
            #expect(reference.size == Int64(jpeg.count) && reference.fileName == "north.jpg")
            #expect(try await phone.attachmentState(reference) == .pendingUpload)
            #expect(try await phone.push().applied == 1)
            #expect(try await phone.attachmentState(reference) == .local)

            // The other device pulls the record into its own table and its own record type reads it.
            _ = try await laptop.pull("inspection")
            let pulled = try await laptopDatabase.read { db in try Inspection.fetchAll(db) }
            #expect(pulled.count == 1)
            let inspection = try #require(pulled.first)
            #expect(inspection.site == "north" && inspection.photo == reference)
            let written = try await laptopDatabase.read { db in try String.fetchOne(db, sql: "SELECT photo FROM inspection") }
            #expect(written?.hasPrefix("{\"$attachment\":") == true, "\(written ?? "NULL")")
            #expect(try await laptop.attachmentState(reference) == .remote)
            #expect(try await photoBytes(of: inspection, context: laptop) == jpeg)
            #expect(try await laptop.attachmentState(reference) == .local)

            // The second device saves the record it read: the same reference goes back, once.
            try await laptopDatabase.write { db in
                var edited = inspection
                edited.site = "north gate"
                try edited.update(db)
            }
            #expect(try await laptop.push().applied == 1)
            _ = try await phone.pull("inspection")
            let back = try await phoneDatabase.read { db in try Inspection.fetchOne(db, key: inspection.id) }
            #expect(back == Inspection(id: inspection.id, site: "north gate", photo: reference))
            #expect(try await phone.queuedOperations().isEmpty)
            #expect(try await laptop.queuedOperations().isEmpty)

            try await phone.close()   // closes its store too; the database stays the app's
            try await laptop.close()
            try await live.stop()
        }
    }
}
