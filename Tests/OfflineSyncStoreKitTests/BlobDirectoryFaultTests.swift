import Foundation
import OfflineSync
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

/// Swift Testing has an `Attachment` type too.
private typealias Attachment = OfflineSync.Attachment

/// A sealing for these tests only: each byte XORed, and a CRC-32C of the context and the
/// plain bytes as the tag. It catches a file cut short or altered by accident, which is all a
/// test of what a sweep does with damage needs (the encrypted file seals with AES-GCM or
/// ChaCha20-Poly1305, and runs the conformance suite's fault cases itself).
private struct ChecksumSealing: BlobSealing {
    var overhead: Int { 4 }

    func seal(_ plain: UnsafeRawBufferPointer, context: [UInt8]) throws -> [UInt8] {
        let bytes = Array(plain)
        var sealed = bytes.map { $0 ^ 0x5a }
        let tag = CRC32C.checksum(context + bytes)
        withUnsafeBytes(of: tag.littleEndian) { sealed.append(contentsOf: $0) }
        return sealed
    }

    func open(_ sealed: [UInt8], context: [UInt8]) throws -> [UInt8] {
        guard sealed.count >= 4 else { throw SyncError(.attachmentDamaged, "a sealed piece shorter than its tag") }
        let plain = sealed.dropLast(4).map { $0 ^ 0x5a }
        let tag = sealed.suffix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard tag == CRC32C.checksum(context + plain) else { throw SyncError(.attachmentDamaged, "a sealed piece does not open") }
        return plain
    }

    func fileName(for sha256: String) -> String { String(sha256.reversed()) }
}

