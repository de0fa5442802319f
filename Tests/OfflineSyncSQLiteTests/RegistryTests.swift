import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

@Suite("The sqlite scheme of StoreRegistry")
struct SQLiteRegistryTests {
    var registry: StoreRegistry {
        var registry = StoreRegistry()
        registry.register(.sqlite)
        return registry
    }

    @Test("sqlite:///path opens a file store that keeps its data; sqlite::memory: does not")
    func opensFileAndMemory() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("with space.db").path
            let url = "sqlite://" + path.replacingOccurrences(of: " ", with: "%20") + "?synchronous=normal"
            var store = try await registry.open(url)
            #expect(store is SQLiteStore)
            try await store.defineTable(TableSchema("t"))
            try await store.write { tx in try tx.upsert(Record(id: "kept"), in: "t") }
            try await store.close()
            #expect(FileManager.default.fileExists(atPath: path))
            store = try await registry.open(url)
            #expect(try await store.read { tx in try tx.record(in: "t", id: "kept") } != nil)
            try await store.close()
            let memory = try await registry.open("sqlite::memory:")
            #expect(try await memory.read { tx in try tx.tables() }.isEmpty)
            try await memory.close()
        }
    }

    @Test("bad sqlite URLs are typed errors", arguments: [
        "sqlite://db.example.com/app.db", "sqlite:///x.db?synchronous=sometimes", "sqlite:///x.db?journal=off", "sqlite://",
    ])
    func badURLs(url: String) async throws {
        let error = await #expect(throws: SyncError.self) { _ = try await registry.open(url) }
        #expect(error?.code == .invalidStoreURL)
    }

    @Test("isolate places a store of the same kind in a directory, for conformance runs")
    func isolate() throws {
        let adapter = try #require(registry.adapter(for: "sqlite"))
        let isolate = try #require(adapter.isolate)
        let directory = URL(fileURLWithPath: "/tmp/case-1")
        let file = try isolate(try StoreLocation(parsing: "sqlite:///data/app.db?synchronous=normal"), directory)
        #expect(file.location.path == "/tmp/case-1/app.db" && file.persistent)
        #expect(file.location.parameter("synchronous") == "normal")
        #expect(file.storeFile?.path == "/tmp/case-1/app.db")
        let memory = try isolate(try StoreLocation(parsing: "sqlite::memory:"), directory)
        #expect(!memory.persistent && memory.storeFile == nil && memory.location.path == ":memory:")
    }

    @Test("with createIfMissing false a missing file is notFound and nothing is created")
    func createIfMissingFalse() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("absent.db").path
            let error = await #expect(throws: SyncError.self) {
                _ = try await registry.open("sqlite://" + path, options: StoreOptions(createIfMissing: false))
            }
            #expect(error?.code == .notFound)
            #expect(!FileManager.default.fileExists(atPath: path))
            try await registry.open("sqlite://" + path).close()
            try await registry.open("sqlite://" + path, options: StoreOptions(createIfMissing: false)).close()
        }
    }
}
