import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A third party's scheme, registered at run time: an in-memory store per location path.
private func memoryAdapter(opened: OpenLog) -> StoreRegistry.Adapter {
    StoreRegistry.Adapter(scheme: "Mem", example: "mem:///name") { location, options in
        try location.checkParameters(allowed: StoreOptions.secretParameters)
        opened.add(location.path, secret: try options.resolveSecret(for: location))
        return InMemoryStore()
    }
}

/// What the test adapter was asked to open (the lock orders the adapter's writes before the test's reads).
private final class OpenLog: Sendable {
    private let entries = Box<[(path: String, secret: StoreSecret?)]>([])
    func add(_ path: String, secret: StoreSecret?) { entries.withLock { $0.append((path, secret)) } }
    var last: (path: String, secret: StoreSecret?)? { entries.value.last }
}

@Suite("StoreRegistry chooses adapters at run time")
struct StoreRegistryTests {
    @Test("a registered scheme opens through its adapter; scheme case does not matter")
    func registeredScheme() async throws {
        let log = OpenLog()
        var registry = StoreRegistry()
        registry.register(memoryAdapter(opened: log))
        #expect(registry.schemes == ["mem"])
        let store = try await registry.open("MEM:///some/where%20else")
        try await store.defineTable(TableSchema("t"))
        try await store.close()
        #expect(log.last?.path == "/some/where else")
    }

    @Test("an unknown scheme is a typed error naming the registered schemes")
    func unknownScheme() async throws {
        var registry = StoreRegistry()
        registry.register(memoryAdapter(opened: OpenLog()))
        let error = await #expect(throws: SyncError.self) { _ = try await registry.open("lmdb:///tmp/x") }
        #expect(error?.code == .unknownScheme)
        #expect(error?.message.contains("mem (mem:///name)") == true)
        let empty = await #expect(throws: SyncError.self) { _ = try await StoreRegistry().open("mem:///x") }
        #expect(empty?.message.contains("registered schemes: none") == true)
    }

    @Test("malformed URLs are typed errors naming the registered schemes", arguments: [
        "", "/just/a/path", "1abc:///x", "sq lite:///x", "mem:///bad%zzescape", "mem:///x#fragment", "mem:///%FF%FE",
    ])
    func malformed(url: String) async throws {
        var registry = StoreRegistry()
        registry.register(memoryAdapter(opened: OpenLog()))
        let error = await #expect(throws: SyncError.self) { _ = try await registry.open(url) }
        #expect(error?.code == .invalidStoreURL)
        #expect(error?.message.contains("registered schemes: mem") == true)
    }

    @Test("locations parse hierarchical and opaque URLs and their parameters")
    func parsing() throws {
        let opaque = try StoreLocation(parsing: "sqlite::memory:")
        #expect(opaque.scheme == "sqlite" && opaque.isOpaque && opaque.path == ":memory:")
        let file = try StoreLocation(parsing: "lmdb:///var/data/dir?map-size=1024&flag")
        #expect(file.authority == "" && file.path == "/var/data/dir")
        #expect(file.parameter("map-size") == "1024" && file.parameter("flag") == "" && file.parameter("other") == nil)
        #expect(throws: SyncError.self) { try file.checkParameters(allowed: ["map-size"]) }
        try file.checkParameters(allowed: ["map-size", "flag"])
        let moved = try file.withPath("/tmp/a b/c")
        #expect(moved.path == "/tmp/a b/c" && moved.parameters == file.parameters && moved.scheme == "lmdb")
    }

