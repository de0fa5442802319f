import Foundation
import Logging
import OfflineSync
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import OfflineSyncURLSession
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Swift Testing has an `Attachment` type of its own.
private typealias Attachment = OfflineSync.Attachment

/// Attachments through a context: uploaded before the record's push, resumed from the
/// server's offset, downloaded on first access by another device and checked.
@Suite("Attachments: sync between devices")
struct AttachmentSyncTests {
    static let schema = TableSchema("inspections", fields: [FieldDefinition("site", .string)])
    static let photo: [UInt8] = (0..<2_500_000).map { UInt8(truncatingIfNeeded: ($0 &* 40_503) >> 5) }

    /// The attachment events a context publishes, kept as they come.
    final class Progress: Sendable {
        private let seen = Mutex<[(direction: AttachmentTransferDirection, done: Int64)]>([])
        func add(_ direction: AttachmentTransferDirection, _ done: Int64) { seen.withLock { $0.append((direction, done)) } }
        var all: [(direction: AttachmentTransferDirection, done: Int64)] { seen.withLock { $0 } }

        static func watch(_ context: SyncContext) -> (Progress, Task<Void, Never>) {
            let progress = Progress(), events = context.events()
            let task = Task {
                for await event in events {
                    if case let .attachmentProgress(_, direction, done, _) = event { progress.add(direction, done) }
                }
            }
            return (progress, task)
        }
    }

    @Test("in process: the photo goes up before its record; a second device fetches it on first access, once for concurrent callers")
    func inProcess() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let first = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
        let second = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
        for context in [first, second] { try await context.defineTable(Self.schema) }
        let photo = try await first.addAttachment(Self.photo, contentType: "image/jpeg", fileName: "door.jpg")
        try await first.table("inspections").insert(Record(id: "i1", fields: ["site": "north", "photo": photo.value]))
        _ = try await first.push()
        #expect(try await first.attachmentState(photo) == .local)
        #expect(try await first.queuedOperationCount() == 0)

