// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "OfflineSync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "OfflineSync", targets: ["OfflineSync"]),
        .library(name: "OfflineSyncService", targets: ["OfflineSyncService"]),
        .library(name: "OfflineSyncConformance", targets: ["OfflineSyncConformance"]),
        .library(name: "OfflineSyncWire", targets: ["OfflineSyncWire"]),
        .library(name: "OfflineSyncHTTP", targets: ["OfflineSyncHTTP"]),
        .library(name: "OfflineSyncServer", targets: ["OfflineSyncServer"]),
        .library(name: "OfflineSyncSQLite", targets: ["OfflineSyncSQLite"]),
        .library(name: "OfflineSyncLMDB", targets: ["OfflineSyncLMDB"]),
        .library(name: "OfflineSyncEncryptedFile", targets: ["OfflineSyncEncryptedFile"]),
        .library(name: "OfflineSyncPostgreSQL", targets: ["OfflineSyncPostgreSQL"]),
        .executable(name: "offline-sync", targets: ["offline-sync"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // 4.x is what jwt-kit 5 needs; the encrypted file works with either.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
    ],
    targets: [
        // Core: records, queries, stores, queue, sync context. No C library, no networking.
        .target(name: "OfflineSync", path: "Sources/OfflineSync"),
        .target(name: "OfflineSyncService", dependencies: ["OfflineSync"], path: "Sources/OfflineSyncService"),
        .target(name: "OfflineSyncConformance", dependencies: ["OfflineSync"], path: "Sources/OfflineSyncConformance"),
        // The native protocol's lossless JSON (shared by the coming HTTP server and client).
        .target(name: "OfflineSyncWire", dependencies: ["OfflineSync"], path: "Sources/OfflineSyncWire"),

        // The HTTP client: a RemoteStore over AsyncHTTPClient plus the notification channel.
        .target(
            name: "OfflineSyncHTTP",
            dependencies: [
                "OfflineSync", "OfflineSyncWire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/OfflineSyncHTTP"
        ),
        // The sync server on Hummingbird 2: native API, Datasync tables API, auth, notifications.
        .target(
            name: "OfflineSyncServer",
            dependencies: [
                "OfflineSync", "OfflineSyncService", "OfflineSyncWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
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
            dependencies: ["OfflineSync", "COfflineSyncSQLite3"],
            path: "Adapters/SQLite/OfflineSyncSQLite"
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
            dependencies: ["OfflineSync", "COfflineSyncLMDB"],
            path: "Adapters/LMDB/OfflineSyncLMDB"
        ),

        // Encrypted single-file adapter.
        .target(
            name: "OfflineSyncEncryptedFile",
            dependencies: [
                "OfflineSync",
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
            dependencies: ["OfflineSync", "COfflineSyncPostgreSQL"],
            path: "Adapters/PostgreSQL/OfflineSyncPostgreSQL"
        ),

        .executableTarget(
            name: "offline-sync",
            dependencies: [
                "OfflineSync", "OfflineSyncService", "OfflineSyncSQLite", "OfflineSyncConformance",
                "OfflineSyncServer", "OfflineSyncHTTP", "OfflineSyncWire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                "OfflineSyncLMDB", "OfflineSyncEncryptedFile", "OfflineSyncPostgreSQL", "COfflineSyncSQLite3", "COfflineSyncLMDB", "COfflineSyncPostgreSQL",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/offline-sync"
        ),

        .testTarget(
            name: "OfflineSyncTests",
            dependencies: ["OfflineSync", "OfflineSyncService", "OfflineSyncConformance"],
            path: "Tests/OfflineSyncTests"
        ),
        .testTarget(
            name: "OfflineSyncWireTests",
            dependencies: ["OfflineSync", "OfflineSyncWire", "OfflineSyncConformance"],
            path: "Tests/OfflineSyncWireTests"
        ),
        .testTarget(
            name: "OfflineSyncServerTests",
            dependencies: [
                "OfflineSync", "OfflineSyncService", "OfflineSyncWire", "OfflineSyncServer", "OfflineSyncHTTP",
                "OfflineSyncConformance", "OfflineSyncSQLite", "OfflineSyncPostgreSQL",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            path: "Tests/OfflineSyncServerTests"
        ),
        .testTarget(
            name: "OfflineSyncServiceTests",
            dependencies: ["OfflineSync", "OfflineSyncService", "OfflineSyncConformance", "OfflineSyncSQLite"],
            path: "Tests/OfflineSyncServiceTests"
        ),
        .testTarget(
            name: "OfflineSyncSQLiteTests",
            dependencies: ["OfflineSync", "OfflineSyncSQLite", "OfflineSyncConformance", "OfflineSyncService"],
            path: "Tests/OfflineSyncSQLiteTests"
        ),
        .testTarget(
            name: "OfflineSyncLMDBTests",
            dependencies: ["OfflineSync", "OfflineSyncLMDB", "OfflineSyncConformance", "OfflineSyncService", "COfflineSyncLMDB"],
            path: "Tests/OfflineSyncLMDBTests"
        ),
        .testTarget(
            name: "OfflineSyncEncryptedFileTests",
            dependencies: ["OfflineSync", "OfflineSyncEncryptedFile", "OfflineSyncConformance",
                           .product(name: "Crypto", package: "swift-crypto")],
            path: "Tests/OfflineSyncEncryptedFileTests"
        ),
        .testTarget(
            name: "OfflineSyncPostgreSQLTests",
            dependencies: ["OfflineSync", "OfflineSyncPostgreSQL", "OfflineSyncConformance", "OfflineSyncService"],
            path: "Tests/OfflineSyncPostgreSQLTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