/// `BlobDirectory` removes a file only when its bytes prove it damaged, never on a read that
/// failed. The failed reads are injected (`injectFault`): a descriptor limit, an I/O error and
/// a permission cannot be given to one file of a test process that runs tests in parallel, as
/// root (whom a permission does not stop). The damage is real: a file cut short on disk.
@Suite("BlobDirectory tells a damaged file from one it could not read")
struct BlobDirectoryFaultTests {
    static func store(_ bytes: [UInt8], in blobs: BlobDirectory) throws -> String {
        let writer = try blobs.makeWriter()
        try writer.append(bytes)
        let hash = AttachmentHasher.hash(bytes)
        try writer.commit(as: hash)
        return hash
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// The name `inventory()` gives the file of `hash`: its path inside the directory.
    static func name(_ hash: String, in blobs: BlobDirectory) -> String {
        String(blobs.objectPath(hash).dropFirst(blobs.path.count + 1))
    }

    @Test("a sealed inventory tells a header cut short from a descriptor limit and an I/O error, and removes nothing")
    func sealedInventory() async throws {
        try await withTemporaryDirectory { root in
            let blobs = BlobDirectory(path: root.path + "/attachments", sealing: ChecksumSealing())
            let good = try Self.store(Array(repeating: 1, count: 70_000), in: blobs)
            let cut = try Self.store(Array(repeating: 2, count: 1000), in: blobs)
            let limited = try Self.store(Array(repeating: 3, count: 1000), in: blobs)
            let failing = try Self.store(Array(repeating: 4, count: 1000), in: blobs)
            #expect(truncate(blobs.objectPath(cut), 10) == 0)
            blobs.injectFault(.open, at: blobs.objectPath(limited), errno: EMFILE)
            blobs.injectFault(.status, at: blobs.objectPath(failing), errno: EIO)

            let inventory = try blobs.inventory()
            #expect(inventory.files.map(\.sha256) == [good])
            #expect(inventory.damaged.map(\.name) == [Self.name(cut, in: blobs)])
            #expect(inventory.damaged.allSatisfy { $0.error.code == .attachmentDamaged })
            #expect(inventory.unreadable.count == 2)
            #expect(inventory.unreadable.allSatisfy { $0.code == .storageFailure })
            #expect(inventory.unreadable.contains { $0.message.hasSuffix(String(cString: strerror(EMFILE))) })
            #expect(inventory.unreadable.contains { $0.message.hasSuffix(String(cString: strerror(EIO))) })
            #expect(try blobs.files().map(\.sha256) == [good])
            for hash in [good, cut, limited, failing] {
                #expect(Self.exists(blobs.objectPath(hash)), "reading the directory removed a file")
            }
            // A read of one file tells the same: the limit is not damage.
            let limitedRead = await syncErrorCode { _ = try blobs.size(of: limited) }
            let cutRead = await syncErrorCode { _ = try blobs.size(of: cut) }
            #expect(limitedRead == .storageFailure)
            #expect(cutRead == .attachmentDamaged)
        }
    }

    @Test("a damaged file goes only while its header proves the damage, and never one spared as waiting to upload")
    func removesOnlyProvenDamage() async throws {
        try await withTemporaryDirectory { root in
            let blobs = BlobDirectory(path: root.path + "/attachments", sealing: ChecksumSealing())
            let pending = try Self.store(Array(repeating: 5, count: 2000), in: blobs)
            let loose = try Self.store(Array(repeating: 6, count: 2000), in: blobs)
            let mended = try Self.store(Array(repeating: 7, count: 2000), in: blobs)
            let whole = try Data(contentsOf: URL(fileURLWithPath: blobs.objectPath(mended)))
            for hash in [pending, loose, mended] {
                #expect(truncate(blobs.objectPath(hash), 10) == 0)
            }
            let damaged = try blobs.inventory().damaged
            #expect(Set(damaged.map(\.name)) == Set([pending, loose, mended].map { Self.name($0, in: blobs) }))
            // Put back whole after the inventory (a good copy arrived): no damage to prove now.
            try whole.write(to: URL(fileURLWithPath: blobs.objectPath(mended)))
            for file in damaged {
                let removed = try blobs.removeDamaged(file, sparing: [pending])
                #expect(removed == (file.name == Self.name(loose, in: blobs)), "\(file.name)")
            }
            #expect(Self.exists(blobs.objectPath(pending)), "a damaged file waiting to upload was removed")
            #expect(!Self.exists(blobs.objectPath(loose)), "a damaged file no upload waits for was kept")
            #expect(try blobs.size(of: mended) == 2000)
            // A name the inventory never gives is refused.
            let outside = DamagedAttachmentFile(name: "objects/../store", error: SyncError(.attachmentDamaged, "forged"))
            #expect(try blobs.removeDamaged(outside, sparing: []) == false)
        }
    }

    @Test("a plain inventory reports, and never lists as old, a file whose status or directory cannot be read")
    func plainUnreadable() async throws {
        try await withTemporaryDirectory { root in
            let blobs = BlobDirectory(path: root.path + "/attachments")
            let first = try Self.store([1, 2, 3], in: blobs)
            let second = try Self.store([4, 5, 6, 7], in: blobs)
            let objects = blobs.path + "/objects"

            blobs.injectFault(.status, at: blobs.objectPath(first), errno: EIO)
            var inventory = try blobs.inventory()
            #expect(inventory.files.map(\.sha256) == [second])
            #expect(inventory.unreadable.map(\.code) == [.storageFailure])
            #expect(inventory.damaged.isEmpty)
            blobs.injectFault(.status, at: blobs.objectPath(first), errno: nil)

            blobs.injectFault(.list, at: objects, errno: EACCES)
            inventory = try blobs.inventory()
            #expect(inventory.files.isEmpty)
            #expect(inventory.unreadable.count == 1)
            #expect(inventory.unreadable.first?.message.hasSuffix(String(cString: strerror(EACCES))) == true)
            blobs.injectFault(.list, at: objects, errno: nil)

            // Readable again: both listed, each with the time it was written (not 1970).
            let listed = try blobs.inventory().files
            #expect(Set(listed.map(\.sha256)) == [first, second])
            let now = Timestamp.now().millisecondsSince1970
            #expect(listed.allSatisfy { abs(now - $0.modified.millisecondsSince1970) < 600_000 })
            #expect(Self.exists(blobs.objectPath(first)) && Self.exists(blobs.objectPath(second)))
        }
    }

    @Test("a directory put where a sealed file was is unreadable, not damaged (a real EISDIR), and stays")
    func directoryInPlaceOfFile() async throws {
        try await withTemporaryDirectory { root in
            let blobs = BlobDirectory(path: root.path + "/attachments", sealing: ChecksumSealing())
            let hash = try Self.store(Array(repeating: 8, count: 5000), in: blobs)
            let path = blobs.objectPath(hash)
            #expect(rename(path, root.path + "/aside") == 0)
            #expect(mkdir(path, 0o700) == 0)
            let inventory = try blobs.inventory()
            #expect(inventory.files.isEmpty)
            #expect(inventory.damaged.isEmpty)
            #expect(inventory.unreadable.map(\.code) == [.storageFailure])
            let read = await syncErrorCode { _ = try blobs.size(of: hash) }
            #expect(read == .storageFailure)
            #expect(Self.exists(path))
        }
    }

    /// The bytes of the stored file of `hash`, read whole.
    static func contents(_ hash: String, in blobs: BlobDirectory) throws -> [UInt8] {
        let reader = try blobs.reader(for: hash)
        var bytes: [UInt8] = []
        while Int64(bytes.count) < reader.size {
            let piece = try reader.read(at: Int64(bytes.count), count: 1 << 20)
            if piece.isEmpty { break }
            bytes += piece
        }
        return bytes
    }

    /// The device and inode of the file at `path`.
    static func identity(_ path: String) -> (dev_t, ino_t)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (info.st_dev, info.st_ino)
    }

