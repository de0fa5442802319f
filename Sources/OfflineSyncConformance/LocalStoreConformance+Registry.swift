import Foundation
import OfflineSync

extension LocalStoreConformance {
    /// The suite for the adapter a store URL names, as `offline-sync conformance` runs it.
    ///
    /// Each case opens a store of the URL's kind in its own temporary directory: the adapter's
    /// ``StoreRegistry/Adapter/isolate`` moves the URL there (keeping its file or directory
    /// name and its parameters) and says whether the store persists and which file holds it.
    ///
    /// ```swift
    /// var registry = StoreRegistry()
    /// registry.register(.myStore)
    /// let suite = try LocalStoreConformance(store: "mystore:///tmp/app.db", in: registry)
    /// for group in LocalStoreConformance.Group.allCases { try await suite.check(group) }
    /// ```
    ///
    /// - Parameters:
    ///   - url: a store URL of a registered scheme; only its scheme, file name and parameters matter.
    ///   - registry: the adapters to choose from.
    ///   - options: what opens the store (a key or passphrase for an encrypted store).
    /// - Throws: ``SyncError/Code/unknownScheme`` or ``SyncError/Code/invalidStoreURL`` for a
    ///   URL the registry cannot resolve, ``SyncError/Code/unsupported`` for an adapter that
    ///   cannot place its stores in a directory.
    public init(store url: String, in registry: StoreRegistry, options: StoreOptions = StoreOptions()) throws {
        let (location, adapter) = try registry.resolve(url)
        guard let isolate = adapter.isolate else {
            throw SyncError(.unsupported, "the \(adapter.scheme) adapter cannot place test stores in a directory, so the suite cannot run against it")
        }
        let probe = try isolate(location, FileManager.default.temporaryDirectory)
        var storeFile: (@Sendable (URL) -> URL)?
        if probe.storeFile != nil {
            storeFile = { directory in (try? isolate(location, directory))?.storeFile ?? directory }
        }
        self.init(capabilities: Capabilities(persistent: probe.persistent, storeFile: storeFile)) { directory in
            try await adapter.open(try isolate(location, directory).location, options)
        }
    }
}
