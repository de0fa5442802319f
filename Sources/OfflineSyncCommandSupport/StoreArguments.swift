import ArgumentParser
import Foundation
import OfflineSync
import OfflineSyncEncryptedFile
import OfflineSyncLMDB
import OfflineSyncPostgreSQL
import OfflineSyncSQLite

extension StoreRegistry {
    /// The adapters this tool knows: every store that ships with OfflineSync.
    package static var builtIn: StoreRegistry {
        var registry = StoreRegistry()
        registry.register(.sqlite)
        registry.register(.lmdb)
        registry.register(.encryptedFile)
        registry.register(.postgres)
        registry.register(.postgresql)
        return registry
    }
}

/// How a command names a store and its key.
package struct StoreArguments: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The store URL.", discussion: """
        For example sqlite:///path/app.db, sqlite::memory:, lmdb:///path/dir or \
        encrypted-file:///path/app.osync?passphrase-env=VAR, postgres://user@host/db?schema=NAME \
        or a libpq connection string ('host=… dbname=…'). An encrypted store's key is never \
        written in the URL: name the variable that holds it with key-env= (64 hex digits) or \
        passphrase-env=, or set OFFLINE_SYNC_KEY or OFFLINE_SYNC_PASSPHRASE.
        """))
    package var store: String

    /// Creates arguments with no store (ArgumentParser fills them in).
    package init() {}

    /// The store URL: `store` itself, or the `postgres://` URL of a libpq keyword/value
    /// connection string (`host=… dbname=…`).
    package func url() throws -> String {
        if !store.contains("://"), store.contains("=") { return try PostgreSQLStore.storeURL(connectionString: store) }
        return store
    }

    /// The options: a variable named in the URL wins, then OFFLINE_SYNC_KEY, then OFFLINE_SYNC_PASSPHRASE.
    package func options(for location: StoreLocation) throws -> StoreOptions {
        var options = StoreOptions()
        let environment = options.environment
        if try options.resolveSecret(for: location) == nil {
            if environment["OFFLINE_SYNC_KEY"].map({ !$0.isEmpty }) ?? false {
                options.secret = try .fromEnvironment("OFFLINE_SYNC_KEY", kind: .key, environment: environment)
            } else if environment["OFFLINE_SYNC_PASSPHRASE"].map({ !$0.isEmpty }) ?? false {
                options.secret = try .fromEnvironment("OFFLINE_SYNC_PASSPHRASE", kind: .passphrase, environment: environment)
            }
        }
        return options
    }
}