    // Against the old `install` the bytes added again are dropped because a file has the name:
    // the damaged copy stays, and a file waiting to upload can never be repaired.
    @Test("adding the bytes again repairs a damaged stored copy, cut short or altered, plain or sealed", arguments: [false, true])
    func addingAgainRepairs(sealed: Bool) async throws {
        try await withTemporaryDirectory { root in
            let sealing: (any BlobSealing)? = sealed ? ChecksumSealing() : nil
            let blobs = BlobDirectory(path: root.path + "/attachments", sealing: sealing)
            let bytes = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let hash = try Self.store(bytes, in: blobs)
            let path = blobs.objectPath(hash)

            #expect(truncate(path, 10) == 0)
            #expect(try Self.store(bytes, in: blobs) == hash)
            #expect(try blobs.size(of: hash) == Int64(bytes.count))
            #expect(try Self.contents(hash, in: blobs) == bytes, "the copy cut short was repaired")

            var altered = try Data(contentsOf: URL(fileURLWithPath: path))
            altered[altered.count - 100] ^= 0xff
            try altered.write(to: URL(fileURLWithPath: path))
            #expect(try Self.store(bytes, in: blobs) == hash)
            #expect(try Self.contents(hash, in: blobs) == bytes, "the altered copy was repaired")
            #expect(try blobs.files().map(\.sha256) == [hash], "one file under the name")
        }
    }

    // Against the old `install` the good copy keeps its hour-old time (another process's sweep
    // may take it for an orphan), and a damaged one is never replaced by a download.
    @Test("a download keeps a good copy already stored, setting its time to now, and replaces a damaged one", arguments: [false, true])
    func downloadKeepsAGoodCopy(sealed: Bool) async throws {
        try await withTemporaryDirectory { root in
            let sealing: (any BlobSealing)? = sealed ? ChecksumSealing() : nil
            let blobs = BlobDirectory(path: root.path + "/attachments", sealing: sealing)
            let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
            let hash = try Self.store(bytes, in: blobs)
            let path = blobs.objectPath(hash)
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: path)
            let before = try #require(Self.identity(path))

            let download = try blobs.downloadWriter(for: hash)
            try download.append(bytes)
            try download.commitCached(as: hash)
            let after = try #require(Self.identity(path))
            #expect(after.0 == before.0 && after.1 == before.1, "the good copy, flushed to disk, stays")
            let modified = try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date
            #expect(modified.map { $0.timeIntervalSinceNow > -600 } == true, "its time is now: \(String(describing: modified))")

            #expect(truncate(path, 10) == 0)
            let again = try blobs.downloadWriter(for: hash)
            try again.append(bytes)
            try again.commitCached(as: hash)
            #expect(try Self.contents(hash, in: blobs) == bytes, "the damaged copy was replaced by the download")
        }
    }

    @Test("a malformed reference hides none of the well-formed ones beside it")
    func scanKeepsGoodReferences() throws {
        let good = try Attachment(sha256: String(repeating: "ab", count: 32), size: 3, contentType: "text/plain")
        let other = try Attachment(sha256: String(repeating: "cd", count: 32), size: 4, contentType: "text/plain")
        let badHash: Value = [Attachment.marker: "not a hash", "size": 1, "contentType": "x"]
        let badMarker: Value = [Attachment.marker: 7]
        let fields: [String: Value] = ["photo": good.value, "scan": badHash, "gallery": .array([other.value, badMarker])]
        let (references, malformed) = Attachment.scan(fields)
        #expect(Set(references.map(\.sha256)) == [good.sha256, other.sha256])
        #expect(malformed.count == 2)
        #expect(malformed.allSatisfy { $0.code == .invalidValue })
        // A write is still refused whole.
        #expect(throws: SyncError.self) { try Attachment.references(in: fields) }
    }
}
