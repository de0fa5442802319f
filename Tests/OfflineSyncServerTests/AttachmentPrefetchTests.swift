import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import Testing

/// Swift Testing has an `Attachment` type of its own.
private typealias Attachment = OfflineSync.Attachment

/// Prefetch policies: a pull fetches the files of the tables that ask for it, and only those.
@Suite("Attachments: prefetch")
struct AttachmentPrefetchTests {
    /// A writer that stored `count` rows with a photo each in `table`, one push each (so
    /// their `updatedAt` follow the order), and the photos.
    fileprivate static func write(_ count: Int, into table: String, by writer: SyncContext, seed: Int) async throws -> [Attachment] {
        var photos: [Attachment] = []
        for index in 0..<count {
            let photo = try await writer.addAttachment((0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index &+ seed &* 100) },
                                                      contentType: "image/jpeg")
            try await writer.table(table).insert(Record(id: "\(table)-\(index)", fields: ["photo": photo.value]))
            _ = try await writer.push()
            photos.append(photo)
        }
        return photos
    }

    @Test("`all` fetches every file the pulled rows reference, during the pull; a table without a policy fetches none")
    func all() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let writer = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
        var options = SyncOptions()
        options.attachments.prefetch = ["shots": .all]
        let readerStore = InMemoryStore()
        let reader = try await SyncContext(store: readerStore, remote: service.remote(for: Identity("alice")), options: options)
        for context in [writer, reader] {
            try await context.defineTable(TableSchema("shots"))
            try await context.defineTable(TableSchema("docs"))
        }
        let shots = try await Self.write(6, into: "shots", by: writer, seed: 1)
        let docs = try await Self.write(2, into: "docs", by: writer, seed: 2)
        try await reader.sync(["shots", "docs"])
        for photo in shots {
            #expect(try await reader.attachmentState(photo) == .local)
            #expect(try readerStore.attachmentFiles?.size(of: photo.sha256) == photo.size)
        }
        for photo in docs { #expect(try await reader.attachmentState(photo) == .remote) }
        try await writer.close()
        try await reader.close()
    }

    @Test("`newest(n)` fetches the files of the n most recently updated rows, and the next pull follows the newest")
    func newest() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let writer = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
        var options = SyncOptions()
        options.attachments.prefetch = ["feed": .newest(2)]
        let reader = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")), options: options)
        for context in [writer, reader] { try await context.defineTable(TableSchema("feed")) }
        _ = try await Self.write(4, into: "feed", by: writer, seed: 3)
        try await reader.table("feed").pull(queryId: "feed")
        try await Self.expectNewestLocal(2, in: reader)
        // A new row: it is among the newest now, and its file comes with the next pull.
        let added = try await writer.addAttachment(Array(repeating: 9, count: 5000), contentType: "image/png")
        try await writer.table("feed").insert(Record(id: "feed-new", fields: ["photo": added.value]))
        _ = try await writer.push()
        try await reader.table("feed").pull(queryId: "feed")
        #expect(try await reader.attachmentState(added) == .local)
        try await writer.close()
        try await reader.close()
    }

    /// Checks, from the rows as the reader holds them, that the newest `count` rows' files
    /// are here and the others' are not.
    static func expectNewestLocal(_ count: Int, in reader: SyncContext) async throws {
        let rows = try await reader.table("feed").query(Query(order: [SortKey(SystemField.updatedAt, ascending: false), SortKey(SystemField.id)]))
        #expect(rows.count == 4)
        for (index, row) in rows.enumerated() {
            let photo = try #require(try Attachment(value: row["photo"]))
            #expect(try await reader.attachmentState(photo) == (index < count ? .local : .remote), "row \(row.id) at \(index)")
        }
    }
}
