import Foundation
import OfflineSync
import OfflineSyncStoreKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension LocalStoreConformance {
    /// The sweeps under faults: a read that fails is kept and reported, a file its bytes prove
    /// damaged goes unless it waits to upload, a malformed reference hides no good one.
    static let attachmentFaultCases: [ConformanceCase] = [
        ConformanceCase("sweepKeepsFilesItCannotRead") { ctx in
            try await AttachmentFaults.sweepKeepsFilesItCannotRead(try await ctx.open())
        },
        ConformanceCase("sweepRemovesOnlyProvenDamage") { ctx in
            try await AttachmentFaults.sweepRemovesOnlyProvenDamage(try await ctx.open())
        },
        ConformanceCase("malformedReferenceHidesNoOther") { ctx in
            try await AttachmentFaults.malformedReferenceHidesNoOther(try await ctx.open())
        },
        ConformanceCase("refusedCaptureKeepsItsFiles") { ctx in
            try await AttachmentFaults.refusedCaptureKeepsItsFiles(try await ctx.open())
        },
    ]
}

/// The bodies of the fault cases. The faults of a read are injected into a store whose files
/// are a `BlobDirectory` (`injectFault`): a descriptor limit, an I/O error and a permission
/// that a test process, run in parallel and often as root, cannot otherwise cause to one file.
/// Damage is real: a file cut short on disk. Each sweep is a context opened on the same store
/// object, which keeps the faults injected into its files.
enum AttachmentFaults {
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
    }

    /// Whether anything is at `path`, asked without the directory's (faulted) reads.
    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// A file whose modification time cannot be read, a directory that cannot be listed and a
    /// descriptor limit while a file waiting to upload is opened: each file is kept, and the
    /// failure is the context's `status.lastError`. Once it can read them, the sweep removes
    /// what it should (an old file no record references).
    static func sweepKeepsFilesItCannotRead(_ store: any LocalStore) async throws {
        // A store whose files are not in a directory (in memory) has no such reads to fail.
        guard let blobs = store.attachmentFiles as? BlobDirectory else { return }
        let writer = try await AttachmentFixtures.context(on: store)
        try await writer.defineTable(AttachmentFixtures.schema)
        let photoBytes = bytes(40_000, seed: 61)
        let photo = try await writer.addAttachment(photoBytes, contentType: "image/jpeg")
        try await writer.table("notes").insert(Record(id: "n1", fields: ["photo": photo.value]))
        let orphan = try await writer.addAttachment(bytes(30_000, seed: 62), contentType: "image/jpeg")
        let photoPath = blobs.objectPath(photo.sha256), orphanPath = blobs.objectPath(orphan.sha256)
        let orphanBucket = String(orphanPath[..<(orphanPath.lastIndex(of: "/") ?? orphanPath.endIndex)])
        // An hour old and in no record: a sweep that can read it removes it.
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: orphanPath)
        let sealed = blobs.plainFileURL(for: photo.sha256) == nil

        // An I/O error reading the file's status: its modification time is unknown, not old.
        blobs.injectFault(.status, at: orphanPath, errno: EIO)
        var sweep = try await AttachmentFixtures.context(on: store)
        try expect(exists(orphanPath), "the sweep removed a file whose modification time it could not read")
        try expectEqual(sweep.status.lastError?.error.code, .storageFailure, "the sweep's report of a file it could not read")
        blobs.injectFault(.status, at: orphanPath, errno: nil)

        // A directory that cannot be listed holds files all the same.
        blobs.injectFault(.list, at: orphanBucket, errno: EACCES)
        sweep = try await AttachmentFixtures.context(on: store)
        try expect(exists(orphanPath), "the sweep removed a file in a directory it could not list")
        try expectEqual(sweep.status.lastError?.error.code, .storageFailure, "the sweep's report of a directory it could not list")
        blobs.injectFault(.list, at: orphanBucket, errno: nil)

        // Too many open files while the sweep opens the file waiting to upload (a sealing
        // store reads each header; a plain one opens nothing).
        blobs.injectFault(.open, at: photoPath, errno: EMFILE)
        sweep = try await AttachmentFixtures.context(on: store)
        try expect(exists(photoPath), "the sweep removed a file waiting to upload that it could not open (too many open files)")
        if sealed {
            try expectEqual(sweep.status.lastError?.error.code, .storageFailure, "the sweep's report of a file it could not open")
        } else {
            try expect(sweep.status.lastError == nil, "a plain store's sweep reports \(String(describing: sweep.status.lastError)) but opens no file")
        }
        try expect(!exists(orphanPath), "the sweep kept an hour-old file no record references although it could read it")
        blobs.injectFault(.open, at: photoPath, errno: nil)
        try expect(try await sweep.attachmentData(photo) == Data(photoBytes), "the file waiting to upload reads back once the fault is gone")
        try expectEqual(try await sweep.attachmentState(photo), .pendingUpload, "the state of the file waiting to upload")
    }

    /// Two files cut short: the one no upload waits for goes (a sealing store's sweep proves
    /// the damage from its header; a plain one's damage shows when it is read), the one
    /// waiting to upload is kept — by the sweep and by a read — and reported.
    static func sweepRemovesOnlyProvenDamage(_ store: any LocalStore) async throws {
        guard let blobs = store.attachmentFiles as? BlobDirectory else { return }
        let writer = try await AttachmentFixtures.context(on: store)
        try await writer.defineTable(AttachmentFixtures.schema)
        let photo = try await writer.addAttachment(bytes(50_000, seed: 63), contentType: "image/jpeg")
        try await writer.table("notes").insert(Record(id: "n1", fields: ["photo": photo.value]))
        let loose = try await writer.addAttachment(bytes(20_000, seed: 64), contentType: "image/jpeg")
        let sealed = blobs.plainFileURL(for: photo.sha256) == nil
        let photoPath = blobs.objectPath(photo.sha256), loosePath = blobs.objectPath(loose.sha256)
        // Ten bytes left: a sealed header cut short, a plain file no longer whole.
        for path in [photoPath, loosePath] where truncate(path, 10) != 0 {
            throw failure("could not cut \(path) short: \(String(cString: strerror(errno)))")
        }

        let sweep = try await AttachmentFixtures.context(on: store)
        try expect(exists(photoPath), "the sweep removed a damaged file waiting to upload: it exists nowhere else")
        if sealed {
            try expect(!exists(loosePath), "the sweep kept a file whose sealed header is cut short and that no upload waits for")
            try expectEqual(sweep.status.lastError?.error.code, .attachmentDamaged, "the sweep's report of the damaged file it kept")
        }
        try await expectThrows(.attachmentDamaged, "reading a damaged file waiting to upload") {
            try await sweep.attachmentData(photo)
        }
        try expect(exists(photoPath), "reading a damaged file waiting to upload removed it: it exists nowhere else")
        try expectEqual(try await sweep.attachmentState(photo), .pendingUpload, "the state of a damaged file waiting to upload")
        try await expectThrows(anyOf: [.attachmentDamaged, .attachmentUnavailable], "reading a damaged file no upload waits for, offline") {
            try await sweep.attachmentData(loose)
        }
        try expect(!exists(loosePath), "a damaged file no upload waits for is still there after it was read")
    }

    /// A change an adapter captured outside the core (the GRDB adapter's triggers) and had to
    /// refuse keeps the files of its row: a good reference beside a malformed one gets its row
    /// (waiting to upload), and while a row the adapter could not read at all is refused, the
    /// sweep when a context opens takes no file for an orphan — each may be a file staged for
    /// that row, which exists nowhere else.
    static func refusedCaptureKeepsItsFiles(_ store: any LocalStore) async throws {
        let writer = try await AttachmentFixtures.context(on: store)
        try await writer.defineTable(AttachmentFixtures.schema)
        let photo = try await writer.addAttachment(bytes(12_000, seed: 67), contentType: "image/jpeg")
        let scan = try await writer.addAttachment(bytes(9_000, seed: 68), contentType: "image/png")
        let files = try AttachmentFixtures.files(of: store)
        let malformed: Value = [Attachment.marker: "not a hash", "size": 1, "contentType": "x"]
        let item = Record(id: "n1", fields: ["photo": photo.value, "scan": malformed])
        let refusedForReference = try await store.write { txn in
            try CapturedChange.queue([
                CapturedChange(table: "notes", itemId: "n1", kind: .insert, item: item, baseVersion: nil,
                               changedFields: ["photo", "scan"]),
            ], in: txn, files: files).count
        }
        try expectEqual(refusedForReference, 1, "changes refused for a malformed reference")
        try expectEqual(try await writer.attachmentState(photo), .pendingUpload,
                        "the state of a good reference beside a malformed one in a refused change")
        // A row the adapter could not read at all: refused without its item.
        let refusedUnread = try await store.write { txn in
            try CapturedChange.queue([
                CapturedChange(table: "notes", itemId: "n2", kind: .insert, item: nil, baseVersion: nil, changedFields: [],
                               refusal: SyncError(.typeMismatch, "column 'scan' holds what its field's type cannot read")),
            ], in: txn, files: files).count
        }
        try expectEqual(refusedUnread, 1, "changes refused as unreadable")

        // The sweep when a context opens, with no grace for files no row names.
        let sweep = try await AttachmentFixtures.context(on: store, orphanGrace: .zero)
        try expectEqual(try files.size(of: photo.sha256), photo.size, "the size of a refused change's good reference's file after the sweep")
        try expectEqual(try files.size(of: scan.sha256), scan.size,
                        "the size of a file no row names after the sweep, while a row the adapter could not read is refused")
        try expectEqual(try await sweep.operationErrors().count, 2, "the refused changes in operationErrors()")
    }

    /// A pulled record holds a good reference beside a malformed one: the good one gets its
    /// row, and when the other record naming it leaves, the cache sweep keeps its file (and
    /// removes the file only the record that left referenced).
    static func malformedReferenceHidesNoOther(_ store: any LocalStore) async throws {
        let keptBytes = bytes(25_000, seed: 65), droppedBytes = bytes(15_000, seed: 66)
        let kept = try Attachment(sha256: AttachmentHasher.hash(keptBytes), size: Int64(keptBytes.count), contentType: "image/jpeg")
        let dropped = try Attachment(sha256: AttachmentHasher.hash(droppedBytes), size: Int64(droppedBytes.count), contentType: "image/jpeg")
        let malformed: Value = [Attachment.marker: "not a hash", "size": 1, "contentType": "x"]
        let now = Timestamp.now()
        // Records a local write would refuse arrive as a pull brings them: one page per pull.
        let pages = LateBox<[PullPage]>()
        pages.value = [
            PullPage(records: [
                Record(id: "n0", fields: ["title": "both", "photos": .array([kept.value, dropped.value])], version: "1", updatedAt: now),
                Record(id: "n1", fields: ["title": "mixed", "photo": kept.value, "scan": malformed], version: "1", updatedAt: now),
            ], nextCursor: "1", remaining: 0),
            PullPage(records: [], nextCursor: "2", remaining: 0, removed: ["n0"]),
        ]
        let context = try await SyncContext(store: store, remote: ScriptedPullRemote(base: UnreachableRemote(), pages: pages))
        try await context.defineTable(AttachmentFixtures.schema)
        // Both files are on this device, as downloads leave them; only pulled records name them.
        _ = try await context.addAttachment(keptBytes, contentType: "image/jpeg")
        _ = try await context.addAttachment(droppedBytes, contentType: "image/jpeg")
        let files = try AttachmentFixtures.files(of: store)

        try await context.pull("notes", queryId: "notes")
        try expectEqual(try await context.attachmentState(kept), .remote, "the row of a reference pulled beside a malformed one")
        // n0 leaves the view: the pull ends with the cache sweep.
        try await context.pull("notes", queryId: "notes")
        try expect(try files.size(of: dropped.sha256) == nil, "the file only the record that left referenced is still there")
        try expectEqual(try files.size(of: kept.sha256), kept.size, "the size of the file a record references beside a malformed reference")
        try expectEqual(try await context.attachmentState(kept), .remote, "the row of the file a record references beside a malformed reference")
        try expectEqual(try await context.removeUnreferencedAttachments(), 0, "files removed by a sweep called again")
        try expectEqual(try files.size(of: kept.sha256), kept.size, "the size of the kept file after a sweep called again")
    }
}
