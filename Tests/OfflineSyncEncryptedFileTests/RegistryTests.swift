import Foundation
import OfflineSync
import OfflineSyncEncryptedFile
import Testing

/// The `encrypted-file` scheme: secrets from code or named environment variables, never
/// from the URL; cheap KDF parameters through the URL; isolation for conformance runs.
@Suite("encrypted-file scheme")
struct RegistryTests {
    static var registry: StoreRegistry {
        var registry = StoreRegistry()
        registry.register(.encryptedFile)
        return registry
    }

    static func url(_ path: String, _ query: String = "") -> String {
        "encrypted-file://" + path + (query.isEmpty ? "" : "?" + query)
    }

    static let hexKey = TestKeys.raw.map { String(format: "%02x", $0) }.joined()

    @Test func passphraseFromEnvironmentVariable() async throws {
        try await withTempDirectory { dir in
            let path = dir.file("app.osync")
            let options = StoreOptions(environment: ["APP_PASSPHRASE": "from the environment"])
            let url = Self.url(path, "passphrase-env=APP_PASSPHRASE&kdf=scrypt&kdf-cost=4")
            let store = try await Self.registry.open(url, options: options)
            try await store.defineTable(TableSchema("t"))
            try await store.write { tx in try tx.upsert(Record(id: "a"), in: "t") }
            try await store.close()
            // The same passphrase given directly opens the file.
            let direct = try await EncryptedFileStore(path: path, key: .passphrase("from the environment"))
            #expect(try await direct.read { tx in try tx.record(in: "t", id: "a") } != nil)
            try await direct.close()
            // Another passphrase in the variable is a wrong key.
            let wrong = StoreOptions(environment: ["APP_PASSPHRASE": "something else"])
            let error = await #expect(throws: SyncError.self) { _ = try await Self.registry.open(url, options: wrong) }
            #expect(error?.code == .wrongKey)
        }
    }

    @Test func pbkdf2IterationsFromTheURL() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let options = StoreOptions(environment: ["PASS": "p"])
            let store = try await Self.registry.open(Self.url(path, "passphrase-env=PASS&kdf=pbkdf2&iterations=5"), options: options)
            try await store.close()
            let reopened = try await EncryptedFileStore(path: path, key: .passphrase("p", derivation: TestKeys.cheapPBKDF2))
            try await reopened.close()
        }
    }

    @Test func rawKeyHexFromEnvironmentVariable() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let options = StoreOptions(environment: ["APP_KEY": Self.hexKey])
            let store = try await Self.registry.open(Self.url(path, "key-env=APP_KEY&cipher=chacha20-poly1305"), options: options)
            try await store.defineTable(TableSchema("t"))
            try await store.close()
            let direct = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw))
            #expect(try await direct.read { tx in try tx.tables().map(\.name) } == ["t"])
            try await direct.close()
        }
    }

    @Test func secretInCodeWins() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let options = StoreOptions(secret: .key(TestKeys.raw), environment: [:])
            let store = try await Self.registry.open(Self.url(path), options: options)
            try await store.close()
            let direct = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw))
            try await direct.close()
        }
    }

    @Test func missingSecretIsMissingKey() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let none = await #expect(throws: SyncError.self) {
                _ = try await Self.registry.open(Self.url(path), options: StoreOptions(environment: [:]))
            }
            #expect(none?.code == .missingKey)
            let unset = await #expect(throws: SyncError.self) {
                _ = try await Self.registry.open(Self.url(path, "key-env=NOT_SET"), options: StoreOptions(environment: [:]))
            }
            #expect(unset?.code == .missingKey)
            #expect(unset?.message.contains("NOT_SET") == true)
            let short = await #expect(throws: SyncError.self) {
                _ = try await Self.registry.open(Self.url(path, "key-env=K"), options: StoreOptions(environment: ["K": "abcd"]))
            }
            #expect(short?.code == .missingKey)
            #expect(!FileManager.default.fileExists(atPath: path), "no file is created without a key")
        }
    }

    @Test("secrets and unknown parameters in the URL are refused", arguments: [
        "key=00112233", "passphrase=hunter2", "kdf=argon2", "kdf-cost=0", "kdf-cost=40", "kdf-cost=24", "iterations=x",
        "kdf=pbkdf2&iterations=1000000000",
        "kdf=pbkdf2&kdf-cost=4", "kdf=scrypt&iterations=4", "cipher=rot13", "mode=fast",
    ])
    func refusedParameters(query: String) async throws {
        try await withTempDirectory { dir in
            let options = StoreOptions(secret: .passphrase("p"), environment: [:])
            let error = await #expect(throws: SyncError.self) {
                _ = try await Self.registry.open(Self.url(dir.file(), query), options: options)
            }
            #expect(error?.code == .invalidStoreURL)
            #expect(error?.description.contains("hunter2") == false)
            #expect(!FileManager.default.fileExists(atPath: dir.file()))
        }
    }

    @Test("a URL needs a local absolute path", arguments: [
        "encrypted-file:relative.osync", "encrypted-file://host/app.osync", "encrypted-file:///",
    ])
    func badPaths(url: String) async throws {
        let error = await #expect(throws: SyncError.self) {
            _ = try await Self.registry.open(url, options: StoreOptions(secret: .key(TestKeys.raw), environment: [:]))
        }
        #expect(error?.code == .invalidStoreURL)
    }

    @Test func isolatePlacesTheFileInTheDirectory() throws {
        let adapter = try #require(Self.registry.adapter(for: "encrypted-file"))
        let location = try StoreLocation(parsing: "encrypted-file:///var/app/app.osync?passphrase-env=P&kdf-cost=4")
        let directory = URL(fileURLWithPath: "/tmp/case-1")
        let isolated = try #require(try adapter.isolate?(location, directory))
        #expect(isolated.persistent)
        #expect(isolated.storeFile == directory.appendingPathComponent("app.osync"))
        #expect(isolated.location.path == "/tmp/case-1/app.osync")
        #expect(isolated.location.parameter("passphrase-env") == "P")
        #expect(isolated.location.parameter("kdf-cost") == "4")
    }

    @Test func createIfMissingFalseRefusesAMissingFileAndCreatesNothing() async throws {
        try await withTempDirectory { dir in
            let path = dir.file("absent.osync")
            let options = StoreOptions(environment: ["K": Self.hexKey], createIfMissing: false)
            let error = await #expect(throws: SyncError.self) {
                _ = try await Self.registry.open(Self.url(path, "key-env=K"), options: options)
            }
            #expect(error?.code == .notFound)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }
}
