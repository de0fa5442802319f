import Crypto
import OfflineSync
import OfflineSyncStoreKit

/// Seals attachment files under keys derived from the store's master key: the store's
/// cipher for the bytes, HMAC-SHA256 for the file names. The keys do not depend on the
/// store file's salt, which changes at every compaction, so files stay readable.
struct AttachmentSealing: BlobSealing {
    let cipher: EncryptedFileStore.Cipher
    let key: SymmetricKey
    let nameKey: SymmetricKey

    static let keyInfo = Array("OfflineSync encrypted-file v1 attachment key".utf8)
    static let nameInfo = Array("OfflineSync encrypted-file v1 attachment names".utf8)

    init(master: SecretBytes, cipher: EncryptedFileStore.Cipher) {
        self.cipher = cipher
        (key, nameKey) = master.withUnsafeBytes { bytes in
            let input = SymmetricKey(data: bytes)
            return (HKDF<SHA256>.deriveKey(inputKeyMaterial: input, info: Self.keyInfo + [cipher.rawValue], outputByteCount: 32),
                    HKDF<SHA256>.deriveKey(inputKeyMaterial: input, info: Self.nameInfo, outputByteCount: 32))
        }
    }

    var overhead: Int { EncryptedFileFormat.nonceSize + EncryptedFileFormat.tagSize }

    func seal(_ plain: UnsafeRawBufferPointer, context: [UInt8]) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(plain.count + overhead)
        try cipher.seal(Array(plain), key: key, aad: context, into: &out)
        return out
    }

    func open(_ sealed: [UInt8], context: [UInt8]) throws -> [UInt8] {
        guard let plain = cipher.open(sealed, key: key, aad: context) else {
            throw SyncError(.attachmentDamaged, "a sealed attachment piece does not open")
        }
        return plain
    }

    func fileName(for sha256: String) -> String {
        AttachmentHasher.hex(HMAC<SHA256>.authenticationCode(for: Array(sha256.utf8), using: nameKey))
    }
}

extension EncryptedFileOpenLog {
    /// The sealing of this store's attachment files.
    func attachmentSealing() -> AttachmentSealing { AttachmentSealing(master: master, cipher: header.cipher) }
}

extension EncryptedFileStore {
    /// How a store whose master key is `master` and whose header names `cipher` seals its
    /// attachment files: the fuzz target of the sealed-file reader opens files with it, as the
    /// store does, and its seeds are written with it.
    package static func attachmentSealing(master: SecretBytes, cipher: Cipher) -> any BlobSealing {
        AttachmentSealing(master: master, cipher: cipher)
    }
}
