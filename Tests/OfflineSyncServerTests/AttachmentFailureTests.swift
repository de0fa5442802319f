import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
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

/// What a context does when an attachment's file, or the remote's answers about it, are not
/// what they should be: no push is stopped for good by one file, no file is deleted without
/// proof of damage, no upload loops, and a pulled reference cannot make this device upload a
/// file or refuse its own correct references.
@Suite("Attachments: a file gone, damaged, unreadable or misnamed", .timeLimit(.minutes(3)))
struct AttachmentFailureTests {
    static let schema = TableSchema("inspections", fields: [FieldDefinition("site", .string)])

    static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: (($0 &+ seed &* 7_919) &* 2_654_435_761) >> 5) }
    }

    static func reference(_ bytes: [UInt8], size: Int64? = nil) throws -> OfflineSync.Attachment {
        try Attachment(sha256: sha256Hex(bytes), size: size ?? Int64(bytes.count), contentType: "image/jpeg")
    }

    // MARK: A file waiting to upload that is gone

    // Against the old code the push throws attachmentMissing before sending anything, and every
    // later push does the same: i2 never reaches the server.
    @Test("a file waiting to upload that is gone fails only the operations that reference it; the others are pushed, and adding the bytes again recovers")
    func goneFileFailsItsOperationsOnly() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let store = InMemoryStore()
        let device = try await SyncContext(store: store, remote: service.remote(for: Identity("alice")))
        try await device.defineTable(Self.schema)
        let bytes = Self.bytes(50_000, seed: 1)
        let photo = try await device.addAttachment(bytes, contentType: "image/jpeg")
        try await device.table("inspections").insert(Record(id: "i1", fields: ["site": "north", "photo": photo.value]))
        try await device.table("inspections").insert(Record(id: "i2", fields: ["site": "south"]))
        let files = try #require(store.attachmentFiles)
        try files.remove(photo.sha256)

        let summary = try await device.push()
        #expect(summary.applied == 1, "the record without the file was pushed")
        let errors = try await device.operationErrors()
        #expect(errors.map(\.itemId) == ["i1"])
        let refused = try #require(errors.first)
        #expect(refused.code == .attachmentMissing, "\(refused.code): \(refused.message)")
        #expect(try await device.attachmentState(photo) == .remote, "a file that is gone is not taken to be here")

        let other = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
        try await other.defineTable(Self.schema)
        try await other.table("inspections").pull()
        #expect(try await other.table("inspections").get("i2") != nil)
        #expect(try await other.table("inspections").get("i1") == nil)

        // The recovery: the bytes again (the refused write references them), then a retry.
        _ = try await device.addAttachment(bytes, contentType: "image/jpeg")
        #expect(try await device.attachmentState(photo) == .pendingUpload)
        try await device.resolve(refused, with: .retry)
        _ = try await device.push()
        #expect(try await device.operationErrors().isEmpty)
        #expect(try await device.queuedOperationCount() == 0)
        #expect(try await device.attachmentState(photo) == .local)
        try await other.table("inspections").pull()
        let pulled = try #require(try await other.table("inspections").get("i1"))
        #expect(try Attachment(value: pulled["photo"]) == photo)
        #expect(try await other.attachmentData(photo) == Data(bytes))
        try await device.close()
        try await other.close()
    }

    // Against the old code the refusal marks the file waiting to upload without looking for
    // it, and every push from then on throws attachmentMissing: i3 never goes.
    @Test("a record refused for a file the server collected and this device lost turns the file remote; later pushes go on")
    func refusedForALostFile() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let store = InMemoryStore()
        let device = try await SyncContext(store: store, remote: service.remote(for: Identity("alice")))
        try await device.defineTable(Self.schema)
        let bytes = Self.bytes(40_000, seed: 2)
        let photo = try await device.addAttachment(bytes, contentType: "image/jpeg")
        try await device.table("inspections").insert(Record(id: "i1", fields: ["photo": photo.value]))
        _ = try await device.push()
        try await device.table("inspections").delete(id: "i1")
        _ = try await device.push()
        let later = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 2 * 86_400_000)
        #expect(try await service.pruneAttachments(now: later) == 1)
        // The file is lost here too, while its row still says `local`.
        let files = try #require(store.attachmentFiles)
        try files.remove(photo.sha256)
        #expect(try await device.attachmentState(photo) == .local)

        try await device.table("inspections").insert(Record(id: "i2", fields: ["photo": photo.value]))
        _ = try await device.push()
        let refused = try #require(try await device.operationErrors().first)
        #expect(refused.code == .attachmentMissing)
        #expect(try await device.attachmentState(photo) == .remote, "no file here to upload again")

        try await device.table("inspections").insert(Record(id: "i3", fields: ["site": "east"]))
        let summary = try await device.push()
        #expect(summary.applied == 1)
        #expect(try await device.queuedOperationCount() == 1, "only the refused write waits")

        _ = try await device.addAttachment(bytes, contentType: "image/jpeg")
        #expect(try await device.attachmentState(photo) == .pendingUpload)
        try await device.resolve(refused, with: .retry)
        _ = try await device.push()
        #expect(try await device.queuedOperationCount() == 0)
        #expect(try await device.attachmentState(photo) == .local)
        try await device.close()
    }

    // MARK: A file the system cannot read now

    // Against the old code the push throws storageFailure, a `.store` failure that halts the
    // background sync until the app starts it again.
    @Test("a file waiting to upload that the system cannot read now fails the push as busy (retried), fails no operation, and goes up once it reads")
    func unreadableFileIsRetried() async throws {
        try await withTemporaryDirectory { directory in
            let service = try await OfflineSyncService(store: InMemoryStore())
            let store = try await SQLiteStore(path: directory.appendingPathComponent("device.sqlite").path)
            let blobs = try #require(store.attachmentFiles as? BlobDirectory)
            let device = try await SyncContext(store: store, remote: service.remote(for: Identity("alice")))
            try await device.defineTable(Self.schema)
            let photo = try await device.addAttachment(Self.bytes(30_000, seed: 3), contentType: "image/jpeg")
            try await device.table("inspections").insert(Record(id: "i1", fields: ["photo": photo.value]))
            blobs.injectFault(.status, at: blobs.objectPath(photo.sha256), errno: EIO)

            let error = await syncError { _ = try await device.push() }
            #expect(error?.code == .busy, "\(String(describing: error))")
            #expect(error.map { SyncFailure(error: $0, willRetry: true).isRetryable } == true)
            #expect(device.status.lastError?.kind == .transient)
            #expect(try await device.operationErrors().isEmpty, "a read that failed now fails no operation")
            #expect(try await device.attachmentState(photo) == .pendingUpload)
            #expect(FileManager.default.fileExists(atPath: blobs.objectPath(photo.sha256)))

            blobs.injectFault(.status, at: blobs.objectPath(photo.sha256), errno: nil)
            _ = try await device.push()
            #expect(try await device.attachmentState(photo) == .local)
            #expect(try await device.queuedOperationCount() == 0)
            try await device.close()
        }
    }

    // MARK: A remote whose answers do not move the upload

    // Against the old code the push resends the same request forever (the test's time limit
    // ends it): a success whose offset does not advance was taken as progress.
    @Test("an upload whose answers do not move it on (the same offset, one beyond the file, one before it) ends as transient after a few", arguments: [Int64(0), 1_000_000, -5])
    func nonAdvancingAnswersEnd(step: Int64) async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let remote = SteppingUploads(service.remote(for: Identity("alice")), step: step)
        let device = try await SyncContext(store: InMemoryStore(), remote: remote)
        try await device.defineTable(Self.schema)
        let photo = try await device.addAttachment(Self.bytes(2_000, seed: 4), contentType: "image/jpeg")
        try await device.table("inspections").insert(Record(id: "i1", fields: ["photo": photo.value]))
        let push = Task { try await device.push() }
        guard case .failure(let error)? = await awaitOutcome(of: push, within: .seconds(30)) else {
            push.cancel()
            Issue.record("the push kept sending to a remote whose answers never moved the upload on (\(remote.appends.value) appends)")
            return
        }
        #expect((error as? SyncError)?.code == .transient, "\(error)")
        #expect(remote.appends.value == 3, "appends before giving up: \(remote.appends.value)")
        #expect(try await device.operationErrors().isEmpty)
        #expect(try await device.attachmentState(photo) == .pendingUpload)
        try await device.close()
    }

    // MARK: A pulled reference of the wrong size

    // Against the old code the read removes the file (its size is not the reference's) and
    // then cannot fetch it: the only copy is gone, and the correct reference fails too.
    @Test("a pulled reference with the right hash and a wrong size deletes no file; the correct reference still reads, and the device's own write of it is taken")
    func wrongSizeDeletesNothing() async throws {
        let bytes = Self.bytes(5_000, seed: 5)
        let correct = try Self.reference(bytes)
        let wrong = try Self.reference(bytes, size: correct.size + 1)
        let store = InMemoryStore()
        let pulled = Record(id: "p1", fields: ["photo": wrong.value], version: "1", updatedAt: Timestamp.now())
        let device = try await SyncContext(store: store, remote: OnePageRemote(records: [pulled]))
        try await device.defineTable(Self.schema)
        // Staged for a record not written yet: the only copy.
        #expect(try await device.addAttachment(bytes, contentType: "image/jpeg") == correct)
        try await device.table("inspections").pull()
        let files = try #require(store.attachmentFiles)

        let code = await syncErrorCode { _ = try await device.attachmentData(wrong) }
        #expect(code == .invalidValue)
        #expect(try files.size(of: correct.sha256) == correct.size, "the good file is kept")
        #expect(try await device.attachmentData(correct) == Data(bytes))
        // The row took the size the file proved: the device's own write of the right
        // reference is taken, and its file waits to upload.
        try await device.table("inspections").insert(Record(id: "i1", fields: ["photo": correct.value]))
        #expect(try await device.attachmentState(correct) == .pendingUpload)
        try await device.close()
    }

    // Against the old code adding the bytes makes the file wait to upload at once: the next
    // push tells the server this device holds the file a stranger's record named.
    @Test("bytes added for a file only a pulled record names do not make it upload; the device's own write does")
    func pulledReferenceAloneUploadsNothing() async throws {
        let bytes = Self.bytes(7_000, seed: 6)
        let reference = try Self.reference(bytes)
        let pulled = Record(id: "p1", fields: ["photo": reference.value], version: "1", updatedAt: Timestamp.now())
        let device = try await SyncContext(store: InMemoryStore(), remote: OnePageRemote(records: [pulled]))
        try await device.defineTable(Self.schema)
        try await device.table("inspections").pull()
        #expect(try await device.attachmentState(reference) == .remote)
        _ = try await device.addAttachment(bytes, contentType: "image/jpeg")
        #expect(try await device.attachmentState(reference) == .remote, "a pulled reference alone asks for no upload")
        try await device.table("inspections").insert(Record(id: "i1", fields: ["photo": reference.value]))
        #expect(try await device.attachmentState(reference) == .pendingUpload, "the device's own write does")
        try await device.close()
    }

    // MARK: A damaged file the app holds

    // Against the old code the damaged file is removed while the app holds it: its URL names
    // nothing for the rest of the hold.
    @Test("a damaged file the app holds stays until the hold ends, and reads of it fail as attachmentDamaged meanwhile; then it is fetched again")
    func heldDamagedFileStays() async throws {
        try await withTemporaryDirectory { directory in
            let service = try await OfflineSyncService(store: InMemoryStore())
            let writer = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: Identity("alice")))
            let store = try await SQLiteStore(path: directory.appendingPathComponent("reader.sqlite").path)
            let blobs = try #require(store.attachmentFiles as? BlobDirectory)
            let reader = try await SyncContext(store: store, remote: service.remote(for: Identity("alice")))
            for context in [writer, reader] { try await context.defineTable(Self.schema) }
            let bytes = Self.bytes(60_000, seed: 7)
            let photo = try await writer.addAttachment(bytes, contentType: "image/jpeg")
            try await writer.table("inspections").insert(Record(id: "i1", fields: ["photo": photo.value]))
            _ = try await writer.push()
            try await reader.table("inspections").pull()
            #expect(try await reader.attachmentData(photo) == Data(bytes))
            let path = blobs.objectPath(photo.sha256)

            try await reader.withAttachmentFile(photo) { url in
                var damaged = try Data(contentsOf: url)
                damaged[30_000] ^= 0xff
                try damaged.write(to: url)
                let code = await syncErrorCode { _ = try await reader.attachmentData(photo) }
                #expect(code == .attachmentDamaged)
                #expect(FileManager.default.fileExists(atPath: url.path), "a file the app holds was removed")
            }
            // Let go: the next read finds the damage and removes the file, the one after fetches it.
            let code = await syncErrorCode { _ = try await reader.attachmentData(photo) }
            #expect(code == .attachmentDamaged)
            #expect(!FileManager.default.fileExists(atPath: path))
            #expect(try await reader.attachmentState(photo) == .remote)
            #expect(try await reader.attachmentData(photo) == Data(bytes))
            try await writer.close()
            try await reader.close()
        }
    }
}

