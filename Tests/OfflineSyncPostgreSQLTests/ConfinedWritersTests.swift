import Dispatch
import Foundation
import OfflineSync
@testable import OfflineSyncPostgreSQL
import OfflineSyncTestSupport
import Testing

/// Write transactions confined to tables (`write(confinedTo:_:)`): those of different tables
/// run at the same time, those sharing a table one after another, and an unconfined one
/// alone. A transaction is held open by blocking its body (it runs on the store's own
/// connection thread); that another one waits is seen in PostgreSQL's `pg_locks`, never
/// guessed from a pause.
@Suite("PostgreSQLStore: writers confined to tables", .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct ConfinedWritersTests {
    static let tables = ["a", "b", "c"].map { TableSchema($0, fields: [FieldDefinition("n", .int)]) }

    /// A store whose connections carry a name of their own, so `pg_locks` can be read for
    /// them alone while other suites use the server.
    static func open() async throws -> (store: PostgreSQLStore, url: String, application: String)? {
        guard let url = TestServer.require() else { return nil }
        let application = "confined_" + String(UInt32.random(in: 0...UInt32.max))
        let store = try await PostgreSQLStore(connectionString: url + "?application_name=" + application,
                                              options: .init(poolSize: 3, schema: TestServer.schema(for: application)))
        for table in tables { try await store.defineTable(table) }
        return (store, url, application)
    }

    /// Waits until one of `application`'s connections waits for an advisory lock (bounded:
    /// after 30 s the wait fails the test).
    static func waitForLockWaiter(application: String, url: String) async throws {
        let observer = try PGConnection.connect(url, password: nil)
        defer { observer.close() }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let waiting = try observer.execute("""
                SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE a.application_name = $1 AND l.locktype = 'advisory' AND NOT l.granted
                """, [.text(application)])
            if (waiting.int64(0, 0) ?? 0) > 0 { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("no connection of \(application) waited for a lock within 30 s")
    }

    /// A gate a transaction's body waits at, on its connection's own thread (never on
    /// Swift's cooperative pool: the test waits for the body with the support target's
    /// async ``Gate``, so other suites' tasks keep running meanwhile).
    final class ThreadGate: Sendable {
        private let semaphore = DispatchSemaphore(value: 0)
        func open() { semaphore.signal() }
        /// Waits for ``open()``; throws after 30 s, so a wrong lock fails the test instead of
        /// hanging it.
        func pass() throws {
            guard semaphore.wait(timeout: .now() + 30) == .success else {
                throw SyncError(.busy, "the gate stayed shut for 30 s")
            }
        }
    }

    /// What the transactions did, in the order they did it.
    final class Log: Sendable {
        private let entries = Box<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.value }
    }

    static func row(_ id: String, _ n: Int64) -> Record { Record(id: id, fields: ["n": .int(n)]) }

    @Test func writersOfDifferentTablesRunAtOnce() async throws {
        guard let (store, _, _) = try await Self.open() else { return }
        let entered = Gate(), otherDone = ThreadGate()
        // The first holds table a until the second, of tables b and c, has committed.
        let first = Task {
            defer { entered.open() }    // also when the write fails before its body opens it
            try await store.write(confinedTo: ["a"]) { txn in
                try txn.upsert(Self.row("x", 1), in: "a")
                entered.open()
                try otherDone.pass()
            }
        }
        await entered.wait()
        try await store.write(confinedTo: ["b", "c"]) { txn in
            try txn.upsert(Self.row("y", 2), in: "b")
            try txn.upsert(Self.row("z", 3), in: "c")
        }
        otherDone.open()
        try await first.value
        let rows = try await store.read { txn in
            try ["a", "b", "c"].map { try txn.records(in: $0, matching: Query()).map(\.id) }
        }
        #expect(rows == [["x"], ["y"], ["z"]])
        try await store.close()
    }

    /// A write confined to `tables`, or unconfined for `nil`.
    static func write(_ store: PostgreSQLStore, _ tables: Set<String>?,
                      _ body: @escaping @Sendable (any LocalWriteTransaction) throws -> Void) async throws {
        if let tables { try await store.write(confinedTo: tables, body) } else { try await store.write(body) }
    }

    /// Opens the first transaction and holds it; starts the second, sees it wait for a lock
    /// without having begun, then lets the first commit. Returns what each logged, in order:
    /// "first commits" and "second begins".
    static func takeTurns(_ store: PostgreSQLStore, url: String, application: String,
                          first: (tables: Set<String>?, body: @Sendable (any LocalWriteTransaction) throws -> Void),
                          second: (tables: Set<String>?, body: @Sendable (any LocalWriteTransaction) throws -> Void)) async throws -> [String] {
        let entered = Gate(), release = ThreadGate()
        let log = Log()
        let holding = Task {
            defer { entered.open() }    // also when the write fails before its body opens it
            try await write(store, first.tables) { txn in
                try first.body(txn)
                entered.open()
                try release.pass()
                log.add("first commits")
            }
        }
        await entered.wait()
        let waiting = Task {
            try await write(store, second.tables) { txn in
                log.add("second begins")
                try second.body(txn)
            }
        }
        try await waitForLockWaiter(application: application, url: url)
        #expect(log.all.isEmpty)
        release.open()
        try await holding.value
        try await waiting.value
        return log.all
    }

    @Test func writersSharingATableTakeTurns() async throws {
        guard let (store, url, application) = try await Self.open() else { return }
        @Sendable func increment(_ txn: any LocalWriteTransaction) throws {
            let n = try txn.record(in: "b", id: "counter")?["n"].intValue ?? 0
            try txn.upsert(Self.row("counter", n + 1), in: "b")
        }
        // The second shares table b: it reads the counter only once the first has committed.
        let order = try await Self.takeTurns(store, url: url, application: application,
                                             first: (["a", "b"], increment), second: (["b", "c"], increment))
        #expect(order == ["first commits", "second begins"])
        let counter = try await store.read { txn in try txn.record(in: "b", id: "counter")?["n"].intValue }
        #expect(counter == 2, "an increment was lost")
        try await store.close()
    }

    @Test func anUnconfinedWriterRunsAlone() async throws {
        guard let (store, url, application) = try await Self.open() else { return }
        // The unconfined one writes none of the confined one's tables, and still waits for it.
        let order = try await Self.takeTurns(store, url: url, application: application,
                                             first: (["a"], { try $0.upsert(Self.row("x", 1), in: "a") }),
                                             second: (nil, { try $0.upsert(Self.row("y", 2), in: "c") }))
        #expect(order == ["first commits", "second begins"])
        try await store.close()
    }

    @Test func lockKeysDifferByTableAndSchema() {
        let keys = Set(["a", "b", "ab", "ba", ""].flatMap { table in
            ["s1", "s2", "s1a"].map { PostgreSQLStore.tableLockKey(schema: $0, table: table) }
        })
        #expect(keys.count == 15)
        // One order for every transaction: the statements name each key once, ascending.
        let statements = PostgreSQLStore.openingStatements(.confined(["c", "a", "b", "a"]), schema: "s1")
        #expect(statements.map(\.sql) == ["BEGIN ISOLATION LEVEL READ COMMITTED", PostgreSQLStore.sharedLockStatement]
                + Array(repeating: PostgreSQLStore.tableLockStatement, count: 3))
        let taken = statements.dropFirst(2).compactMap { statement -> Int64? in
            if case .int64(let key) = statement.parameters.first { return key }
            return nil
        }
        #expect(taken == ["a", "b", "c"].map { PostgreSQLStore.tableLockKey(schema: "s1", table: $0) }.sorted())
    }
}
