import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncTestSupport
import Testing

@Suite("The lmdb scheme of StoreRegistry")
struct LMDBRegistryTests {
    var registry: StoreRegistry {
        var registry = StoreRegistry()
        registry.register(.lmdb)
        return registry
    }

    @Test("lmdb:///path opens an environment directory that keeps its data")
    func opens() async throws {
        try await withTemporaryDirectory { root in
            let path = root.appendingPathComponent("with space").path
            let url = "lmdb://" + path.replacingOccurrences(of: " ", with: "%20") + "?map-size=2"
            var store = try await registry.open(url)
            #expect(store is LMDBStore)
            #expect((store as? LMDBStore)?.options.initialMapSize == 2 << 20)
            try await store.defineTable(TableSchema("t"))
            try await store.write { tx in try tx.upsert(Record(id: "kept"), in: "t") }
            try await store.close()
            #expect(FileManager.default.fileExists(atPath: path + "/data.mdb"))
            store = try await registry.open(url)
            #expect(try await store.read { tx in try tx.record(in: "t", id: "kept") } != nil)
            try await store.close()
        }
    }

    @Test("bad lmdb URLs are typed errors", arguments: [
        "lmdb://host.example.com/env", "lmdb:///env?journal=off", "lmdb://", "lmdb:relative/env",
        "lmdb:///env?map-size=big", "lmdb:///env?map-size=0", "lmdb:///env?map-size=8&max-map-size=4",
    ])
    func badURLs(url: String) async throws {
        let error = await #expect(throws: SyncError.self) { _ = try await registry.open(url) }
        #expect(error?.code == .invalidStoreURL)
    }

    @Test("a damaged environment opened through the registry is a typed error")
    func damaged() async throws {
        try await withTemporaryDirectory { root in
            try Data("garbage".utf8).write(to: root.appendingPathComponent("data.mdb"))
            let error = await #expect(throws: SyncError.self) { _ = try await registry.open("lmdb://" + root.path) }
            #expect(error?.code == .notADatabase)
        }
    }

    @Test("isolate places a store of the same kind in a directory, for conformance runs")
    func isolate() throws {
        let adapter = try #require(registry.adapter(for: "lmdb"))
        let isolate = try #require(adapter.isolate)
        let directory = URL(fileURLWithPath: "/tmp/case-1")
        let placed = try isolate(try StoreLocation(parsing: "lmdb:///data/app-env?map-size=8"), directory)
        #expect(placed.location.path == "/tmp/case-1/app-env" && placed.persistent)
        #expect(placed.location.parameter("map-size") == "8")
        #expect(placed.storeFile?.path == "/tmp/case-1/app-env/data.mdb")
        #expect(throws: SyncError.self) { _ = try isolate(try StoreLocation(parsing: "lmdb://host/x"), directory) }
    }

    @Test("with createIfMissing false a missing environment is notFound and nothing is created")
    func createIfMissingFalse() async throws {
        try await withTemporaryDirectory { root in
            let path = root.appendingPathComponent("absent").path
            let error = await #expect(throws: SyncError.self) {
                _ = try await registry.open("lmdb://" + path, options: StoreOptions(createIfMissing: false))
            }
            #expect(error?.code == .notFound)
            #expect(!FileManager.default.fileExists(atPath: path))
            try await registry.open("lmdb://" + path).close()
            try await registry.open("lmdb://" + path, options: StoreOptions(createIfMissing: false)).close()
        }
    }
}
