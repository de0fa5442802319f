#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Bytes that must not linger: a key or a passphrase. The buffer is zeroed when the last
/// reference goes away, and ``description`` never shows the contents.
public final class SecretBytes: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: the buffer is written only in `init` and `deinit`; in between it
    // is only read, through `withUnsafeBytes`.
    private let buffer: UnsafeMutableRawBufferPointer

    /// Copies `bytes` into a buffer of its own.
    public init(_ bytes: some Collection<UInt8>) {
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        count = bytes.count
    }

    /// Copies the UTF-8 bytes of `string`.
    public convenience init(utf8 string: String) {
        self.init(Array(string.utf8))
    }

    /// The number of bytes.
    public let count: Int

    /// Lends the bytes to `body`; they must not escape it.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[0..<count]))
    }

    deinit {
        SecretBytes.zero(buffer)
        buffer.deallocate()
    }

    /// Overwrites memory with zeros in a way the optimizer does not remove.
    public static func zero(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        #if canImport(Glibc) || canImport(Musl)
        explicit_bzero(base, buffer.count)
        #else
        memset_s(base, buffer.count, 0, buffer.count)
        #endif
    }

    /// `SecretBytes(<n> bytes, redacted)`.
    public var description: String { "SecretBytes(\(count) bytes, redacted)" }
}

/// The key of an encrypted store: raw key bytes or a passphrase, given in code or read from
/// an environment variable. Never written in a store URL.
public struct StoreSecret: Sendable, CustomStringConvertible {
    /// What the bytes are.
    public enum Kind: String, Sendable, Hashable {
        /// A raw key (an encrypted-file store takes exactly 32 bytes).
        case key
        /// A passphrase, stretched by the store's key-derivation function.
        case passphrase
    }

    /// What the bytes are.
    public let kind: Kind
    /// The key or the passphrase's UTF-8 bytes.
    public let bytes: SecretBytes

    /// A raw key.
    public static func key(_ bytes: some Collection<UInt8>) -> StoreSecret {
        StoreSecret(kind: .key, bytes: SecretBytes(bytes))
    }

    /// A passphrase.
    public static func passphrase(_ passphrase: String) -> StoreSecret {
        StoreSecret(kind: .passphrase, bytes: SecretBytes(utf8: passphrase))
    }

    /// Reads a secret from the environment variable `name`: a passphrase as is, a key as 64
    /// hexadecimal digits. Throws ``SyncError/Code/missingKey`` naming the variable (never its
    /// value) when it is unset, empty or, for a key, not 64 hex digits.
    public static func fromEnvironment(_ name: String, kind: Kind,
                                       environment: [String: String]) throws -> StoreSecret {
        guard let text = environment[name], !text.isEmpty else {
            throw SyncError(.missingKey, "the environment variable \(name), which should hold the store's \(kind.rawValue), is not set")
        }
        switch kind {
        case .passphrase:
            return .passphrase(text)
        case .key:
            let digits = Array(text.utf8)
            guard digits.count == 64 else {
                throw SyncError(.missingKey, "the environment variable \(name) must hold a 256-bit key as 64 hexadecimal digits")
            }
            var key = [UInt8](repeating: 0, count: 32)
            defer { key.withUnsafeMutableBytes { SecretBytes.zero($0) } }
            for i in 0..<32 {
                guard let high = hexDigit(digits[2 * i]), let low = hexDigit(digits[2 * i + 1]) else {
                    throw SyncError(.missingKey, "the environment variable \(name) must hold a 256-bit key as 64 hexadecimal digits")
                }
                key[i] = high << 4 | low
            }
            return .key(key)
        }
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// `StoreSecret(key, redacted)` or `StoreSecret(passphrase, redacted)`.
    public var description: String { "StoreSecret(\(kind.rawValue), redacted)" }
}