/// A remote whose appends succeed without moving the upload as they should: each answers the
/// offset it was sent plus `step` (0: the same offset; past the file; before it), never
/// complete. Everything else goes to the in-process remote it wraps.
private struct SteppingUploads: RemoteStore, AttachmentRemote {
    let base: any RemoteStore
    let files: any AttachmentRemote
    let step: Int64
    let appends = Box(0)

    init(_ base: any RemoteStore, step: Int64) {
        self.base = base
        files = base as! any AttachmentRemote
        self.step = step
    }

    func push(_ operations: [PushOperation]) async throws -> [PushResult] { try await base.push(operations) }

    func pull(_ request: PullRequest) async throws -> PullPage { try await base.pull(request) }

    func attachmentUploadState(_ sha256: String) async throws -> AttachmentUploadState? {
        try await files.attachmentUploadState(sha256)
    }

    func appendAttachment(_ attachment: OfflineSync.Attachment, offset: Int64, bytes: [UInt8], complete: Bool) async throws -> AttachmentUploadState {
        appends.withLock { $0 += 1 }
        return AttachmentUploadState(offset: offset + step, complete: false)
    }

    func readAttachment(_ sha256: String, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        try await files.readAttachment(sha256, from: offset, body)
    }
}

/// A remote whose pull answers one page of `records`, and that is never reached otherwise.
private struct OnePageRemote: RemoteStore {
    let records: [Record]

    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        throw SyncError(.transient, "no pushes in this test")
    }

    func pull(_ request: PullRequest) async throws -> PullPage {
        PullPage(records: records, nextCursor: "1", remaining: 0)
    }
}
