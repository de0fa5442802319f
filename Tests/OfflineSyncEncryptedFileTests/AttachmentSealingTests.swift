import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncEncryptedFile
import Testing

/// Attachments of the encrypted file: sealed under the store's key, never a plaintext file
/// beside it; a damaged sealed file is reported, removed and never served.
@Suite("EncryptedFileStore attachments")
struct AttachmentSealingTests {
    /// A distinctive pattern: found anywhere on disk, the bytes leaked.
    static let secret: [UInt8] = (0..<300_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7) }

    static func files(under url: URL) -> [URL] {
        let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey])
        return (walker?.allObjects as? [URL] ?? []).filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
    }

    @Test func noPlaintextNameOrBytesOnDisk() async throws {
        try await withTempDirectory { dir in
            let store = try await EncryptedFileStore(path: dir.file(), key: try .raw(TestKeys.raw))
            let context = try await SyncContext(store: store, remote: UnreachableRemote())
            let photo = try await context.addAttachment(Self.secret, contentType: "image/jpeg", fileName: "scan.jpg")
            try await context.close()
            let window = Array(Self.secret[100_000..<100_064])
            let hashText = Array(photo.sha256.utf8)
            var sealed = 0
            for url in Self.files(under: dir.url) {
                let bytes = try fileBytes(url.path)
                #expect(!url.lastPathComponent.contains(photo.sha256), "a file is named by the attachment's hash")
                #expect(bytes.firstRange(of: window) == nil, "\(url.lastPathComponent) holds the attachment's bytes in the clear")
                #expect(bytes.firstRange(of: hashText) == nil, "\(url.lastPathComponent) holds the attachment's hash in the clear")
                if bytes.starts(with: Array("OSBLOB01".utf8)) { sealed += 1 }
            }
            #expect(sealed == 1, "one sealed attachment file")
            // The same key reads it back; the file is whole.
            let reopened = try await SyncContext(store: try await EncryptedFileStore(path: dir.file(), key: try .raw(TestKeys.raw)),
                                                 remote: UnreachableRemote())
            let same = try await reopened.attachmentData(photo) == Data(Self.secret)
            #expect(same, "the bytes read back")
            try await reopened.close()
        }
    }

    @Test(arguments: ["header", "piece", "truncated"])
    func damagedSealedFileIsRemovedNotServed(damage: String) async throws {
        try await withTempDirectory { dir in
            let context = try await SyncContext(store: try await EncryptedFileStore(path: dir.file(), key: try .raw(TestKeys.raw)),
                                                remote: UnreachableRemote())
            let photo = try await context.addAttachment(Self.secret, contentType: "image/jpeg")
            let sealed = try #require(Self.files(under: dir.url).first { (try? fileBytes($0.path))?.starts(with: Array("OSBLOB01".utf8)) == true })
            var bytes = try fileBytes(sealed.path)
            switch damage {
            case "header": bytes[40] ^= 0x01
            case "piece": bytes[200_000] ^= 0x80
            default: bytes.removeLast(1000)
            }
            try Data(bytes).write(to: sealed)
            do {
                _ = try await context.attachmentData(photo)
                Issue.record("a damaged file was read")
            } catch let error as SyncError {
                #expect(error.code == .attachmentDamaged, "\(error)")
            }
            do {
                _ = try await context.attachmentData(photo)
                Issue.record("a damaged file was read")
            } catch let error as SyncError {
                #expect(error.code == .attachmentUnavailable, "after the damage is found the file is gone: \(error)")
            }
            #expect(!FileManager.default.fileExists(atPath: sealed.path), "the damaged file is removed")
            try await context.close()
        }
    }

    @Test("a kept download is sealed, named by no hash, resumes from its last whole piece, and reads back only under the key")
    func keptDownloadSealed() async throws {
        try await withTempDirectory { dir in
            let store = try await EncryptedFileStore(path: dir.file(), key: try .raw(TestKeys.raw))
            let files = try #require(store.attachmentFiles)
            let hash = AttachmentHasher.hash(Self.secret)
            let first = try files.downloadWriter(for: hash)
            try first.append(Array(Self.secret[..<200_000]))
            first.keep()
            let window = Array(Self.secret[100_000..<100_064]), hashText = Array(hash.utf8)
            for url in Self.files(under: dir.url) {
                let bytes = try fileBytes(url.path)
                #expect(!url.lastPathComponent.contains(hash), "a kept download is named by its hash")
                #expect(bytes.firstRange(of: window) == nil, "\(url.lastPathComponent) holds the download's bytes in the clear")
                #expect(bytes.firstRange(of: hashText) == nil, "\(url.lastPathComponent) holds the hash in the clear")
            }
            // Three whole 64 KiB pieces were sealed; the fourth was still gathering.
            let next = try files.downloadWriter(for: hash)
            #expect(next.size == 3 * 65_536)
            #expect(try next.readBack(at: 0, count: 3 * 65_536) == Array(Self.secret[..<(3 * 65_536)]))
            try next.append(Array(Self.secret[(3 * 65_536)...]))
            try next.commit(as: hash)
            #expect(try files.reader(for: hash).read(at: 0, count: Self.secret.count) == Self.secret)

            // An altered piece of a kept download does not open: reported, never read back.
            let other = AttachmentHasher.hash(Array(Self.secret.reversed()))
            let kept = try files.downloadWriter(for: other)
            try kept.append(Array(Self.secret.reversed()[..<140_000]))
            kept.keep()
            let partial = try #require(Self.files(under: dir.url).first { $0.lastPathComponent.hasSuffix(".download") })
            var bytes = try fileBytes(partial.path)
            bytes[bytes.count - 100] ^= 0x01
            try Data(bytes).write(to: partial)
            let resumed = try files.downloadWriter(for: other)
            #expect(resumed.size == 2 * 65_536)
            #expect(throws: SyncError.self) { _ = try resumed.readBack(at: 0, count: 2 * 65_536) }
            resumed.cancel()
            try await store.close()
        }
    }
}
