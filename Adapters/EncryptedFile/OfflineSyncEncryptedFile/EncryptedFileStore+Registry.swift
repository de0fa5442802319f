import Foundation
import OfflineSync

extension StoreRegistry.Adapter {
    /// The `encrypted-file` scheme: `encrypted-file:///absolute/path/app.osync`. The key never
    /// travels in the URL: it comes from ``StoreOptions/secret`` or from the environment
    /// variable named by `key-env=VAR` (64 hex digits) or `passphrase-env=VAR`.
    ///
    /// Optional parameters, used only when the file is created (an existing file keeps what its
    /// header records): `kdf=scrypt|pbkdf2`, `kdf-cost=N` (scrypt's log2 of N, 1…30, default
    /// 17), `iterations=N` (PBKDF2-SHA256, default 600000), `cipher=aes-gcm|chacha20-poly1305`. And, for every open:
    /// `compact-after=BYTES`, the appended bytes below which writes never compact (default 1 MiB;
    /// see ``EncryptedFileStore/Options/minimumCompactionBytes``).
    /// Register it with `registry.register(.encryptedFile)`.
    ///
    /// Opening throws ``SyncError/Code/missingKey`` when no secret is given, and what
    /// ``EncryptedFileStore/init(path:key:options:)`` throws.
    public static var encryptedFile: StoreRegistry.Adapter {
        StoreRegistry.Adapter(scheme: "encrypted-file",
                              example: "encrypted-file:///path/app.osync?passphrase-env=APP_PASSPHRASE",
                              isolate: { location, directory in
            let parsed = try EncryptedFileLocation(location)
            let file = directory.appendingPathComponent(parsed.fileName)
            return StoreRegistry.Isolated(location: try location.withPath(file.path), persistent: true, storeFile: file)
        }, open: { location, options in
            let parsed = try EncryptedFileLocation(location)
            try options.requireExisting(parsed.path, for: location)
            guard let secret = try options.resolveSecret(for: location) else {
                throw SyncError(.missingKey, "\(location) needs a key or passphrase: pass StoreOptions(secret:) or add key-env=VAR or passphrase-env=VAR naming an environment variable")
            }
            let key = try EncryptedFileStore.Key(secret, derivation: parsed.derivation)
            return try await EncryptedFileStore(path: parsed.path, key: key, options: parsed.options)
        })
    }
}

/// What an `encrypted-file:` URL says.
struct EncryptedFileLocation {
    var path: String
    var derivation: EncryptedFileStore.KeyDerivation
    var options: EncryptedFileStore.Options

    static let parameters: Set<String> = ["kdf", "kdf-cost", "iterations", "cipher", "compact-after"]

    init(_ location: StoreLocation) throws {
        try location.checkParameters(allowed: Self.parameters.union(StoreOptions.secretParameters))
        if let authority = location.authority, !authority.isEmpty, authority != "localhost" {
            throw SyncError(.invalidStoreURL, "an encrypted-file URL names a local file: encrypted-file:///path/app.osync (three slashes), not a host")
        }
        guard location.authority != nil, location.path.hasPrefix("/"), location.path.count > 1 else {
            throw SyncError(.invalidStoreURL, "an encrypted-file URL needs an absolute file path: encrypted-file:///path/app.osync")
        }
        path = location.path
        options = EncryptedFileStore.Options()
        switch location.parameter("cipher")?.lowercased() {
        case nil, "aes-gcm": options.cipher = .aesGCM
        case "chacha20-poly1305": options.cipher = .chaChaPoly
        default: throw SyncError(.invalidStoreURL, "encrypted-file URL parameter cipher takes aes-gcm or chacha20-poly1305")
        }
        if let bytes = try Self.integer(location, "compact-after") { options.minimumCompactionBytes = bytes }
        let cost = try Self.integer(location, "kdf-cost"), iterations = try Self.integer(location, "iterations")
        switch location.parameter("kdf")?.lowercased() {
        case nil, "scrypt":
            guard iterations == nil else {
                throw SyncError(.invalidStoreURL, "encrypted-file URL parameter iterations applies to kdf=pbkdf2; scrypt takes kdf-cost")
            }
            derivation = .scrypt(logN: cost ?? 17, r: 8, p: 1)
        case "pbkdf2":
            guard cost == nil else {
                throw SyncError(.invalidStoreURL, "encrypted-file URL parameter kdf-cost applies to kdf=scrypt; pbkdf2 takes iterations")
            }
            derivation = .pbkdf2SHA256(iterations: iterations ?? 600_000)
        default:
            throw SyncError(.invalidStoreURL, "encrypted-file URL parameter kdf takes scrypt or pbkdf2")
        }
        do {
            try derivation.validate()
        } catch let error as SyncError {
            throw SyncError(.invalidStoreURL, "encrypted-file URL: \(error.message)")
        }
    }

    private static func integer(_ location: StoreLocation, _ name: String) throws -> Int? {
        guard let text = location.parameter(name) else { return nil }
        guard let value = Int(text), value > 0 else {
            throw SyncError(.invalidStoreURL, "encrypted-file URL parameter \(name) takes a positive integer")
        }
        return value
    }

    /// The file name of the path (`app.osync`).
    var fileName: String {
        let name = URL(fileURLWithPath: path).lastPathComponent
        return name.isEmpty || name == "/" ? "store.osync" : name
    }
}
