import Crypto
import Foundation
import OfflineSync

/// The on-disk format; Docs/EncryptedFileFormat.md describes it byte by byte.
enum EncryptedFileFormat {
    static let magic: [UInt8] = Array("OSYNCEF".utf8) + [0]
    static let version: UInt16 = 1
    /// Header length: fields (104) + verifier (44) + SHA-256 (32).
    static let headerSize = 180
    static let authenticatedHeaderSize = 104
    static let checksummedHeaderSize = 148
    static let frameHeaderSize = 8
    static let nonceSize = 12
    static let tagSize = 16
    /// The largest frame body a reader accepts (a transaction bigger than this is refused).
    static let maxFrameBody = 1 << 30
    static let verifierPlaintext = [UInt8](repeating: 0, count: 16)
    static let fileKeyInfo = Array("OfflineSync encrypted-file v1 frame key".utf8)

    enum KDFID: UInt8 {
        case none = 0, scrypt = 1, pbkdf2SHA256 = 2
    }

    /// Random bytes from the system's cryptographic generator.
    static func random(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// FNV-1a over a frame's length and sequence number: a flipped length byte is detected
    /// as damage instead of being read as a torn tail.
    static func frameCheck(length: UInt32, sequence: UInt64) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        var bytes: [UInt8] = []
        appendLE(length, to: &bytes)
        appendLE(sequence, to: &bytes)
        for byte in bytes {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }

    static func frameAAD(sequence: UInt64) -> [UInt8] {
        var aad = Array("OSEF".utf8)
        appendLE(sequence, to: &aad)
        return aad
    }

    static func appendLE<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    static func readLE<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
        var value: T = 0
        for i in 0..<MemoryLayout<T>.size { value |= T(bytes[offset + i]) << (8 * i) }
        return value
    }
}

extension EncryptedFileStore.Cipher {
    /// Seals `plaintext`, appending nonce, ciphertext and tag to `out`.
    func seal(_ plaintext: [UInt8], key: SymmetricKey, aad: [UInt8], into out: inout [UInt8]) throws {
        do {
            switch self {
            case .aesGCM:
                let box = try AES.GCM.seal(plaintext, using: key, nonce: AES.GCM.Nonce(), authenticating: aad)
                out.append(contentsOf: box.nonce)
                out.append(contentsOf: box.ciphertext)
                out.append(contentsOf: box.tag)
            case .chaChaPoly:
                let box = try ChaChaPoly.seal(plaintext, using: key, nonce: ChaChaPoly.Nonce(), authenticating: aad)
                out.append(contentsOf: box.nonce)
                out.append(contentsOf: box.ciphertext)
                out.append(contentsOf: box.tag)
            }
        } catch {
            throw SyncError(.storageFailure, "encryption failed")
        }
    }

    /// Opens nonce ‖ ciphertext ‖ tag; returns `nil` if authentication fails.
    func open(_ body: [UInt8], key: SymmetricKey, aad: [UInt8]) -> [UInt8]? {
        guard body.count >= EncryptedFileFormat.nonceSize + EncryptedFileFormat.tagSize else { return nil }
        do {
            switch self {
            case .aesGCM:
                let box = try AES.GCM.SealedBox(combined: body)
                return Array(try AES.GCM.open(box, using: key, authenticating: aad))
            case .chaChaPoly:
                let box = try ChaChaPoly.SealedBox(combined: body)
                return Array(try ChaChaPoly.open(box, using: key, authenticating: aad))
            }
        } catch {
            return nil
        }
    }
}

/// The fixed-size header at the start of the file.
struct EncryptedFileHeader {
    var cipher: EncryptedFileStore.Cipher
    var kdf: EncryptedFileFormat.KDFID
    var kdfParameters: (UInt32, UInt32, UInt32)
    var kdfSalt: [UInt8]
    var fileSalt: [UInt8]
    /// Where the compacted snapshot ends and appended frames begin.
    var baseEnd: UInt64
    /// How many frames the snapshot holds.
    var baseFrames: UInt64

    /// The key derivation the header records, or `nil` for a raw key.
    var derivation: EncryptedFileStore.KeyDerivation? {
        switch kdf {
        case .none: return nil
        case .scrypt: return .scrypt(logN: Int(kdfParameters.0), r: Int(kdfParameters.1), p: Int(kdfParameters.2))
        case .pbkdf2SHA256: return .pbkdf2SHA256(iterations: Int(kdfParameters.0))
        }
    }

    init(cipher: EncryptedFileStore.Cipher, derivation: EncryptedFileStore.KeyDerivation?, kdfSalt: [UInt8],
         fileSalt: [UInt8], baseEnd: UInt64, baseFrames: UInt64) {
        self.cipher = cipher
        switch derivation {
        case nil: kdf = .none; kdfParameters = (0, 0, 0)
        case .scrypt(let logN, let r, let p)?: kdf = .scrypt; kdfParameters = (UInt32(logN), UInt32(r), UInt32(p))
        case .pbkdf2SHA256(let iterations)?: kdf = .pbkdf2SHA256; kdfParameters = (UInt32(iterations), 0, 0)
        }
        self.kdfSalt = kdfSalt
        self.fileSalt = fileSalt
        self.baseEnd = baseEnd
        self.baseFrames = baseFrames
    }

