// swift-tools-version:6.0
// Two small sync clients, alike but for their HTTP remote, built in release and stripped by
// `make client-size` to measure what each transport adds to an app's binary
// (Scripts/client-size.py writes client-size.json and the figures of Docs/Performance.md).
import PackageDescription

let package = Package(
    name: "ClientSize",
    platforms: [.macOS(.v15), .iOS(.v18)],
    dependencies: [
        .package(name: "OfflineSync", path: "../.."),
    ],
    targets: [
        // What both clients do; each executable adds only its remote.
        .target(name: "ClientSizeProbe", dependencies: [
            .product(name: "OfflineSync", package: "OfflineSync"),
            .product(name: "OfflineSyncSQLite", package: "OfflineSync"),
        ]),
        .executableTarget(name: "client-urlsession", dependencies: [
            "ClientSizeProbe", .product(name: "OfflineSyncURLSession", package: "OfflineSync"),
        ]),
        .executableTarget(name: "client-asynchttpclient", dependencies: [
            "ClientSizeProbe", .product(name: "OfflineSyncHTTP", package: "OfflineSync"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
