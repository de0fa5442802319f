import Crypto
import Foundation
import OfflineSync
import _CryptoExtras

extension EncryptedFileStore {
    /// How a passphrase is stretched into a 256-bit key. The choice and its parameters are
    /// recorded in the file's header when the file is created, and read back from there when
    /// it is opened, so a store keeps opening whatever the current default is.
    public enum KeyDerivation: Sendable, Hashable, CustomStringConvertible {
        /// scrypt (RFC 7914) with cost `N = 2^logN`, block size `r` and parallelism `p`.
        /// Memory use is `128 · N · r` bytes, at most 1 GiB. `logN` is 1…30, `r` and `p` 1…1024.
        case scrypt(logN: Int, r: Int, p: Int)
        /// PBKDF2-HMAC-SHA256 with this many iterations (at least 1). Use it where scrypt's
        /// memory is too much; OWASP asks for 600,000 iterations or more (at most 100,000,000).
        case pbkdf2SHA256(iterations: Int)

        /// The default for new files: scrypt with `N = 2^17`, `r = 8`, `p = 1` (128 MiB,
        /// roughly a third of a second on a current CPU).
        public static let `default` = KeyDerivation.scrypt(logN: 17, r: 8, p: 1)

        /// `scrypt(logN: 17, r: 8, p: 1)` or `pbkdf2SHA256(iterations: 600000)`.
        public var description: String {
            switch self {
            case .scrypt(let logN, let r, let p): return "scrypt(logN: \(logN), r: \(r), p: \(p))"
            case .pbkdf2SHA256(let iterations): return "pbkdf2SHA256(iterations: \(iterations))"
            }
        }

        /// Throws ``SyncError/Code/invalidValue`` for parameters outside the documented ranges
        /// (also checked for the parameters read from a file's header, so a crafted header
        /// cannot make opening take unbounded memory or time).
        func validate() throws {
            switch self {
            case .scrypt(let logN, let r, let p):
                guard (1...30).contains(logN), (1...1024).contains(r), (1...1024).contains(p),
                      (128 << logN) * r <= 1 << 30 else {
                    throw SyncError(.invalidValue, "scrypt parameters out of range: logN 1…30, r and p 1…1024, 128·N·r at most 1 GiB")
                }
            case .pbkdf2SHA256(let iterations):
                guard (1...100_000_000).contains(iterations) else {
                    throw SyncError(.invalidValue, "PBKDF2 iterations must be between 1 and 100,000,000")
                }
            }
        }

        /// Derives a 32-byte key from `passphrase` and `salt`.
        func derive(_ passphrase: SecretBytes, salt: [UInt8]) throws -> SecretBytes {
            try validate()
            let key: SymmetricKey
            do {
                key = try passphrase.withUnsafeBytes { bytes in
                    switch self {
                    case .scrypt(let logN, let r, let p):
                        return try KDF.Scrypt.deriveKey(from: bytes, salt: salt, outputByteCount: 32,
                                                        rounds: 1 << logN, blockSize: r, parallelism: p)
                    case .pbkdf2SHA256(let iterations):
                        return try KDF.Insecure.PBKDF2.deriveKey(from: bytes, salt: salt, using: .sha256,
                                                                 outputByteCount: 32, unsafeUncheckedRounds: iterations)
                    }
                }
            } catch {
                throw SyncError(.storageFailure, "key derivation (\(self)) failed")
            }
            return key.withUnsafeBytes { SecretBytes($0) }
        }
    }

    /// The key of an encrypted store: 256 raw bits, or a passphrase and how to stretch it.
    ///
    /// Key material lives in a ``SecretBytes`` buffer, zeroed when the last copy of the key
    /// is released. ``description`` never shows it.
    public struct Key: Sendable, CustomStringConvertible {
        enum Material: Sendable {
            case raw
            case passphrase(KeyDerivation)
        }

        let material: Material
        let bytes: SecretBytes

        /// A raw 256-bit key. Throws ``SyncError/Code/missingKey`` unless it is exactly 32
        /// bytes (the message gives the length, never the bytes).
        public static func raw(_ bytes: some Collection<UInt8>) throws -> Key {
            guard bytes.count == 32 else {
                throw SyncError(.missingKey, "an encrypted-file key is 256 bits (32 bytes); this one has \(bytes.count) bytes")
            }
            return Key(material: .raw, bytes: SecretBytes(bytes))
        }

        /// A raw 256-bit key from swift-crypto. Throws ``SyncError/Code/missingKey`` unless it
        /// is 256 bits.
        public static func raw(_ key: SymmetricKey) throws -> Key {
            guard key.bitCount == 256 else {
                throw SyncError(.missingKey, "an encrypted-file key is 256 bits; this one has \(key.bitCount) bits")
            }
            return Key(material: .raw, bytes: key.withUnsafeBytes { SecretBytes($0) })
        }

        /// A passphrase, stretched with `derivation` when a new file is created (an existing
        /// file is opened with the derivation recorded in its header).
        public static func passphrase(_ passphrase: String, derivation: KeyDerivation = .default) -> Key {
            Key(material: .passphrase(derivation), bytes: SecretBytes(utf8: passphrase))
        }

        /// The key a ``StoreSecret`` holds (a raw key or a passphrase). Throws
        /// ``SyncError/Code/missingKey`` for a raw key that is not 32 bytes.
        public init(_ secret: StoreSecret, derivation: KeyDerivation = .default) throws {
            switch secret.kind {
            case .key:
                guard secret.bytes.count == 32 else {
                    throw SyncError(.missingKey, "an encrypted-file key is 256 bits (32 bytes); this one has \(secret.bytes.count) bytes")
                }
                self.init(material: .raw, bytes: secret.bytes)
            case .passphrase:
                self.init(material: .passphrase(derivation), bytes: secret.bytes)
            }
        }

        private init(material: Material, bytes: SecretBytes) {
            self.material = material
            self.bytes = bytes
        }

        /// `Key(raw, redacted)` or `Key(passphrase, scrypt(…), redacted)`.
        public var description: String {
            switch material {
            case .raw: return "Key(raw, redacted)"
            case .passphrase(let derivation): return "Key(passphrase, \(derivation), redacted)"
            }
        }
    }
}