        try await second.table("inspections").pull()
        let pulled = try #require(try await second.table("inspections").get("i1"))
        let reference = try #require(try Attachment(value: pulled["photo"]))
        #expect(reference == photo)
        #expect(try await second.attachmentState(reference) == .remote)
        async let a = second.attachmentData(reference)
        async let b = second.attachmentData(reference)
        let (x, y) = try await (a, b)
        let same = x == Data(Self.photo) && y == x
        #expect(same, "both callers get the photo")
        #expect(try await second.attachmentState(reference) == .local)
        try await first.close()
        try await second.close()
    }

    @Test("over HTTP: an upload cut off goes on from the server's offset; the other device downloads it to a file it can hand on")
    func overHTTP() async throws {
        try await LiveServer.with { live in
            try await withTemporaryDirectory { directory in
                let token = try await live.token("alice")
                let remote = URLSessionRemoteStore(baseURL: live.baseURL) { token }
                let first = try await SyncContext(store: try await SQLiteStore(path: directory.appendingPathComponent("a.sqlite").path), remote: remote)
                let second = try await SyncContext(store: try await SQLiteStore(path: directory.appendingPathComponent("b.sqlite").path),
                                                   remote: try await live.remote("alice"))
                for context in [first, second] { try await context.defineTable(Self.schema) }
                let photo = try await first.addAttachment(Self.photo, contentType: "image/jpeg")
                try await first.table("inspections").insert(Record(id: "i1", fields: ["photo": photo.value]))
                // What an upload killed half way leaves on the server.
                let half = Int64(Self.photo.count / 2)
                let partial = try await remote.appendAttachment(photo, offset: 0, bytes: Array(Self.photo[..<Int(half)]), complete: false)
                #expect(partial == AttachmentUploadState(offset: half, complete: false))
                let (progress, watching) = Progress.watch(first)
                _ = try await first.push()
                first.finishEvents()
                await watching.value
                let uploads = progress.all.filter { $0.direction == .upload }.map(\.done)
                #expect(!uploads.isEmpty)
                #expect(uploads.allSatisfy { $0 > half }, "the push sent only what the server lacked: \(uploads)")
                #expect(uploads.last == Int64(Self.photo.count))

                try await second.table("inspections").pull()
                let url = try await second.attachmentFileURL(photo)
                let stored = try #require(fileContents(url.path))
                #expect(sha256Hex(stored) == photo.sha256)
                #expect(try await second.attachmentState(photo) == .local)
                try await first.close()
                try await second.close()
            }
        }
    }

    @Test("over AsyncHTTPClient an upload streams from the file, 16 MiB per request, and resumes from the server's offset")
    func streamedUpload() async throws {
        try await LiveServer.with { live in
            try await withTemporaryDirectory { directory in
                let remote = try await live.remote("alice")
                #expect(remote.attachmentRequestLimit == 16 << 20)
                let context = try await SyncContext(store: try await SQLiteStore(path: directory.appendingPathComponent("a.sqlite").path), remote: remote)
                try await context.defineTable(Self.schema)
                let bytes = (0..<20_000_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }
                let file = try await context.addAttachment(bytes, contentType: "video/mp4")
                try await context.table("inspections").insert(Record(id: "i1", fields: ["clip": file.value]))
                let partial = try await remote.appendAttachment(file, offset: 0, bytes: Array(bytes[..<3_000_000]), complete: false)
                #expect(partial == AttachmentUploadState(offset: 3_000_000, complete: false))
                let (progress, watching) = Progress.watch(context)
                // The status shows the transfer while it runs, and nothing once it ended.
                let statuses = context.observeStatus()
                let seen = Task { () -> AttachmentTransferProgress? in
                    for await status in statuses {
                        if let transfer = status.attachmentTransfers[file.sha256] { return transfer }
                    }
                    return nil
                }
                _ = try await context.push()
                // Seen during the push, or never: the status now has no entry to see.
                seen.cancel()
                let shown = await seen.value
                #expect(shown?.direction == .upload && shown?.total == 20_000_000 && (shown?.done ?? 0) > 3_000_000, "\(String(describing: shown))")
                #expect(context.status.attachmentTransfers.isEmpty)
                context.finishEvents()
                await watching.value
                let uploads = progress.all.filter { $0.direction == .upload }.map(\.done)
                #expect(uploads.allSatisfy { $0 > 3_000_000 }, "only what the server lacked was sent: \(uploads.prefix(3))")
                #expect(uploads.last == 20_000_000)
                #expect(try await context.queuedOperationCount() == 0)
                let second = try await SyncContext(store: InMemoryStore(), remote: try await live.remote("alice"))
                #expect(sha256Hex(Array(try await second.attachmentData(file))) == file.sha256)
                try await context.close()
                try await second.close()
            }
        }
    }

    @Test("a file that is not here and cannot be fetched is attachmentUnavailable; one the server holds for nobody here is attachmentMissing")
    func unavailableAndMissing() async throws {
        try await LiveServer.with { live in
            let offline = HTTPRemoteStore(baseURL: "http://127.0.0.1:1", configuration: .init(maxAttempts: 1)) { "token" }
            let context = try await SyncContext(store: InMemoryStore(), remote: offline)
            let reference = try Attachment(sha256: sha256Hex(Self.photo), size: Int64(Self.photo.count), contentType: "image/jpeg")
            await #expect(throws: SyncError.self) { try await context.attachmentData(reference) }
            do { _ = try await context.attachmentData(reference) } catch let error as SyncError {
                #expect(error.code == .attachmentUnavailable, "\(error)")
            }
            try await context.close()
            let online = try await SyncContext(store: InMemoryStore(), remote: try await live.remote("bob"))
            do {
                _ = try await online.attachmentData(reference)
                Issue.record("bob read a file nobody uploaded for him")
            } catch let error as SyncError {
                #expect(error.code == .attachmentMissing, "\(error)")
            }
            try await online.close()
        }
    }

    @Test("after move-out the member's device deletes the files of the rows that left; a file waiting to upload stays")
    func moveOutRemovesFiles() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: sharedListsRules(ownerReadsMembers: true))
        let alice = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
        let bobStore = InMemoryStore()
        let bob = try await SyncContext(store: bobStore, remote: service.remote(for: Identity("bob")))
        for context in [alice, bob] {
            for table in sharedListsTables + ["notes"] { try await context.defineTable(TableSchema(table)) }
        }
        let photo = try await alice.addAttachment(Array(Self.photo[..<300_000]), contentType: "image/jpeg")
        try await alice.transaction { txn in
            try txn.insert(Record(id: "L1", fields: ["name": "site"]), into: "lists")
            try txn.insert(Record(id: "m-bob", fields: ["list_id": "L1", "user_id": "bob"]), into: "list_members")
            try txn.insert(Record(id: "m-alice", fields: ["list_id": "L1", "user_id": "alice"]), into: "list_members")
            try txn.insert(Record(id: "t1", fields: ["list_id": "L1", "photo": photo.value]), into: "todos")
        }
        _ = try await alice.push()
        try await bob.sync(["list_members", "todos"])
        #expect(try await bob.attachmentData(photo).count == 300_000)
        // Bob's own photo, not yet uploaded, on a note of his: it must survive the collection.
        let draft = try await bob.addAttachment(Array(repeating: 7, count: 1000), contentType: "image/png")
        try await bob.table("notes").insert(Record(id: "n1", fields: ["photo": draft.value]))
        try await alice.table("list_members").delete(id: "m-bob")
        _ = try await alice.push()
        try await bob.table("todos").pull(queryId: "default")
        #expect(try await bob.table("todos").query().isEmpty)
        #expect(try await bob.attachmentState(photo) == nil)
        #expect(try bobStore.attachmentFiles?.size(of: photo.sha256) == nil, "the file left with its row")
        #expect(try await bob.attachmentState(draft) == .pendingUpload)
        #expect(try bobStore.attachmentFiles?.size(of: draft.sha256) == 1000)
        try await alice.close()
        try await bob.close()
    }

    @Test("the cache budget evicts the least recently used downloaded file, never a pinned one; an evicted file comes back on use")
    func cacheBudget() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let writer = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
        var options = SyncOptions()
        options.attachments.cacheBudget = 500_000
        let reader = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")), options: options)
        for context in [writer, reader] { try await context.defineTable(TableSchema("shots")) }
        var photos: [Attachment] = []
        for index in 0..<3 {
            let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &+ index) }
            let photo = try await writer.addAttachment(bytes, contentType: "image/jpeg")
            try await writer.table("shots").insert(Record(id: "s\(index)", fields: ["photo": photo.value]))
            photos.append(photo)
        }
        _ = try await writer.push()
        try await reader.table("shots").pull()
        _ = try await reader.attachmentData(photos[0])
        try await reader.pinAttachment(photos[0])
        _ = try await reader.attachmentData(photos[1])
        #expect(try await reader.attachmentState(photos[0]) == .local, "pinned: kept over the budget")
        #expect(try await reader.attachmentState(photos[1]) == .local, "the file just fetched is kept")
        _ = try await reader.attachmentData(photos[2])
        #expect(try await reader.attachmentState(photos[0]) == .local)
        #expect(try await reader.attachmentState(photos[1]) == .remote, "the least recently used unpinned file went")
        #expect(try await reader.attachmentState(photos[2]) == .local)
        #expect(try await reader.attachmentData(photos[1]).count == 300_000)
        try await writer.close()
        try await reader.close()
    }

    /// A writer that pushed `count` photos of 100 000 bytes each, and a reader on a SQLite
    /// store in `directory` (plain files, a `BlobDirectory`) that pulled their records.
    private static func photosToRead(_ count: Int, in directory: URL, options: SyncOptions = SyncOptions())
        async throws -> (writer: SyncContext, reader: SyncContext, photos: [Attachment], blobs: BlobDirectory) {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let writer = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
        let store = try await SQLiteStore(path: directory.appendingPathComponent("reader.sqlite").path)
        let blobs = try #require(store.attachmentFiles as? BlobDirectory)
        let reader = try await SyncContext(store: store, remote: service.remote(for: Identity("alice")), options: options)
        for context in [writer, reader] { try await context.defineTable(TableSchema("shots")) }
        var photos: [Attachment] = []
        for index in 0..<count {
            let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
            let photo = try await writer.addAttachment(bytes, contentType: "image/jpeg")
            try await writer.table("shots").insert(Record(id: "s\(index)", fields: ["photo": photo.value]))
            photos.append(photo)
        }
        _ = try await writer.push()
        try await reader.table("shots").pull()
        return (writer, reader, photos, blobs)
    }

    @Test("a file held by withAttachmentFile stays at its URL through an eviction and a sweep that would remove it, and goes after")
    func heldFileSurvivesEviction() async throws {
        try await withTemporaryDirectory { directory in
            let (writer, reader, photos, blobs) = try await Self.photosToRead(1, in: directory)
            let photo = photos[0]
            let path = blobs.objectPath(photo.sha256)
            let read = try await reader.withAttachmentFile(photo) { url in
                #expect(FileManager.default.fileExists(atPath: url.path))
                #expect(try await reader.evictAttachments(toBudget: 0) == 0, "held: the budget does not take it")
                #expect(try await reader.attachmentState(photo) == .local)
                return try Data(contentsOf: url)
            }
            #expect(sha256Hex([UInt8](read)) == photo.sha256, "the file was whole at its URL all along")
            #expect(try await reader.evictAttachments(toBudget: 0) == 1, "let go: the budget takes it")
            #expect(try await reader.attachmentState(photo) == .remote)
            #expect(!FileManager.default.fileExists(atPath: path))

            // The sweep of files no record references holds off too (the file fetched again).
            try await reader.withAttachmentFile(photo) { url in
                try await reader.table("shots").delete(id: "s0")
                #expect(try await reader.removeUnreferencedAttachments() == 0, "held: the sweep leaves it")
                #expect(FileManager.default.fileExists(atPath: url.path))
            }
            #expect(try await reader.removeUnreferencedAttachments() == 1, "let go: the sweep takes it")
            #expect(try await reader.attachmentState(photo) == nil)
            #expect(!FileManager.default.fileExists(atPath: path))
            try await writer.close()
            try await reader.close()
        }
    }

    @Test("an eviction that cannot remove a file is logged and set as status.lastError; the download that ran it stands, the other files still go")
    func evictionFailureIsReported() async throws {
        try await withTemporaryDirectory { directory in
            let lines = Box<[String]>([])
            var options = SyncOptions()
            options.logger = Logger(label: "capture") { _ in CapturingLogHandler(lines: lines) }
            options.attachments.cacheBudget = 150_000
            let (writer, reader, photos, blobs) = try await Self.photosToRead(3, in: directory, options: options)
            _ = try await reader.attachmentData(photos[0])
            blobs.injectFault(.remove, at: blobs.objectPath(photos[0].sha256), errno: EACCES)
            // Over the budget: this download's eviction picks the first file and cannot remove it.
            #expect(try await reader.attachmentData(photos[1]).count == 100_000, "the download stands")
            let failure = try #require(reader.status.lastError, "the failed eviction is reported")
            #expect(failure.error.code == .storageFailure)
            #expect(lines.value.contains { $0.contains("could not evict") }, "and logged: \(lines.value)")
            #expect(try await reader.attachmentState(photos[0]) == .local, "the file it could not remove is still listed here")
            #expect(FileManager.default.fileExists(atPath: blobs.objectPath(photos[0].sha256)))

            // A call that asks gets the error, and the files it can remove still go.
            _ = try await reader.attachmentData(photos[2])
            await #expect(throws: SyncError.self) { try await reader.evictAttachments(toBudget: 0) }
            #expect(try await reader.attachmentState(photos[1]) == .remote)
            #expect(try await reader.attachmentState(photos[2]) == .remote)
            blobs.injectFault(.remove, at: blobs.objectPath(photos[0].sha256), errno: nil)
            #expect(try await reader.evictAttachments(toBudget: 0) == 1)
            #expect(try await reader.attachmentState(photos[0]) == .remote)
            try await writer.close()
            try await reader.close()
        }
    }
}
