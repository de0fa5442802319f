import Crypto
import Foundation
import OfflineSync
import OfflineSyncEncryptedFile
import OfflineSyncStoreKit
import OfflineSyncTestSupport

/// Keys and derivations shared by the tests.
enum TestKeys {
    /// A fixed raw key.
    static let raw: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
    /// Another raw key.
    static let otherRaw: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 5) }
    /// scrypt cheap enough for tests (never use it for real data).
    static let cheapScrypt = EncryptedFileStore.KeyDerivation.scrypt(logN: 4, r: 8, p: 1)
    /// PBKDF2 cheap enough for tests.
    static let cheapPBKDF2 = EncryptedFileStore.KeyDerivation.pbkdf2SHA256(iterations: 10)
}

/// A test's temporary directory, with the store file's conventional path in it.
struct TempDirectory {
    let url: URL

    func file(_ name: String = "store.osync") -> String { url.appendingPathComponent(name).path }
}

/// Runs `body` with a fresh temporary directory, removing it afterwards even on failure.
func withTempDirectory<T>(_ body: (TempDirectory) async throws -> T) async throws -> T {
    try await withTemporaryDirectory { try await body(TempDirectory(url: $0)) }
}

/// The bytes of a file (read without Foundation's leak: ``OfflineSyncStoreKit/fileContents(_:)``).
func fileBytes(_ path: String) throws -> [UInt8] {
    guard let bytes = fileContents(path) else { throw CocoaError(.fileReadNoSuchFile) }
    return bytes
}

/// SHA-256 of a file, hex.
func fileHash(_ path: String) throws -> String {
    SHA256.hash(data: try fileBytes(path)).map { String(format: "%02x", $0) }.joined()
}

/// Writes bytes as a file.
func writeBytes(_ bytes: [UInt8], to path: String) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Whether `haystack` contains `needle`.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
    for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
        if Array(haystack[start..<(start + needle.count)]) == needle { return true }
    }
    return false
}
