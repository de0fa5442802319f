import Foundation
import OfflineSync
import OfflineSyncEncryptedFile
import OfflineSyncStoreKit
import OfflineSyncTransport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension FuzzTarget {
    /// What an attachment's bytes pass through: a sealed file an encrypting store reads back
    /// from disk, and the `Content-Range` a client reads from a ranged download.
    static let attachmentTargets: [FuzzTarget] = [
        FuzzTarget("sealed-blob", "an encrypted-file store's sealed attachment file (OSBLOB01, file id, sealed header, sealed pieces), listed by BlobDirectory.inventory() and read") { input throws(FuzzFinding) in
            try await withScratchDirectory { directory throws(FuzzFinding) in
                try checkSealedFile(input, in: directory)
            }
        },
        FuzzTarget("content-range", "a ranged download's Content-Range as the client reads it (ContentRange: `bytes first-last/complete`, `bytes */complete`)") { input throws(FuzzFinding) in
            let field = text(input)
            guard let answer = ContentRange(field) else { return }
            let spelled: String
            if let range = answer.range {
                try expect(range.lowerBound >= 0 && range.upperBound < answer.complete,
                           "\(field) was read as bytes \(range.lowerBound)-\(range.upperBound) of \(answer.complete)")
                spelled = "bytes \(range.lowerBound)-\(range.upperBound)/\(answer.complete)"
            } else {
                try expect(answer.complete >= 0, "\(field) was read as a length of \(answer.complete)")
                spelled = "bytes */\(answer.complete)"
            }
            try expect(ContentRange(spelled) == answer, "\(field) was read as \(answer), which \(spelled) does not read back as")
        },
    ]

    /// How an encrypted-file store whose master key is ``storeKey`` seals its attachment files
    /// (AES-GCM): the sealed-blob seeds were written with it.
    static let attachmentSealing: any BlobSealing = EncryptedFileStore.attachmentSealing(master: SecretBytes(storeKey), cipher: .aesGCM)

    /// The hash whose file name the sealed-blob target writes its input under (the name hides
    /// the hash, so the inventory reads the header of whatever is there).
    static let sealedName = String(repeating: "5a", count: 32)

    /// Writes `input` as a stored file of a sealed ``BlobDirectory`` in `directory` and checks
    /// what its inventory makes of it: never unreadable (the file reads); damaged, then removed
    /// by `removeDamaged`; or, when its header opens under the key, a file that is never removed
    /// as damaged, whose size and bytes agree with the header and which, sealed again, lists
    /// with the same hash and size.
    static func checkSealedFile(_ input: [UInt8], in directory: String) throws(FuzzFinding) {
        let blobs = BlobDirectory(path: directory, sealing: attachmentSealing)
        let path = blobs.objectPath(sealedName)
        makeParent(of: path)
        try write(input, to: path)
        let name = String(path.dropFirst(directory.count + 1))
        guard let inventory = try refusing("BlobDirectory.inventory()", { try blobs.inventory() }) else {
            throw FuzzFinding("the inventory of a directory of one file failed")
        }
        try expect(inventory.unreadable.isEmpty, "a sealed file that reads was reported unreadable: \(inventory.unreadable)")
        if let damaged = inventory.damaged.first {
            try expect(inventory.files.isEmpty && inventory.damaged.count == 1 && damaged.name == name,
                       "one damaged file was listed as \(inventory.files.count) files and damaged \(inventory.damaged.map(\.name))")
            try expect(damaged.error.code == .attachmentDamaged, "a damaged sealed file was reported as \(damaged.error)")
            let removed = try refusing("BlobDirectory.removeDamaged", { try blobs.removeDamaged(damaged, sparing: []) })
            try expect(removed == true && fileContents(path) == nil, "a file whose own bytes prove it damaged was not removed")
            return
        }
        guard inventory.files.count == 1, let header = inventory.files.first else {
            throw FuzzFinding("one sealed file was listed as \(inventory.files.count) files")
        }
        try expect(Attachment.isHash(header.sha256) && header.size >= 0, "a sealed header was read as \(header.sha256), \(header.size) bytes")
        let good = DamagedAttachmentFile(name: name, error: SyncError(.attachmentDamaged, "named by the fuzz target"))
        let removed = try refusing("BlobDirectory.removeDamaged", { try blobs.removeDamaged(good, sparing: []) })
        try expect(removed == false && fileContents(path) == input, "a file whose sealed header opens was removed as damaged")
        try readSealedFile(at: path, header: header, from: blobs)
    }

    /// Moves the file at `path` to the name of its header's hash, then reads it as a store does:
    /// its size, then its bytes (each piece checked), which hash to the header's hash (the
    /// seeds seal each file under its hash: a file whose pieces open was written by the sealer).
    static func readSealedFile(at path: String, header: AttachmentFileInfo, from blobs: BlobDirectory) throws(FuzzFinding) {
        let named = blobs.objectPath(header.sha256)
        if named != path {
            makeParent(of: named)
            guard rename(path, named) == 0 else { throw FuzzFinding("cannot move \(path) to \(named)") }
        }
        let size = try refusing("BlobDirectory.size(of:)", { try blobs.size(of: header.sha256) }) ?? nil
        try expect(size == header.size, "the inventory read \(header.size) bytes and size(of:) \(String(describing: size))")
        guard let bytes = try readSealedBytes(header.sha256, from: blobs) else { return }
        try expect(Int64(bytes.count) == header.size && AttachmentHasher.hash(bytes) == header.sha256,
                   "a sealed file whose pieces open holds \(bytes.count) bytes that do not hash to its header's \(header.sha256), \(header.size) bytes")
        // Sealed again (a new file id, new nonces), the file lists with the same hash and size.
        do {
            let writer = try blobs.makeWriter()
            try writer.append(bytes)
            try writer.commit(as: header.sha256)
        } catch {
            throw FuzzFinding("the bytes of a sealed file cannot be sealed again: \(error)")
        }
        let again = try refusing("BlobDirectory.inventory()", { try blobs.inventory() })
        try expect(again?.files.map(\.sha256) == [header.sha256] && again?.files.map(\.size) == [header.size] && again?.damaged.isEmpty == true,
                   "a file sealed again does not list as \(header.sha256), \(header.size) bytes")
    }

    /// The bytes of the stored file of `sha256`, read in slices that cross the sealed pieces'
    /// bounds; `nil` when a piece does not open (``SyncError/Code/attachmentDamaged``).
    static func readSealedBytes(_ sha256: String, from blobs: BlobDirectory) throws(FuzzFinding) -> [UInt8]? {
        do {
            let reader = try blobs.reader(for: sha256)
            var bytes: [UInt8] = []
            while Int64(bytes.count) < reader.size {
                let slice = try reader.read(at: Int64(bytes.count), count: 50_000)
                if slice.isEmpty { break }
                bytes += slice
            }
            return bytes
        } catch let error as SyncError {
            try expect(error.code == .attachmentDamaged, "reading a sealed file whose header opens failed with \(error)")
            return nil
        } catch {
            throw FuzzFinding("reading a sealed file threw \(type(of: error)), not a SyncError: \(error)")
        }
    }

    /// Makes the directories above the absolute `path` (those that exist stay).
    static func makeParent(of path: String) {
        var parent = ""
        for component in path.split(separator: "/").dropLast() {
            parent += "/" + String(component)
            _ = mkdir(parent, 0o700)
        }
    }
}
