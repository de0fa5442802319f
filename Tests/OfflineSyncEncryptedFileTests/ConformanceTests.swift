import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncEncryptedFile
import Testing

/// The shared LocalStore conformance suite, run against a store opened with a raw key and one
/// opened with a passphrase (cheap key-derivation parameters, so the suite stays fast).
@Suite("EncryptedFileStore passes the LocalStore conformance suite")
struct ConformanceTests {
    static let rawKeySuite = LocalStoreConformance(
        capabilities: .init(persistent: true, storeFile: { $0.appendingPathComponent("store.osync") })
    ) { directory in
        try await EncryptedFileStore(path: directory.appendingPathComponent("store.osync").path, key: try .raw(TestKeys.raw))
    }

    static let passphraseSuite = LocalStoreConformance(
        capabilities: .init(persistent: true, storeFile: { $0.appendingPathComponent("store.osync") })
    ) { directory in
        try await EncryptedFileStore(path: directory.appendingPathComponent("store.osync").path,
                                     key: .passphrase("correct horse battery staple", derivation: TestKeys.cheapScrypt),
                                     options: .init(cipher: .chaChaPoly))
    }

    @Test("raw key, AES-GCM", arguments: LocalStoreConformance.Group.allCases)
    func rawKey(group: LocalStoreConformance.Group) async throws {
        try await Self.rawKeySuite.check(group)
    }

    @Test("passphrase, ChaCha20-Poly1305", arguments: LocalStoreConformance.Group.allCases)
    func passphrase(group: LocalStoreConformance.Group) async throws {
        try await Self.passphraseSuite.check(group)
    }
}
