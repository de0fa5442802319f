import Foundation

/// What a store is opened with besides its URL: a secret given in code, and the environment
/// that `key-env=` / `passphrase-env=` URL parameters are read from.
public struct StoreOptions: Sendable {
    /// The key or passphrase given in code; it wins over a variable named in the URL.
    public var secret: StoreSecret?
    /// The environment variables (the process's own by default).
    public var environment: [String: String]
    /// Whether opening a location that holds no store creates one (the default). When
    /// false, the adapter throws ``SyncError/Code/notFound`` and creates nothing — no file,
    /// directory or database schema (what `offline-sync inspect` needs).
    public var createIfMissing: Bool

    /// Creates options.
    /// - Parameters:
    ///   - secret: the key or passphrase of an encrypted store, or `nil`.
    ///   - environment: where variables named by the URL are looked up.
    ///   - createIfMissing: whether a missing store is created (see ``createIfMissing``).
    public init(secret: StoreSecret? = nil, environment: [String: String] = ProcessInfo.processInfo.environment,
                createIfMissing: Bool = true) {
        self.secret = secret
        self.environment = environment
        self.createIfMissing = createIfMissing
    }

    /// Throws ``SyncError/Code/notFound`` when ``createIfMissing`` is false and nothing
    /// exists at `path` (the file or directory a store keeps its data in), for adapters'
    /// openers.
    public func requireExisting(_ path: String, for location: StoreLocation) throws {
        if !createIfMissing, !FileManager.default.fileExists(atPath: path) {
            throw SyncError(.notFound, "there is no store at \(location): \(path) does not exist")
        }
    }

    /// The URL parameters through which a store URL names the environment variable holding
    /// its secret. The secret itself is never a URL parameter.
    public static let secretParameters: Set<String> = ["key-env", "passphrase-env"]

    /// The secret for `location`: ``secret`` if given, else the variable its `key-env=` or
    /// `passphrase-env=` parameter names, else `nil`. Throws ``SyncError/Code/missingKey``
    /// when the named variable is unset or malformed, and ``SyncError/Code/invalidStoreURL``
    /// when the URL names both.
    public func resolveSecret(for location: StoreLocation) throws -> StoreSecret? {
        if let secret { return secret }
        let keyVariable = location.parameter("key-env"), passphraseVariable = location.parameter("passphrase-env")
        switch (keyVariable, passphraseVariable) {
        case (nil, nil): return nil
        case (let name?, nil): return try .fromEnvironment(name, kind: .key, environment: environment)
        case (nil, let name?): return try .fromEnvironment(name, kind: .passphrase, environment: environment)
        case (_?, _?): throw SyncError(.invalidStoreURL, "a store URL names either key-env or passphrase-env, not both")
        }
    }
}

/// Maps URL schemes to the adapters that open them, so the store is chosen at run time:
///
/// ```swift
/// var stores = StoreRegistry()
/// stores.register(.sqlite)                 // from OfflineSyncSQLite
/// stores.register(.lmdb)                   // from OfflineSyncLMDB
/// stores.register(StoreRegistry.Adapter(scheme: "myfs", example: "myfs:///path") { location, _ in
///     try await MyStore(path: location.path)
/// })
/// let store = try await stores.open("sqlite:///var/app/app.db")
/// ```
///
/// A registry is a plain value: there is no global instance to mutate, and two parts of an
/// app can hold different registries.
public struct StoreRegistry: Sendable {
    /// Opens the store a location names.
    public typealias Opener = @Sendable (_ location: StoreLocation, _ options: StoreOptions) async throws -> any LocalStore

    /// Where a conformance run puts a fresh store of the same kind, and what it can check there.
    public struct Isolated: Sendable {
        /// The location of the store inside the case's directory.
        public var location: StoreLocation
        /// Whether data survives closing and reopening the store at that location.
        public var persistent: Bool
        /// The file holding the store's committed data once closed, for the corrupt-file
        /// cases, or `nil` when the store has no single such file.
        public var storeFile: URL?

