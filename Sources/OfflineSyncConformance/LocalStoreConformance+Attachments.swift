import Foundation
import OfflineSync

extension LocalStoreConformance {
    static let attachmentCases: [ConformanceCase] = [
        ConformanceCase("filesRoundTrip") { ctx in
            let files = try AttachmentFixtures.files(of: try await ctx.open())
            var generator = SplitMix64(seed: 55)
            for size in AttachmentFixtures.sizes {
                let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                let hash = try AttachmentFixtures.store(bytes, in: files)
                try expectEqual(try files.size(of: hash), Int64(size), "the stored size of a \(size)-byte file")
                try AttachmentFixtures.expectContents(files, hash, bytes, "a \(size)-byte file")
            }
            let listed = try files.files()
            try expectEqual(Set(listed.map(\.size)), Set(AttachmentFixtures.sizes.map(Int64.init)), "the sizes files() lists")
        },
        ConformanceCase("absentAndRemoved") { ctx in
            let files = try AttachmentFixtures.files(of: try await ctx.open())
            let absent = String(repeating: "ab", count: 32)
            try expect(try files.size(of: absent) == nil, "an absent file has no size")
            try await expectThrows(.notFound, "reading an absent file") { try files.reader(for: absent) }
            try files.remove(absent)
            let hash = try AttachmentFixtures.store(Array(repeating: 7, count: 1000), in: files)
            try files.remove(hash)
            try expect(try files.size(of: hash) == nil, "a removed file is gone")
            try expect(try files.files().isEmpty, "files() lists nothing after the removal")
        },
        ConformanceCase("cancelledAndAbandonedLeaveNothing", requires: .persistent) { ctx in
            var store = try await ctx.open()
            let before = AttachmentFixtures.bytesOnDisk(ctx.root)
            let cancelled = try AttachmentFixtures.files(of: store).makeWriter()
            try cancelled.append(Array(repeating: 1, count: 1 << 20))
            cancelled.cancel()
            try expect(try AttachmentFixtures.files(of: store).files().isEmpty, "a cancelled write stores no file")
            // A writer neither committed nor cancelled: what a process killed mid-write leaves.
            let abandoned = try AttachmentFixtures.files(of: store).makeWriter()
            try abandoned.append(Array(repeating: 2, count: 4 << 20))
            store = try await ctx.reopen(store)
            let files = try AttachmentFixtures.files(of: store)
            try files.removeLeftovers()
            try expect(try files.files().isEmpty, "an abandoned write stores no file")
            let after = AttachmentFixtures.bytesOnDisk(ctx.root)
            try expect(after < before + (1 << 20), "an abandoned write's bytes are removed (\(before) bytes before, \(after) after)")
            withExtendedLifetime(abandoned) {}
        },
        ConformanceCase("keptDownloadGoesOn") { ctx in
            try await AttachmentFixtures.keptDownloadGoesOn(try await ctx.open())
        },
        ConformanceCase("keptDownloadSurvivesReopen", requires: .persistent) { ctx in
            var store = try await ctx.open()
            let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
            let hash = AttachmentHasher.hash(bytes)
            let first = try AttachmentFixtures.files(of: store).downloadWriter(for: hash)
            try first.append(Array(bytes[..<200_000]))
            first.keep()
            store = try await ctx.reopen(store)
            let files = try AttachmentFixtures.files(of: store)
            try files.removeLeftovers()
            let next = try files.downloadWriter(for: hash)
            try AttachmentFixtures.finishDownload(next, bytes, kept: 200_000, "after reopening")
            try next.commit(as: hash)
            try AttachmentFixtures.expectContents(files, hash, bytes, "a download resumed after reopening")
        },
        ConformanceCase("sameHashTwiceIsOneFile") { ctx in
            let files = try AttachmentFixtures.files(of: try await ctx.open())
            let bytes = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let first = try AttachmentFixtures.store(bytes, in: files)
            let second = try AttachmentFixtures.store(bytes, in: files)
            try expectEqual(first, second, "the hash of the same bytes")
            try expectEqual(try files.files().count, 1, "files after storing the same bytes twice")
            try AttachmentFixtures.expectContents(files, first, bytes, "the file stored twice")
        },
        ConformanceCase("filesSurviveReopen", requires: .persistent) { ctx in
            var store = try await ctx.open()
            let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let hash = try AttachmentFixtures.store(bytes, in: try AttachmentFixtures.files(of: store))
            store = try await ctx.reopen(store)
            try AttachmentFixtures.expectContents(try AttachmentFixtures.files(of: store), hash, bytes, "a file after reopening")
        },
        ConformanceCase("recordQueueAndBytesTogether", requires: .persistent) { ctx in
            try await AttachmentFixtures.recordQueueAndBytesTogether(ctx)
        },
        ConformanceCase("damagedFileNeverServed") { ctx in
            try await AttachmentFixtures.damagedFileNeverServed(ctx)
        },
        ConformanceCase("wrongSizeRefused") { ctx in
            let context = try await AttachmentFixtures.context(on: try await ctx.open())
            try await context.defineTable(AttachmentFixtures.schema)
            let photo = try await context.addAttachment(Array(repeating: 9, count: 5000), contentType: "image/png")
            let wrong = try Attachment(sha256: photo.sha256, size: 4999, contentType: "image/png")
            try await expectThrows(.invalidValue, "a reference whose size is not the file's") {
                try await context.table("notes").insert(Record(id: "n1", fields: ["photo": wrong.value]))
            }
            try await expectThrows(.invalidValue, "a malformed reference") {
                try await context.table("notes").insert(Record(id: "n2", fields: ["photo": [Attachment.marker: "not a hash", "size": 1, "contentType": "x"]]))
            }
            let stored = try await context.table("notes").query()
            try expect(stored.isEmpty, "a refused write leaves no record")
            try expectEqual(try await context.queuedOperationCount(), 0, "queued operations after refused writes")
        },
    ]
}

