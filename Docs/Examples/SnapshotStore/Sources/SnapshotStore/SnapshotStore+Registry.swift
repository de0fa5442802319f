import Foundation
import OfflineSync

extension StoreRegistry.Adapter {
    /// The `snapshot` scheme: `snapshot:///absolute/path/app.snapshot`. It takes no parameters.
    ///
    /// ```swift
    /// var registry = StoreRegistry()
    /// registry.register(.sqlite)
    /// registry.register(.snapshot)
    /// let store = try await registry.open("snapshot:///var/app/settings.snapshot")
    /// ```
    public static var snapshot: StoreRegistry.Adapter {
        StoreRegistry.Adapter(scheme: "snapshot", example: "snapshot:///path/app.snapshot", isolate: { location, directory in
            let file = directory.appendingPathComponent(try snapshotPath(location).lastPathComponent)
            return StoreRegistry.Isolated(location: try location.withPath(file.path), persistent: true, storeFile: file)
        }, open: { location, options in
            let path = try snapshotPath(location).path
            try options.requireExisting(path, for: location)
            return try await SnapshotStore(path: path)
        })
    }

    /// The file a `snapshot:` URL names.
    private static func snapshotPath(_ location: StoreLocation) throws -> URL {
        try location.checkParameters(allowed: [])
        if let authority = location.authority, !authority.isEmpty, authority != "localhost" {
            throw SyncError(.invalidStoreURL, "a snapshot URL names a local file: snapshot:///path/app.snapshot (three slashes), not a host")
        }
        guard !location.path.isEmpty, !location.path.hasSuffix("/") else {
            throw SyncError(.invalidStoreURL, "a snapshot URL needs a file path: snapshot:///path/app.snapshot")
        }
        return URL(fileURLWithPath: location.path)
    }
}