        /// Describes an isolated store.
        public init(location: StoreLocation, persistent: Bool, storeFile: URL?) {
            self.location = location
            self.persistent = persistent
            self.storeFile = storeFile
        }
    }

    /// One adapter: the scheme it answers, how to open a location, and how to place a store
    /// of the same kind in a given directory (what `offline-sync conformance` needs).
    public struct Adapter: Sendable {
        /// The URL scheme, lowercase (`sqlite`).
        public var scheme: String
        /// An example URL, shown in errors and help (`sqlite:///path/app.db or sqlite::memory:`).
        public var example: String
        /// Opens a location of this scheme.
        public var open: Opener
        /// Places a store like the one `location` names inside `directory`, or `nil` when the
        /// adapter cannot (a conformance run then refuses the URL).
        public var isolate: (@Sendable (_ location: StoreLocation, _ directory: URL) throws -> Isolated)?

        /// Describes an adapter.
        /// - Parameters:
        ///   - scheme: the URL scheme (compared ignoring case).
        ///   - example: an example URL for help and error messages.
        ///   - isolate: how to place a store of the same kind in a directory (optional).
        ///   - open: opens a location of this scheme.
        public init(scheme: String, example: String,
                    isolate: (@Sendable (_ location: StoreLocation, _ directory: URL) throws -> Isolated)? = nil,
                    open: @escaping Opener) {
            self.scheme = scheme.lowercased()
            self.example = example
            self.isolate = isolate
            self.open = open
        }
    }

    private var adapters: [String: Adapter] = [:]

    /// An empty registry.
    public init() {}

    /// Registers an adapter, replacing one registered earlier for the same scheme.
    public mutating func register(_ adapter: Adapter) {
        adapters[adapter.scheme] = adapter
    }

    /// The registered schemes, sorted.
    public var schemes: [String] { adapters.keys.sorted() }

    /// The adapter registered for `scheme` (ignoring case), or `nil`.
    public func adapter(for scheme: String) -> Adapter? { adapters[scheme.lowercased()] }

    /// Parses `url` and finds its adapter. Throws ``SyncError/Code/invalidStoreURL`` for a
    /// malformed URL or one with a `key=` or `passphrase=` parameter (secrets never travel in
    /// URLs, which end up in logs and shell histories), and ``SyncError/Code/unknownScheme`` for a scheme nobody registered;
    /// both messages list the registered schemes.
    public func resolve(_ url: String) throws -> (location: StoreLocation, adapter: Adapter) {
        let location: StoreLocation
        do {
            location = try StoreLocation(parsing: url)
        } catch let error as SyncError {
            throw SyncError(error.code, "\(error.message) (registered schemes: \(registeredList))")
        }
        for parameter in location.parameters where ["key", "passphrase"].contains(parameter.name.lowercased()) {
            throw SyncError(.invalidStoreURL, "a store URL never carries a secret: pass the \(parameter.name.lowercased()) in code (StoreOptions.secret) or name an environment variable with \(parameter.name.lowercased())-env=")
        }
        guard let adapter = adapters[location.scheme] else {
            throw SyncError(.unknownScheme, "no store adapter is registered for '\(location.scheme):' (registered schemes: \(registeredList))")
        }
        return (location, adapter)
    }

    /// Opens the store `url` names with the adapter registered for its scheme.
    /// Throws what ``resolve(_:)`` throws, then what the adapter throws.
    public func open(_ url: String, options: StoreOptions = StoreOptions()) async throws -> any LocalStore {
        let (location, adapter) = try resolve(url)
        return try await adapter.open(location, options)
    }

    private var registeredList: String {
        adapters.isEmpty ? "none" : adapters.values.sorted { $0.scheme < $1.scheme }.map { "\($0.scheme) (\($0.example))" }.joined(separator: ", ")
    }
}
