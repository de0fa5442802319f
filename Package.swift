// swift-tools-version:6.0
import PackageDescription

// Module map. An arrow points at what a module depends on; Docs/Architecture.md draws it and
// tables every target, and Scripts/check-architecture.py holds that table to this file.
//
//   the adapters: OfflineSyncSQLite, OfflineSyncLMDB, OfflineSyncEncryptedFile,
//                 OfflineSyncPostgreSQL ──► OfflineSyncStoreKit ──► OfflineSync
//   OfflineSyncGRDB (the app's own GRDB database) ──► OfflineSyncSQLite, OfflineSyncWire
//   OfflineSyncDatasets ──► OfflineSync
//   OfflineSyncConformance ──► OfflineSyncStoreKit (its reference evaluator)
//   OfflineSyncServer ──► OfflineSyncService (+ StoreKit, Datasets), OfflineSyncWire, OfflineSyncOData
//   OfflineSyncHTTP, OfflineSyncURLSession ──► OfflineSyncTransport
//   OfflineSyncTransport, OfflineSyncOData ──► OfflineSyncWire (+ Datasets, StoreKit's value codec)
//   offline-sync, offline-sync-harness ──► OfflineSyncCommandSupport ──► the four adapters
//   offline-sync-fuzz ──► OfflineSyncFuzzing ──► the parsers' modules (Wire, OData, Service,
//                                                Server, Transport, EncryptedFile, LMDB, GRDB)
//   C, never products: COfflineSyncCRC32C and COfflineSyncSystem (our own), COfflineSyncSQLite3,
//   COfflineSyncLMDB and COfflineSyncPostgreSQL (the system's libraries, through pkg-config).
//
// An app links OfflineSync, one adapter (or OfflineSyncGRDB) and, to sync over HTTP,
// OfflineSyncURLSession (Foundation's URLSession) or OfflineSyncHTTP (AsyncHTTPClient, SwiftNIO);
// it never links the OData parser or the server's dependencies. (Every adapter links StoreKit
// already; the wire reuses its binary value codec for the page stream rather than keep a second one.)

