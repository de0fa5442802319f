import Foundation
import OfflineSync

extension StoreRegistry.Adapter {
    /// The `sqlite` scheme: `sqlite:///absolute/path/app.db`, `sqlite:relative/app.db` or
    /// `sqlite::memory:`. One parameter: `synchronous=full|normal` (see
    /// ``SQLiteStore/Options/synchronous``). Register it with `registry.register(.sqlite)`.
    public static var sqlite: StoreRegistry.Adapter {
        StoreRegistry.Adapter(scheme: "sqlite", example: "sqlite:///path/app.db or sqlite::memory:",
                              isolate: { location, directory in
            let memory = try SQLiteLocation(location).isMemory
            let file = directory.appendingPathComponent(memory ? "memory" : SQLiteLocation.fileName(location))
            let isolated = memory ? location : try location.withPath(file.path)
            return StoreRegistry.Isolated(location: isolated, persistent: !memory, storeFile: memory ? nil : file)
        }, open: { location, options in
            let parsed = try SQLiteLocation(location)
            if parsed.isMemory { return try await SQLiteStore.inMemory(options: parsed.options) }
            try options.requireExisting(parsed.path, for: location)
            return try await SQLiteStore(path: parsed.path, options: parsed.options)
        })
    }
}

/// What a `sqlite:` URL says.
struct SQLiteLocation {
    var isMemory: Bool
    var path: String
    var options: SQLiteStore.Options

    init(_ location: StoreLocation) throws {
        try location.checkParameters(allowed: ["synchronous"])
        options = SQLiteStore.Options()
        if let value = location.parameter("synchronous") {
            guard let synchronous = SQLiteStore.Options.Synchronous(rawValue: value.lowercased()) else {
                throw SyncError(.invalidStoreURL, "sqlite URL parameter synchronous takes full or normal")
            }
            options.synchronous = synchronous
        }
        if let authority = location.authority, !authority.isEmpty, authority != "localhost" {
            throw SyncError(.invalidStoreURL, "a sqlite URL names a local file: sqlite:///path/app.db (three slashes), not a host")
        }
        isMemory = location.isOpaque && location.path == ":memory:"
        path = location.path
        if !isMemory && path.isEmpty {
            throw SyncError(.invalidStoreURL, "a sqlite URL needs a file path (sqlite:///path/app.db) or :memory: (sqlite::memory:)")
        }
    }

    /// The file name of a location's path (`app.db`).
    static func fileName(_ location: StoreLocation) -> String {
        let name = URL(fileURLWithPath: location.path).lastPathComponent
        return name.isEmpty || name == "/" ? "store.sqlite" : name
    }
}