    /// The frame key: HKDF-SHA256 of the master key with this file's salt.
    func fileKey(master: SecretBytes) -> SymmetricKey {
        master.withUnsafeBytes { bytes in
            HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: bytes), salt: fileSalt,
                                   info: EncryptedFileFormat.fileKeyInfo + [cipher.rawValue], outputByteCount: 32)
        }
    }

    /// The authenticated fields (bytes 0..<104).
    private var fieldBytes: [UInt8] {
        var out = EncryptedFileFormat.magic
        EncryptedFileFormat.appendLE(EncryptedFileFormat.version, to: &out)
        out.append(cipher.rawValue)
        out.append(kdf.rawValue)
        EncryptedFileFormat.appendLE(kdfParameters.0, to: &out)
        EncryptedFileFormat.appendLE(kdfParameters.1, to: &out)
        EncryptedFileFormat.appendLE(kdfParameters.2, to: &out)
        out += kdfSalt
        out += fileSalt
        EncryptedFileFormat.appendLE(baseEnd, to: &out)
        EncryptedFileFormat.appendLE(baseFrames, to: &out)
        return out
    }

    /// The whole header: fields, the verifier sealed with `fileKey` over the fields, and a
    /// SHA-256 of everything before it.
    func encode(fileKey: SymmetricKey) throws -> [UInt8] {
        var out = fieldBytes
        precondition(out.count == EncryptedFileFormat.authenticatedHeaderSize)
        try cipher.seal(EncryptedFileFormat.verifierPlaintext, key: fileKey, aad: out, into: &out)
        out += Array(SHA256.hash(data: out))
        precondition(out.count == EncryptedFileFormat.headerSize)
        return out
    }

    /// Parses a header whose magic was already checked. Throws ``SyncError/Code/corrupted``
    /// when the checksum or a field is wrong, ``SyncError/Code/unsupported`` for a newer format.
    init(parsing bytes: [UInt8], path: String) throws {
        precondition(bytes.count == EncryptedFileFormat.headerSize)
        let digest = Array(SHA256.hash(data: bytes[0..<EncryptedFileFormat.checksummedHeaderSize]))
        guard digest == Array(bytes[EncryptedFileFormat.checksummedHeaderSize...]) else {
            throw SyncError(.corrupted, "the header of \(path) is damaged (checksum mismatch)")
        }
        let version = EncryptedFileFormat.readLE(UInt16.self, bytes, at: 8)
        guard version == EncryptedFileFormat.version else {
            throw SyncError(.unsupported, "\(path) has encrypted-file format \(version); this version reads format \(EncryptedFileFormat.version)")
        }
        guard let cipher = EncryptedFileStore.Cipher(rawValue: bytes[10]), let kdf = EncryptedFileFormat.KDFID(rawValue: bytes[11]) else {
            throw SyncError(.corrupted, "the header of \(path) names an unknown cipher or key derivation")
        }
        self.cipher = cipher
        self.kdf = kdf
        kdfParameters = (EncryptedFileFormat.readLE(UInt32.self, bytes, at: 12), EncryptedFileFormat.readLE(UInt32.self, bytes, at: 16),
                         EncryptedFileFormat.readLE(UInt32.self, bytes, at: 20))
        kdfSalt = Array(bytes[24..<56])
        fileSalt = Array(bytes[56..<88])
        baseEnd = EncryptedFileFormat.readLE(UInt64.self, bytes, at: 88)
        baseFrames = EncryptedFileFormat.readLE(UInt64.self, bytes, at: 96)
        if let derivation {
            do {
                try derivation.validate()
            } catch {
                throw SyncError(.corrupted, "the header of \(path) records key-derivation parameters out of range")
            }
        }
        guard baseEnd >= UInt64(EncryptedFileFormat.headerSize), (baseEnd == UInt64(EncryptedFileFormat.headerSize)) == (baseFrames == 0) else {
            throw SyncError(.corrupted, "the header of \(path) describes an impossible snapshot")
        }
    }

    /// Whether `fileKey` opens the verifier of the header `bytes`.
    static func verify(_ bytes: [UInt8], cipher: EncryptedFileStore.Cipher, fileKey: SymmetricKey) -> Bool {
        let aad = Array(bytes[0..<EncryptedFileFormat.authenticatedHeaderSize])
        let sealed = Array(bytes[EncryptedFileFormat.authenticatedHeaderSize..<EncryptedFileFormat.checksummedHeaderSize])
        return cipher.open(sealed, key: fileKey, aad: aad) == EncryptedFileFormat.verifierPlaintext
    }
}

/// Builds one frame: length, check, then the sealed change set.
func makeFrame(_ plaintext: [UInt8], sequence: UInt64, cipher: EncryptedFileStore.Cipher, key: SymmetricKey) throws -> [UInt8] {
    var frame = [UInt8](repeating: 0, count: EncryptedFileFormat.frameHeaderSize)
    frame.reserveCapacity(EncryptedFileFormat.frameHeaderSize + EncryptedFileFormat.nonceSize + plaintext.count + EncryptedFileFormat.tagSize)
    try cipher.seal(plaintext, key: key, aad: EncryptedFileFormat.frameAAD(sequence: sequence), into: &frame)
    let length = frame.count - EncryptedFileFormat.frameHeaderSize
    guard length <= EncryptedFileFormat.maxFrameBody else {
        throw SyncError(.limitExceeded, "a transaction of \(length) encoded bytes exceeds the encrypted-file limit of \(EncryptedFileFormat.maxFrameBody)")
    }
    var head: [UInt8] = []
    EncryptedFileFormat.appendLE(UInt32(length), to: &head)
    EncryptedFileFormat.appendLE(EncryptedFileFormat.frameCheck(length: UInt32(length), sequence: sequence), to: &head)
    frame.replaceSubrange(0..<EncryptedFileFormat.frameHeaderSize, with: head)
    return frame
}