    @Test("a password in a URL never appears in its description or in errors")
    func passwordRedacted() async throws {
        let location = try StoreLocation(parsing: "postgres://app:s3cret@db.example:5432/app")
        #expect(location.description == "postgres://app:***@db.example:5432/app")
        // In parameters too: libpq's password=, and another server's URL or key=value string.
        let replicas = try StoreLocation(parsing: "postgres://app:s3cret@db1/app?schema=s&replica=postgres%3A%2F%2Fapp%3As3cret%40db2%2Fapp"
            + "&replica=host%3Ddb3+password%3Ds3cret&Password=s3cret&replica=postgres%3A%2F%2Fapp%40db4%2Fapp")
        #expect(replicas.description == "postgres://app:***@db1/app?schema=s&replica=***&replica=***&Password=***"
            + "&replica=postgres%3A%2F%2Fapp%40db4%2Fapp")
        // However it is spelled: spaces around `=`, a parameter whose name holds the word.
        let spelled = try StoreLocation(parsing: "postgres://db1/app?replica=host%3Ddb3+password+%3D+s3cret&db_password=s3cret"
            + "&replica=postgres%3A%2F%2Fdb4%2Fapp%3F%2570assword%3Ds3cret")
        #expect(spelled.description == "postgres://db1/app?replica=***&db_password=***&replica=***")
        // A malformed escape a layer down stops the decoding before the keyword: hidden all the same.
        let malformed = try StoreLocation(parsing: "postgres://db1/app?replica=postgres%3A%2F%2Fdb4%2Fapp%3F%2570assword%3Ds3cret%26x%3D%25ZZ"
            + "&replica=postgres%3A%2F%2Fdb5%2Fapp&schema=s")
        #expect(malformed.description == "postgres://db1/app?replica=***&replica=postgres%3A%2F%2Fdb5%2Fapp&schema=s")
        let error = await #expect(throws: SyncError.self) {
            _ = try await StoreRegistry().open("postgres://app:s3cret@db.example/app#x")
        }
        #expect(error.map { !$0.description.contains("s3cret") } == true)
    }

    @Test("a secret comes from code or from the environment variable the URL names, never from the URL")
    func secrets() async throws {
        let log = OpenLog()
        var registry = StoreRegistry()
        registry.register(memoryAdapter(opened: log))
        let hex = String(repeating: "0f", count: 32)
        let environment = ["APP_KEY": hex, "APP_PASS": "correct horse", "SHORT": "abcd"]
        _ = try await registry.open("mem:///a?key-env=APP_KEY", options: StoreOptions(environment: environment))
        #expect(log.last?.secret?.kind == .key)
        #expect(log.last?.secret?.bytes.withUnsafeBytes { Array($0) } == [UInt8](repeating: 0x0F, count: 32))
        _ = try await registry.open("mem:///a?passphrase-env=APP_PASS", options: StoreOptions(environment: environment))
        #expect(log.last?.secret?.kind == .passphrase)
        #expect(log.last?.secret?.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == "correct horse")
        // Given in code: wins over the URL's variable.
        _ = try await registry.open("mem:///a?passphrase-env=APP_PASS", options: StoreOptions(secret: .passphrase("other"), environment: environment))
        #expect(log.last?.secret?.bytes.count == 5)
        // Missing or malformed variables: typed errors naming the variable, not the value.
        for url in ["mem:///a?key-env=NOPE", "mem:///a?key-env=SHORT", "mem:///a?key-env=APP_PASS"] {
            let error = await #expect(throws: SyncError.self) { _ = try await registry.open(url, options: StoreOptions(environment: environment)) }
            #expect(error?.code == .missingKey)
            #expect(error.map { !$0.description.contains("abcd") && !$0.description.contains("correct horse") } == true)
        }
        // A secret written into the URL itself is refused.
        let written = await #expect(throws: SyncError.self) { _ = try await registry.open("mem:///a?passphrase=hunter2") }
        #expect(written?.code == .invalidStoreURL)
        #expect(written.map { !$0.description.contains("hunter2") } == true)
        #expect(StoreSecret.passphrase("hunter2").description == "StoreSecret(passphrase, redacted)")
        #expect(!SecretBytes(utf8: "hunter2").description.contains("hunter2"))
    }

    @Test("two registries are independent values")
    func independentValues() {
        var first = StoreRegistry()
        let second = first
        first.register(memoryAdapter(opened: OpenLog()))
        #expect(first.schemes == ["mem"])
        #expect(second.schemes == [])
    }
}

@Suite("StoreSummary describes a store for inspect")
struct StoreSummaryTests {
    @Test("tables, queue by state, errors and cursors in one snapshot")
    func summary() async throws {
        let h = try await Harness(serverSchemas: [TableSchema("loose", fields: [FieldDefinition("n", .int)])])
        try await h.client.defineTable(TableSchema("loose"))
        try await h.client.table("notes").insert(Record(id: "n1", fields: ["title": "a"]))
        try await h.client.push()
        try await h.client.table("notes").pull(queryId: "all")
        try await h.client.table("loose").insert(Record(id: "bad", fields: ["n": "text"]))
        try await h.client.push() // rejected: the server declares n as int
        for i in 0..<3 { try await h.client.table("notes").insert(Record(id: "p\(i)", fields: ["title": "t"])) }
        let summary = try await StoreSummary.summarize(h.client.store, operationLimit: 2)
        #expect(summary.tables.map(\.name) == ["__attachments", "__config", "__operation_errors", "__operations", "loose", "notes"])
        #expect(summary.tables.first { $0.name == "notes" }?.rows == 4)
        #expect(summary.tables.first { $0.name == "__operations" }?.isSystem == true)
        #expect(summary.operationsByState == ["failed": 1, "pending": 3])
        #expect(summary.operationCount == 4)
        #expect(summary.operations.map(\.itemId) == ["bad", "p0"])
        #expect(summary.operationErrorCount == 1)
        #expect(summary.operationErrors.first?.itemId == "bad")
        #expect(summary.operationErrors.first?.status == 400)
        #expect(summary.cursors.map(\.queryId) == ["all"])
        #expect(summary.cursors.first?.table == "notes")
        // JSON for scripts round-trips.
        let decoded = try JSONDecoder().decode(StoreSummary.self, from: JSONEncoder().encode(summary))
        #expect(decoded == summary)
    }

    @Test("a store without system tables lists its tables and an empty queue")
    func plainStore() async throws {
        let store = InMemoryStore()
        try await store.defineTable(TableSchema("t"))
        try await store.write { tx in try tx.upsert(Record(id: "x"), in: "t") }
        let summary = try await StoreSummary.summarize(store)
        #expect(summary.tables.map(\.rows) == [1])
        #expect(summary.operationCount == 0 && summary.cursors.isEmpty && summary.operationErrorCount == 0)
    }
}
