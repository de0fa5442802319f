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
        .library(name: "OfflineSyncSQLite", targets: ["OfflineSyncSQLite"]),
        .library(name: "OfflineSyncLMDB", targets: ["OfflineSyncLMDB"]),
        .library(name: "OfflineSyncEncryptedFile", targets: ["OfflineSyncEncryptedFile"]),
        .library(name: "OfflineSyncPostgreSQL", targets: ["OfflineSyncPostgreSQL"]),
        .executable(name: "offline-sync", targets: ["offline-sync"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        // Core: records, queries, stores, queue, sync context. No C library, no networking.
        .target(name: "OfflineSync", path: "Sources/OfflineSync"),
        .target(name: "OfflineSyncService", dependencies: ["OfflineSync"], path: "Sources/OfflineSyncService"),
        .target(name: "OfflineSyncConformance", dependencies: ["OfflineSync"], path: "Sources/OfflineSyncConformance"),
        // The native protocol's lossless JSON (shared by the coming HTTP server and client).
        .target(name: "OfflineSyncWire", dependencies: ["OfflineSync"], path: "Sources/OfflineSyncWire"),

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
