// swift-tools-version:6.0
// A third party's adapter, kept outside the OfflineSync package: it depends on OfflineSync by
// path (a real adapter would name the repository URL and a version) and runs the shared
// conformance suite from its own test target.
import PackageDescription

let package = Package(
    name: "SnapshotStore",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "SnapshotStore", targets: ["SnapshotStore"]),
    ],
    dependencies: [
        .package(name: "OfflineSync", path: "../../.."),
    ],
    targets: [
        // An adapter builds on the core's store protocols and the adapter toolkit
        // (MemoryTables, ChangeSet, ValueCodec, CRC32C, SQL dialects, the reference evaluator).
        .target(name: "SnapshotStore", dependencies: [
            .product(name: "OfflineSync", package: "OfflineSync"),
            .product(name: "OfflineSyncStoreKit", package: "OfflineSync"),
        ]),
        .testTarget(name: "SnapshotStoreTests", dependencies: [
            "SnapshotStore",
            .product(name: "OfflineSync", package: "OfflineSync"),
            .product(name: "OfflineSyncConformance", package: "OfflineSync"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
