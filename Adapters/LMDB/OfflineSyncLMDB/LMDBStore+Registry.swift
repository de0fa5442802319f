import Foundation
import OfflineSync

extension StoreRegistry.Adapter {
    /// The `lmdb` scheme: `lmdb:///absolute/path/env-directory`. Parameters: `map-size=` (the
    /// initial map size in MiB, see ``LMDBStore/Options/initialMapSize``) and `max-map-size=`
    /// (in MiB, see ``LMDBStore/Options/maximumMapSize``); any other parameter, a host, or a
    /// missing path is ``SyncError/Code/invalidStoreURL``. Register it with
    /// `registry.register(.lmdb)`.
    public static var lmdb: StoreRegistry.Adapter {
        StoreRegistry.Adapter(scheme: "lmdb", example: "lmdb:///path/env-directory", isolate: { location, directory in
            _ = try LMDBLocation(location)
            let name = URL(fileURLWithPath: location.path).lastPathComponent
            let isolatedDirectory = directory.appendingPathComponent(name.isEmpty || name == "/" ? "env" : name)
            return StoreRegistry.Isolated(location: try location.withPath(isolatedDirectory.path), persistent: true,
                                          storeFile: isolatedDirectory.appendingPathComponent("data.mdb"))
        }, open: { location, options in
            let parsed = try LMDBLocation(location)
            try options.requireExisting(URL(fileURLWithPath: parsed.path).appendingPathComponent("data.mdb").path, for: location)
            return try await LMDBStore(directory: parsed.path, options: parsed.options)
        })
    }
}

/// What an `lmdb:` URL says.
struct LMDBLocation {
    var path: String
    var options: LMDBStore.Options

    init(_ location: StoreLocation) throws {
        try location.checkParameters(allowed: ["map-size", "max-map-size"])
        if let authority = location.authority, !authority.isEmpty, authority != "localhost" {
            throw SyncError(.invalidStoreURL, "an lmdb URL names a local directory: lmdb:///path/env (three slashes), not a host")
        }
        guard location.authority != nil, location.path.hasPrefix("/"), location.path != "/" else {
            throw SyncError(.invalidStoreURL, "an lmdb URL needs an absolute directory path: lmdb:///path/env")
        }
        path = location.path
        options = LMDBStore.Options()
        if let value = location.parameter("map-size") { options.initialMapSize = try Self.mebibytes(value, "map-size") }
        if let value = location.parameter("max-map-size") { options.maximumMapSize = try Self.mebibytes(value, "max-map-size") }
        if options.maximumMapSize < options.initialMapSize {
            throw SyncError(.invalidStoreURL, "lmdb URL parameter max-map-size is smaller than map-size")
        }
    }

    private static func mebibytes(_ value: String, _ name: String) throws -> Int {
        guard let mib = Int(value), mib > 0, mib <= 1 << 30 else {
            throw SyncError(.invalidStoreURL, "lmdb URL parameter \(name) takes a positive whole number of MiB")
        }
        return mib << 20
    }
}
