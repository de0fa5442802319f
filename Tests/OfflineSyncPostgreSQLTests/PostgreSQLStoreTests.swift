import Foundation
import OfflineSync
@testable import OfflineSyncPostgreSQL
import OfflineSyncTestSupport
import Testing

/// Counts attempts across re-runs of a write body.
final class Counter: Sendable {
    private let value = Box(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
    var current: Int { value.value }
}

@Suite("PostgreSQLStore: errors, killed connections, concurrency, registry",
       .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct PostgreSQLStoreTests {
    static let table = TableSchema("items", fields: [FieldDefinition("n", .int)])

    /// A free local TCP port nobody listens on.
    static func closedPort() throws -> Int {
        let fd = socket(AF_INET, streamSocketType, 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test func unreachableServerIsTransientAndHidesThePassword() async throws {
        guard let url = TestServer.require() else { return }
        let port = try Self.closedPort()
        let secret = "s3cret-unreachable-pw"
        let target = TestServer.withPort(TestServer.withPassword(url, secret), port)
        do {
            _ = try await PostgreSQLStore(connectionString: target + "?connect_timeout=5")
            Issue.record("opening a store on a closed port succeeded")
        } catch let error as SyncError {
            #expect(error.code == .transient)
            #expect(error.message.contains("127.0.0.1"))
            #expect(error.message.contains(String(port)))
            #expect(!error.message.contains(secret))
            #expect(!error.description.contains(secret))
            #expect(!String(describing: error).contains(secret))
        }
    }

    @Test func wrongPasswordIsAuthenticationFailed() async throws {
        guard let url = TestServer.require() else { return }
        let secret = "wrong-password-\(UUID().uuidString)"
        do {
            _ = try await PostgreSQLStore(connectionString: TestServer.withPassword(url, secret))
            Issue.record("opening a store with a wrong password succeeded")
        } catch let error as SyncError {
            #expect(error.code == .authenticationFailed)
            #expect(!error.description.contains(secret))
            #expect(!error.description.contains(TestServer.password(url)))
        }
    }

    /// Kills the store's backend from another connection while a write body runs.
    static func killBackend(named name: String, url: String) throws {
        let killer = try PGConnection.connect(url, password: nil)
        defer { killer.close() }
        try killer.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                           [.text(name)])
        Thread.sleep(forTimeInterval: 0.3)
    }

    @Test("a session asked to commit with synchronous_commit off commits with local: an acknowledged write is flushed before anyone reads it")
    func asynchronousCommitIsRaised() async throws {
        guard let url = TestServer.require() else { return }
        let name = "async_" + String(UInt32.random(in: 0...UInt32.max))
        for (asked, expected) in [("off", "local"), ("remote_write", "remote_write")] {
            let store = try await PostgreSQLStore(connectionString: url + "?options=-c%20synchronous_commit%3D" + asked,
                                                  options: .init(poolSize: 1, schema: TestServer.schema(for: name)))
            let level = try await store.pool.run { connection, _ in
                try connection.execute("SHOW synchronous_commit").bytes(0, 0).map { String(decoding: $0, as: UTF8.self) }
            }
            #expect(level == expected, "asked \(asked)")
            try await store.close()
        }
    }

    @Test func connectionKilledMidTransactionIsRetriedWhole() async throws {
        guard let url = TestServer.require() else { return }
        let name = "victim_" + String(UInt32.random(in: 0...UInt32.max))
        let store = try await PostgreSQLStore(connectionString: url + "?application_name=" + name,
                                              options: .init(poolSize: 1, schema: TestServer.schema(for: name)))
        try await store.defineTable(Self.table)
        let attempts = Counter()
        try await store.write { transaction in
            let attempt = attempts.next()
            try transaction.upsert(Record(id: "a", fields: ["n": .int(Int64(attempt))]), in: "items")
            // A query sends the buffered upsert: "a" is on the server, uncommitted, when the kill comes.
            #expect(try transaction.count(in: "items", matching: .all) == 1)
            if attempt == 1 { try Self.killBackend(named: name, url: url) }
            try transaction.upsert(Record(id: "b", fields: ["n": .int(Int64(attempt))]), in: "items")
        }
        #expect(attempts.current == 2)
        let records = try await store.read { try $0.records(in: "items", matching: Query()) }
        #expect(records.map(\.id) == ["a", "b"])
        #expect(records.map { $0["n"] } == [.int(2), .int(2)])
        try await store.close()
    }

    @Test func connectionKilledWithoutRetryLeavesNoPartialWrite() async throws {
        guard let url = TestServer.require() else { return }
        let name = "victim_" + String(UInt32.random(in: 0...UInt32.max))
        let store = try await PostgreSQLStore(connectionString: url + "?application_name=" + name,
                                              options: .init(poolSize: 1, schema: TestServer.schema(for: name),
                                                             reconnectAttempts: 0))
        try await store.defineTable(Self.table)
        do {
            try await store.write { transaction in
                try transaction.upsert(Record(id: "a", fields: ["n": 1]), in: "items")
                #expect(try transaction.count(in: "items", matching: .all) == 1)   // "a" reaches the server
                try Self.killBackend(named: name, url: url)
                try transaction.upsert(Record(id: "b", fields: ["n": 1]), in: "items")
            }
            Issue.record("a write whose connection was killed succeeded without a retry")
        } catch let error as SyncError {
            #expect(error.code == .transient)
        }
        let count = try await store.read { try $0.count(in: "items", matching: .all) }
        #expect(count == 0)
        try await store.close()
    }

    @Test func concurrentIncrementsLoseNoUpdate() async throws {
        guard let url = TestServer.require() else { return }
        let schema = TestServer.schema(for: "increments-" + UUID().uuidString)
        let first = try await PostgreSQLStore(connectionString: url, options: .init(poolSize: 3, schema: schema))
        let second = try await PostgreSQLStore(connectionString: url, options: .init(poolSize: 3, schema: schema))
        try await first.defineTable(Self.table)
        try await first.write { try $0.upsert(Record(id: "counter", fields: ["n": 0]), in: "items") }
        let increments = 40
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<increments {
                let store = index.isMultiple(of: 2) ? first : second
                group.addTask {
                    try await store.write { transaction in
                        let current = try transaction.record(in: "items", id: "counter")?["n"]
                        guard case .int(let value)? = current else { throw SyncError(.notFound, "no counter") }
                        try transaction.upsert(Record(id: "counter", fields: ["n": .int(value + 1)]), in: "items")
                    }
                }
            }
            try await group.waitForAll()
        }
        let final = try await second.read { try $0.record(in: "items", id: "counter")?["n"] }
        #expect(final == .int(Int64(increments)))
        try await first.close()
        try await second.close()
    }

    @Test func registryOpensBothSchemesAndRedactsThePassword() async throws {
        guard let url = TestServer.require() else { return }
        var registry = StoreRegistry()
        registry.register(.postgres)
        registry.register(.postgresql)
        let password = TestServer.password(url)
        for scheme in ["postgres", "postgresql"] {
            let schemed = scheme + url[url.range(of: "://")!.lowerBound...]
            let schema = TestServer.schema(for: "registry-" + scheme + UUID().uuidString)
            let withSchema = schemed + "?schema=" + schema + "&pool-size=1"
            let (location, adapter) = try registry.resolve(withSchema)
            #expect(adapter.scheme == scheme)
            #expect(!password.isEmpty && !location.description.contains(password))
            let store = try await registry.open(withSchema)
            try await store.defineTable(Self.table)
            try await store.write { try $0.upsert(Record(id: "x", fields: ["n": 1]), in: "items") }
            #expect(try await store.read { try $0.count(in: "items", matching: .all) } == 1)
            try await store.close()
            let isolate = try #require(adapter.isolate)
            let isolated = try isolate(location, URL(fileURLWithPath: "/tmp/case-directory"))
            #expect(isolated.persistent)
            #expect(isolated.storeFile == nil)
            #expect(isolated.location.parameter("schema")?.hasPrefix(String(schema.prefix(40)) + "_") == true)
            #expect(!isolated.location.description.contains(password))
        }
    }

    @Test func aKeywordConnectionStringPicksTheStoreThroughTheRegistry() async throws {
        guard let url = TestServer.require() else { return }
        guard let components = URLComponents(string: url), let host = components.host, let port = components.port,
              let user = components.user else {
            Issue.record("cannot take \(url) apart")
            return
        }
        let password = TestServer.password(url)
        let database = components.path.isEmpty ? "postgres" : String(components.path.dropFirst())
        let conninfo = "host=\(host) port=\(port) user=\(user) password='\(password)' dbname=\(database) application_name='a b'"
        let storeURL = try PostgreSQLStore.storeURL(connectionString: conninfo)
        #expect(storeURL.hasPrefix("postgres://\(user):"))
        #expect(storeURL.contains("application_name=a%20b"))
        var registry = StoreRegistry()
        registry.register(.postgres)
        let schema = TestServer.schema(for: "conninfo-" + UUID().uuidString)
        let (location, _) = try registry.resolve(storeURL + "&schema=" + schema)
        #expect(!password.isEmpty && !location.description.contains(password))
        let store = try await registry.open(storeURL + "&schema=" + schema)
        try await store.defineTable(Self.table)
        try await store.write { try $0.upsert(Record(id: "x", fields: ["n": 1]), in: "items") }
        #expect(try await store.read { try $0.count(in: "items", matching: .all) } == 1)
        try await store.close()
        #expect(throws: SyncError.self) { try PostgreSQLStore.storeURL(connectionString: "host=x nonsense") }
    }

    @Test func createIfMissingFalseRefusesAnEmptySchemaAndCreatesNothing() async throws {
        guard let url = TestServer.require() else { return }
        let schema = TestServer.schema(for: "absent-" + UUID().uuidString)
        var registry = StoreRegistry()
        registry.register(.postgres)
        let storeURL = "postgres" + url[url.range(of: "://")!.lowerBound...] + "?schema=" + schema
        let error = await #expect(throws: SyncError.self) {
            _ = try await registry.open(storeURL, options: StoreOptions(createIfMissing: false))
        }
        #expect(error?.code == .notFound)
        let raw = try PGConnection.connect(url, password: nil)
        defer {
            _ = try? raw.execute("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
            raw.close()
        }
        let exists = try raw.execute("SELECT count(*) FROM pg_namespace WHERE nspname = $1", [.text(schema)])
        #expect(exists.int64(0, 0) == 0)
        try await registry.open(storeURL).close()
        try await registry.open(storeURL, options: StoreOptions(createIfMissing: false)).close()
    }
}

#if os(Linux)
/// `SOCK_STREAM` as `socket(2)` takes it (glibc imports it as an enum case).
private let streamSocketType = Int32(SOCK_STREAM.rawValue)
#else
private let streamSocketType = SOCK_STREAM
#endif

/// The store URL's replica parameters (no server needed).
@Suite("PostgreSQL store URL: replicas")
struct ReplicaURLTests {
    @Test("replica= (once per standby, percent-encoded) and replica-wait-ms= become options and leave the primary's libpq URL")
    func replicaParameters() throws {
        let url = "postgres://app@db1:5432/app?replica=postgres%3A%2F%2Fapp%40db2%3A5432%2Fapp&sslmode=disable"
            + "&replica=host%3Ddb3%20dbname%3Dapp&replica-wait-ms=250&schema=s"
        let location = try PostgreSQLLocation(try StoreLocation(parsing: url))
        #expect(location.options.replicas == ["postgres://app@db2:5432/app", "host=db3 dbname=app"])
        #expect(location.options.replicaWait == .milliseconds(250))
        #expect(location.connectionString == "postgres://app@db1:5432/app?sslmode=disable")
        #expect(try PostgreSQLLocation(try StoreLocation(parsing: "postgres://app@db1/app")).options.replicas.isEmpty)
    }

    @Test("a replica that is not a libpq URL or connection string, or a negative wait, is a typed error")
    func badReplicaParameters() {
        for url in ["postgres://app@db1/app?replica=db2", "postgres://app@db1/app?replica=postgres%3A%2F%2Fdb2%2Fapp&replica-wait-ms=-1"] {
            #expect(throws: SyncError.self) { try PostgreSQLLocation(try StoreLocation(parsing: url)) }
            #expect((try? PostgreSQLLocation(try StoreLocation(parsing: url))) == nil)
        }
    }
}