let package = Package(
    name: "OfflineSync",
    // `Synchronization.Mutex` sets the floor on Apple platforms.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        // What an app imports.
        .library(name: "OfflineSync", targets: ["OfflineSync"]),
        .library(name: "OfflineSyncDatasets", targets: ["OfflineSyncDatasets"]),
        .library(name: "OfflineSyncHTTP", targets: ["OfflineSyncHTTP"]),
        .library(name: "OfflineSyncURLSession", targets: ["OfflineSyncURLSession"]),
        // What a transport of one's own builds on (both HTTP products re-export it).
        .library(name: "OfflineSyncTransport", targets: ["OfflineSyncTransport"]),
        // One product per store, so an app links only the C library it uses.
        .library(name: "OfflineSyncSQLite", targets: ["OfflineSyncSQLite"]),
        .library(name: "OfflineSyncLMDB", targets: ["OfflineSyncLMDB"]),
        .library(name: "OfflineSyncEncryptedFile", targets: ["OfflineSyncEncryptedFile"]),
        .library(name: "OfflineSyncPostgreSQL", targets: ["OfflineSyncPostgreSQL"]),
        // Syncs an app's own GRDB database: its typed tables, captured by triggers.
        .library(name: "OfflineSyncGRDB", targets: ["OfflineSyncGRDB"]),
        // What an adapter author imports: the toolkit, the in-memory reference store and the suite.
        .library(name: "OfflineSyncStoreKit", targets: ["OfflineSyncStoreKit"]),
        .library(name: "OfflineSyncConformance", targets: ["OfflineSyncConformance"]),
        // The remote side.
        .library(name: "OfflineSyncService", targets: ["OfflineSyncService"]),
        .library(name: "OfflineSyncWire", targets: ["OfflineSyncWire"]),
        .library(name: "OfflineSyncServer", targets: ["OfflineSyncServer"]),
        .executable(name: "offline-sync", targets: ["offline-sync"]),
        .executable(name: "offline-sync-harness", targets: ["offline-sync-harness"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // 4.x is what jwt-kit 5 needs; the encrypted file works with either.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        // `make docs`: swift package generate-documentation. Plugins only; no product links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // The sync rules document (`offline-sync serve --rules FILE`).
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // The server's `/metrics` (Prometheus text format).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The client's metrics API (the app picks the backend).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // The load test's latency percentiles (`offline-sync-harness loadtest`).
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        // Core: records, queries, the store protocols, queue, sync context, events. No C library,
        // no networking, no adapter toolkit; swift-metrics' and swift-log's APIs only (no backend),
        // and SHA-256 from swift-crypto (CryptoKit on Apple platforms) for attachments' hashes.
        .target(name: "OfflineSync", dependencies: [.product(name: "CoreMetrics", package: "swift-metrics"),
                                                    .product(name: "Logging", package: "swift-log"),
                                                    .product(name: "Crypto", package: "swift-crypto")],
                path: "Sources/OfflineSync"),
        // The adapter author's toolkit: the reference query evaluator, SQL dialects and predicate
        // translation, the in-memory table engine and change sets, the value codec, CRC-32C, and
        // InMemoryStore built from them.
        .target(name: "OfflineSyncStoreKit", dependencies: ["OfflineSync", "COfflineSyncCRC32C", "COfflineSyncSystem"],
                path: "Sources/OfflineSyncStoreKit"),
        // System calls Swift's Glibc module leaves out (write-behind of attachment files, malloc's
        // heaps, spawning children); never a product.
        .target(name: "COfflineSyncSystem", path: "Sources/COfflineSyncSystem"),
        // The CPU's CRC-32C instruction (SSE 4.2, ARM's CRC32), detected at run time; never a product.
        .target(name: "COfflineSyncCRC32C", path: "Sources/COfflineSyncCRC32C"),
        // Cognito Sync–style key/value datasets on the client.
        .target(name: "OfflineSyncDatasets", dependencies: ["OfflineSync"], path: "Sources/OfflineSyncDatasets"),
        .target(name: "OfflineSyncConformance", dependencies: ["OfflineSync", "OfflineSyncStoreKit"],
                path: "Sources/OfflineSyncConformance"),
        .target(name: "OfflineSyncService", dependencies: ["OfflineSync", "OfflineSyncStoreKit", "OfflineSyncDatasets"],
                path: "Sources/OfflineSyncService"),
        // What client and server both speak: the native protocol's lossless JSON, its binary page
        // stream and binary push (records in StoreKit's value codec) and the Cognito Sync API's JSON shapes.
        .target(name: "OfflineSyncWire", dependencies: ["OfflineSync", "OfflineSyncDatasets", "OfflineSyncStoreKit"], path: "Sources/OfflineSyncWire"),
        // The tables API's OData query language (server side only).
        .target(name: "OfflineSyncOData", dependencies: ["OfflineSync", "OfflineSyncWire"], path: "Sources/OfflineSyncOData"),

        // The HTTP client, whatever carries it: the native API's RemoteStore and the Cognito
        // Sync DatasetRemote with their deadlines, retries, typed refusals, page stream and change
        // channel, over a transport protocol. No network library.
        .target(
            name: "OfflineSyncTransport",
            dependencies: [
                "OfflineSync", "OfflineSyncDatasets", "OfflineSyncWire",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/OfflineSyncTransport"
        ),
        // The client's transport on Foundation's URLSession (FoundationNetworking on Linux): no SwiftNIO.
        .target(
            name: "OfflineSyncURLSession",
            dependencies: ["OfflineSync", "OfflineSyncTransport", .product(name: "Logging", package: "swift-log")],
            path: "Sources/OfflineSyncURLSession"
        ),
        // The client's transport on AsyncHTTPClient and swift-websocket (SwiftNIO).
        .target(
            name: "OfflineSyncHTTP",
            dependencies: [
                "OfflineSync", "OfflineSyncTransport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/OfflineSyncHTTP"
        ),
        // The sync server on Hummingbird 2: native API, Datasync tables API, Cognito Sync API,
        // auth, notifications.
        .target(
            name: "OfflineSyncServer",
            dependencies: [
                "OfflineSync", "OfflineSyncDatasets", "OfflineSyncService", "OfflineSyncWire", "OfflineSyncOData",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            path: "Sources/OfflineSyncServer"
        ),

        // SQLite adapter.
        .systemLibrary(
            name: "COfflineSyncSQLite3",
            path: "Adapters/SQLite/COfflineSyncSQLite3",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .target(
            name: "OfflineSyncSQLite",
            dependencies: ["OfflineSync", "OfflineSyncStoreKit", "COfflineSyncSQLite3"],
            path: "Adapters/SQLite/OfflineSyncSQLite"
        ),

        // GRDB adapter: the app's own database. Its bookkeeping tables use the SQLite adapter's
        // layout on GRDB's connections (one SQLite library in the process: both link the system's).
        .target(
            name: "OfflineSyncGRDB",
            dependencies: ["OfflineSync", "OfflineSyncStoreKit", "OfflineSyncSQLite", "OfflineSyncWire",
                           .product(name: "GRDB", package: "GRDB.swift")],
            path: "Adapters/GRDB/OfflineSyncGRDB"
        ),

        // LMDB adapter.
        .systemLibrary(
            name: "COfflineSyncLMDB",
            path: "Adapters/LMDB/COfflineSyncLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        .target(
            name: "OfflineSyncLMDB",
            dependencies: ["OfflineSync", "OfflineSyncStoreKit", "COfflineSyncLMDB"],
            path: "Adapters/LMDB/OfflineSyncLMDB"
        ),

        // Encrypted single-file adapter.
        .target(
            name: "OfflineSyncEncryptedFile",
            dependencies: [
                "OfflineSync", "OfflineSyncStoreKit",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Adapters/EncryptedFile/OfflineSyncEncryptedFile"
        ),

        // PostgreSQL adapter.
        .systemLibrary(
            name: "COfflineSyncPostgreSQL",
            path: "Adapters/PostgreSQL/COfflineSyncPostgreSQL",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .target(
            name: "OfflineSyncPostgreSQL",
            dependencies: ["OfflineSync", "OfflineSyncStoreKit", "COfflineSyncPostgreSQL"],
            path: "Adapters/PostgreSQL/OfflineSyncPostgreSQL"
        ),

        // What both executables share: the built-in store registry, store arguments, and a
        // server started as a child process.
        .target(
            name: "OfflineSyncCommandSupport",
            dependencies: [
                "OfflineSync", "OfflineSyncSQLite", "OfflineSyncLMDB", "OfflineSyncEncryptedFile", "OfflineSyncPostgreSQL", "COfflineSyncSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/OfflineSyncCommandSupport"
        ),
        // The operator's tool: serve, token, explain, demo, demo-grdb, conformance, inspect.
        .executableTarget(
            name: "offline-sync",
            dependencies: [
                "OfflineSync", "OfflineSyncDatasets", "OfflineSyncStoreKit", "OfflineSyncService", "OfflineSyncConformance",
                "OfflineSyncServer", "OfflineSyncHTTP", "OfflineSyncCommandSupport", "COfflineSyncSystem",
                "OfflineSyncSQLite", "OfflineSyncPostgreSQL", "OfflineSyncGRDB",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/offline-sync"
        ),
        // The benchmark and fault-injection harness: bench, loadtest, corrupt-sweep, crash-trial-client,
        // grdb-extension-writer (and the children it starts of itself: bench-worker, corrupt-probe,
        // shared-store-writer, attachment-upload-child).
        .executableTarget(
            name: "offline-sync-harness",
            dependencies: [
                "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncService", "OfflineSyncConformance",
                "OfflineSyncServer", "OfflineSyncHTTP", "OfflineSyncURLSession", "OfflineSyncTransport", "OfflineSyncWire", "OfflineSyncCommandSupport",
                "OfflineSyncSQLite", "OfflineSyncLMDB", "OfflineSyncEncryptedFile", "OfflineSyncPostgreSQL",
                "COfflineSyncSQLite3", "COfflineSyncLMDB", "COfflineSyncPostgreSQL", "OfflineSyncGRDB",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            path: "Sources/offline-sync-harness"
        ),

        // The parsers' fuzz targets (`make fuzz`; their corpora replay in `make test`): never a product.
        .target(
            name: "OfflineSyncFuzzing",
            dependencies: ["OfflineSync", "OfflineSyncDatasets", "OfflineSyncWire", "OfflineSyncOData", "OfflineSyncService", "OfflineSyncServer",
                           "OfflineSyncTransport", "OfflineSyncEncryptedFile", "OfflineSyncLMDB", "OfflineSyncSQLite", "OfflineSyncGRDB",
                           "OfflineSyncStoreKit"],
            path: "Sources/OfflineSyncFuzzing"
        ),
        // libFuzzer's driver over them when built with `-sanitize=fuzzer -DFUZZING`; a replayer otherwise.
        .executableTarget(name: "offline-sync-fuzz", dependencies: ["OfflineSyncFuzzing"], path: "Sources/offline-sync-fuzz"),

        // What every test target shares: temporary directories, typed-error helpers, boxes.
        .target(
            name: "OfflineSyncTestSupport",
            dependencies: ["OfflineSync", "OfflineSyncService", "OfflineSyncCommandSupport"],
            path: "Tests/OfflineSyncTestSupport"
        ),
        .testTarget(
            name: "OfflineSyncTests",
            dependencies: ["OfflineSyncTestSupport", "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncDatasets", "OfflineSyncService", "OfflineSyncConformance",
                           .product(name: "MetricsTestKit", package: "swift-metrics")],
            path: "Tests/OfflineSyncTests"
        ),
        .testTarget(
            name: "OfflineSyncStoreKitTests",
            dependencies: ["OfflineSyncTestSupport", "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncConformance"],
            path: "Tests/OfflineSyncStoreKitTests"
        ),
        .testTarget(
            name: "OfflineSyncWireTests",
            dependencies: ["OfflineSync", "OfflineSyncWire", "OfflineSyncConformance", "OfflineSyncStoreKit"],
            path: "Tests/OfflineSyncWireTests"
        ),
        .testTarget(
            name: "OfflineSyncODataTests",
            dependencies: ["OfflineSync", "OfflineSyncOData", "OfflineSyncWire", "OfflineSyncStoreKit", "OfflineSyncConformance"],
            path: "Tests/OfflineSyncODataTests"
        ),
        .testTarget(
            name: "OfflineSyncServerTests",
            dependencies: [
                "OfflineSyncTestSupport", "OfflineSync", "OfflineSyncDatasets", "OfflineSyncStoreKit", "OfflineSyncService", "OfflineSyncWire",
                "OfflineSyncOData", "OfflineSyncServer", "OfflineSyncHTTP", "OfflineSyncURLSession", "OfflineSyncConformance",
                "OfflineSyncSQLite", "OfflineSyncPostgreSQL", "OfflineSyncLMDB", "OfflineSyncFuzzing", "OfflineSyncCommandSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            path: "Tests/OfflineSyncServerTests"
        ),
        .testTarget(
            name: "OfflineSyncGRDBTests",
            dependencies: ["OfflineSyncTestSupport", "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncGRDB",
                           "OfflineSyncConformance", "OfflineSyncService", "OfflineSyncServer", "OfflineSyncHTTP",
                           "OfflineSyncURLSession",
                           .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log")],
            path: "Tests/OfflineSyncGRDBTests"
        ),
        .testTarget(
            name: "OfflineSyncServiceTests",
            dependencies: ["OfflineSyncTestSupport", "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncDatasets", "OfflineSyncService",
                           "OfflineSyncConformance", "OfflineSyncSQLite"],
            path: "Tests/OfflineSyncServiceTests"
        ),
        .testTarget(
            name: "OfflineSyncSQLiteTests",
            dependencies: ["OfflineSyncTestSupport", "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncDatasets", "OfflineSyncSQLite",
                           "COfflineSyncSQLite3", "OfflineSyncConformance", "OfflineSyncService"],
            path: "Tests/OfflineSyncSQLiteTests"
        ),
        .testTarget(
            name: "OfflineSyncLMDBTests",
            dependencies: ["OfflineSyncTestSupport", "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncLMDB", "OfflineSyncConformance",
                           "OfflineSyncService", "COfflineSyncLMDB"],
            path: "Tests/OfflineSyncLMDBTests"
        ),
        .testTarget(
            name: "OfflineSyncEncryptedFileTests",
            dependencies: ["OfflineSyncTestSupport", "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncEncryptedFile", "OfflineSyncConformance",
                           .product(name: "Crypto", package: "swift-crypto")],
            path: "Tests/OfflineSyncEncryptedFileTests"
        ),
        .testTarget(
            name: "OfflineSyncPostgreSQLTests",
            dependencies: ["OfflineSyncTestSupport", "OfflineSync", "OfflineSyncStoreKit", "OfflineSyncPostgreSQL", "OfflineSyncConformance",
                           "OfflineSyncService"],
            path: "Tests/OfflineSyncPostgreSQLTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