/// Shared pieces of the attachment cases.
enum AttachmentFixtures {
    /// Sizes around the pieces stores seal in (64 KiB) and the core's chunk (1 MiB).
    static let sizes = [0, 1, 65_535, 65_536, 65_537, (1 << 20) + 3]

    static let schema = TableSchema("notes", fields: [FieldDefinition("title", .string)])

    static func files(of store: any LocalStore, file: String = #fileID, line: Int = #line) throws -> any AttachmentFileStore {
        guard let files = store.attachmentFiles else {
            throw ConformanceFailure("the store keeps no attachment files (LocalStore.attachmentFiles is nil)", file: file, line: line)
        }
        return files
    }

    /// Writes `bytes` in uneven pieces and commits them under their hash.
    static func store(_ bytes: [UInt8], in files: any AttachmentFileStore) throws -> String {
        let writer = try files.makeWriter()
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + 7001)
            try writer.append(Array(bytes[offset..<end]))
            offset = end
        }
        try expectEqual(writer.size, Int64(bytes.count), "the writer's size")
        let hash = AttachmentHasher.hash(bytes)
        try writer.commit(as: hash)
        return hash
    }

    /// A download writer that is kept and taken again holds a prefix of what it was given
    /// (all of it, or none for a store that keeps no partial downloads) and reads it back
    /// exactly; a second writer while one has the hash starts empty; a removed hash's kept
    /// download is gone; nothing is left once the download is committed.
    static func keptDownloadGoesOn(_ store: any LocalStore) async throws {
        let files = try Self.files(of: store)
        let bytes = (0..<200_003).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7) }
        let hash = AttachmentHasher.hash(bytes)
        let first = try files.downloadWriter(for: hash)
        try expectEqual(first.size, 0, "a new download's size")
        try first.append(Array(bytes[..<70_000]))
        try first.append(Array(bytes[70_000..<140_001]))
        first.keep()
        let next = try files.downloadWriter(for: hash)
        let other = try files.downloadWriter(for: hash)
        try expectEqual(other.size, 0, "a second writer while one has the hash's download")
        other.cancel()
        try finishDownload(next, bytes, kept: 140_001, "a kept download")
        try next.commit(as: hash)
        try expectContents(files, hash, bytes, "a resumed download")
        let after = try files.downloadWriter(for: hash)
        try expectEqual(after.size, 0, "a download of a hash after its file was committed")
        after.cancel()

        let removed = try files.downloadWriter(for: String(repeating: "cd", count: 32))
        try removed.append(Array(repeating: 3, count: 100_000))
        removed.keep()
        try files.remove(String(repeating: "cd", count: 32))
        let fresh = try files.downloadWriter(for: String(repeating: "cd", count: 32))
        try expectEqual(fresh.size, 0, "a download after remove() of its hash")
        fresh.cancel()
        try expect(try files.files().map(\.sha256) == [hash], "files() lists only the committed file")
    }

    /// Checks what a resumed writer holds — a prefix of `bytes` no longer than `kept`, read
    /// back exactly — then appends the rest.
    static func finishDownload(_ writer: any AttachmentFileWriter, _ bytes: [UInt8], kept: Int, _ what: String,
                               file: String = #fileID, line: Int = #line) throws {
        let held = Int(writer.size)
        try expect(held <= kept, "\(what): the writer holds \(held) bytes, more than the \(kept) kept", file: file, line: line)
        if held > 0 {
            var back: [UInt8] = []
            while back.count < held {
                let piece = try writer.readBack(at: Int64(back.count), count: 50_001)
                if piece.isEmpty { break }
                back += piece
            }
            try expect(back == Array(bytes[..<held]), "\(what): the bytes read back are not the ones kept", file: file, line: line)
        }
        try writer.append(Array(bytes[held...]))
        try expectEqual(writer.size, Int64(bytes.count), "\(what): the writer's size", file: file, line: line)
    }

    /// Reads the file whole in uneven pieces, and a few ranges across piece boundaries.
    static func expectContents(_ files: any AttachmentFileStore, _ hash: String, _ bytes: [UInt8], _ what: String,
                               file: String = #fileID, line: Int = #line) throws {
        let reader = try files.reader(for: hash)
        try expectEqual(reader.size, Int64(bytes.count), "\(what): the reader's size", file: file, line: line)
        var read: [UInt8] = []
        while read.count < bytes.count {
            let piece = try reader.read(at: Int64(read.count), count: 50_001)
            if piece.isEmpty { break }
            read += piece
        }
        try expect(read == bytes, "\(what): the bytes read back differ", file: file, line: line)
        for (offset, count) in [(65_530, 20), (0, 3), (bytes.count - 1, 10), (bytes.count, 5)] where offset >= 0 {
            let expected = Array(bytes[min(offset, bytes.count)..<min(bytes.count, offset + count)])
            try expect(try reader.read(at: Int64(offset), count: count) == expected,
                       "\(what): \(count) bytes at \(offset)", file: file, line: line)
        }
    }

    /// The bytes of every regular file under `root`.
    static func bytesOnDisk(_ root: URL) -> Int {
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
        var total = 0
        for case let url as URL in walker {
            total += (try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0
        }
        return total
    }

    static func context(on store: any LocalStore, orphanGrace: Duration = .seconds(600)) async throws -> SyncContext {
        var options = SyncOptions()
        options.attachments.orphanGrace = orphanGrace
        return try await SyncContext(store: store, remote: UnreachableRemote(), options: options)
    }

    /// A record and its attachment commit together: the row waits to upload, the queue
    /// holds the insert, the bytes read back. A rolled-back write leaves no row, and its
    /// file goes when a context next opens the store; a referenced one stays.
    static func recordQueueAndBytesTogether(_ ctx: CaseContext) async throws {
        var context = try await context(on: try await ctx.open())
        try await context.defineTable(schema)
        let bytes = (0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let photo = try await context.addAttachment(bytes, contentType: "image/jpeg", fileName: "site.jpg")
        try expectEqual(photo.sha256, AttachmentHasher.hash(bytes), "the attachment's hash")
        try await context.table("notes").insert(Record(id: "n1", fields: ["title": "site", "photo": photo.value]))
        try expectEqual(try await context.attachmentState(photo), .pendingUpload, "the state of a new attachment")
        try expectEqual(try await context.queuedOperationCount(), 1, "queued operations")
        try expect(try await context.attachmentData(photo) == Data(bytes), "the attachment's bytes")
        let dropped = try await context.addAttachment(Array(repeating: 3, count: 10_000), contentType: "text/plain")
        _ = try? await context.transaction { txn in
            try txn.insert(Record(id: "n2", fields: ["photo": dropped.value]), into: "notes")
            throw SyncError(.cancelled, "rolled back on purpose")
        }
        try expect(try await context.attachmentState(dropped) == nil, "a rolled-back write leaves no attachment row")
        try await context.close()
        context = try await AttachmentFixtures.context(on: try await ctx.open(), orphanGrace: .zero)
        let files = try files(of: context.store)
        try expect(try files.size(of: dropped.sha256) == nil, "the unreferenced file is removed when a context opens")
        try expectEqual(try await context.attachmentState(photo), .pendingUpload, "the state after reopening")
        try expect(try await context.attachmentData(photo) == Data(bytes), "the attachment's bytes after reopening")
        try await context.close()
    }

    /// A plain stored file changed on disk is reported, removed, and never returned.
    static func damagedFileNeverServed(_ ctx: CaseContext) async throws {
        let context = try await context(on: try await ctx.open())
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 17) }
        let photo = try await context.addAttachment(bytes, contentType: "image/jpeg")
        let files = try files(of: context.store)
        // Only a store that hands out plain files lets the suite find one to damage; a
        // sealing store's own tests damage its files.
        guard let url = files.plainFileURL(for: photo.sha256) else { return }
        var damaged = try Data(contentsOf: url)
        damaged[50_000] ^= 0xff
        try damaged.write(to: url)
        try await expectThrows(.attachmentDamaged, "reading a damaged file") { try await context.attachmentData(photo) }
        try expect(try files.size(of: photo.sha256) == nil, "a damaged file is removed")
        try await expectThrows(.attachmentUnavailable, "reading it again, offline") { try await context.attachmentData(photo) }
    }
}

/// A remote that never answers: a device offline. For tests of what a context does
/// locally (writes, attachments, the queue) with no server at all.
public struct UnreachableRemote: RemoteStore {
    /// The remote.
    public init() {}

    /// Throws ``SyncError/Code/transient``.
    public func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        throw SyncError(.transient, "offline")
    }

    /// Throws ``SyncError/Code/transient``.
    public func pull(_ request: PullRequest) async throws -> PullPage {
        throw SyncError(.transient, "offline")
    }
}
