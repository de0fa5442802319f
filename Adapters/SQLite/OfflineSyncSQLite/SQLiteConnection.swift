import COfflineSyncSQLite3
import Dispatch
import OfflineSync
import OfflineSyncStoreKit

/// Owns one SQLite connection handle and its cache of prepared statements.
///
/// Not `Sendable`: a connection lives inside a ``SQLiteConnectionWorker`` and is only ever used on
/// that worker's serial queue, lent to closures the way GRDB lends its `Database`.
final class SQLiteConnection {
    /// The open handle, or `nil` once closed.
    private(set) var db: OpaquePointer?
    /// The file (or `:memory:`) the connection opened, for error messages.
    let path: String
    /// Decoded catalog entries, reused while their stored schema bytes are unchanged.
    var tableInfoCache: [ExactString: SQLiteTable] = [:]
    /// Keyed by the SQL's exact bytes: `String` equality is canonical equivalence, which would
    /// hand the statement of table "é" to table "e\u{301}".
    private var statements: [SQLiteSQL: SQLiteStatement] = [:]
    /// The entry of ``statements`` the last call found or made: a run of gets by id, or a
    /// page of inserts, names one SQL again and again, and comparing its precomputed hash and
    /// shared bytes skips hashing into the dictionary (1–2% of a get by id in `perf`).
    /// Cleared wherever ``statements`` loses entries.
    private var lastStatement: (key: SQLiteSQL, statement: SQLiteStatement)?

    /// The SQL of each query shape translated so far (`SQLQueryShape`), with the table
    /// mapping it was written for.
    var shapes = SQLQueryShapes<SQLiteTable, SQLiteSQL>(limit: statementCacheLimit)

    /// The most prepared statements kept between transactions (keyed by SQL text).
    static let statementCacheLimit = 256

    /// Whether ``close(checkpoint:)`` closes the handle: `false` for a handle another library
    /// owns (``borrowing(_:path:)``).
    private let ownsHandle: Bool

    private init(db: OpaquePointer, path: String, ownsHandle: Bool = true) {
        self.db = db
        self.path = path
        self.ownsHandle = ownsHandle
    }

    /// A connection over a handle another library opened and keeps (GRDB's): statements are
    /// prepared and cached on it as on an own one, and ``close(checkpoint:)`` finalizes them
    /// but leaves the handle open. Both must link the same SQLite library, and the handle must
    /// be used by one thread at a time, the caller's.
    static func borrowing(_ handle: OpaquePointer, path: String) -> SQLiteConnection {
        SQLiteConnection(db: handle, path: path, ownsHandle: false)
    }

    deinit { close(checkpoint: false) }

    /// Opens a connection with `sqlite3_open_v2` flags (plus no-mutex and extended result codes),
    /// turns off double-quoted string literals (so a quoted name that matches no column is an
    /// error, never a string) and sets the busy timeout.
    static func open(path: String, flags: Int32, busyTimeoutMilliseconds: Int32) throws -> SQLiteConnection {
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, nil)
        guard rc == SQLITE_OK, let handle else {
            let error = SQLiteFailure.error(rc, handle, "opening '\(path)'")
            sqlite3_close_v2(handle)
            throw error
        }
        let strict = osync_sqlite3_disable_double_quoted_strings(handle)
        guard strict == SQLITE_OK else {
            let error = SQLiteFailure.error(strict, handle, "configuring '\(path)'")
            sqlite3_close_v2(handle)
            throw error
        }
        let connection = SQLiteConnection(db: handle, path: path)
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        return connection
    }

    /// The open handle; throws ``SyncError/Code/storeClosed`` after ``close(checkpoint:)``.
    func handle() throws -> OpaquePointer {
        guard let db else { throw SyncError(.storeClosed, "the SQLite store '\(path)' is closed") }
        return db
    }

    /// Runs `body` with the prepared statement for `sql`, bound to `bindings`, then resets it.
    /// Statements are cached by SQL text; a statement already being stepped is not lent twice.
    func withStatement<T>(_ sql: String, _ bindings: [SQLiteValue] = [], _ body: (SQLiteStatement) throws -> T) throws -> T {
        try withStatement(SQLiteSQL(sql), bindings, body)
    }

    /// ``withStatement(_:_:_:)-(String,_,_)`` for SQL whose cache key was made once (a table's
    /// per-row statements), so the text is not hashed again on every row.
    func withStatement<T>(_ key: SQLiteSQL, _ bindings: [SQLiteValue] = [], _ body: (SQLiteStatement) throws -> T) throws -> T {
        let db = try handle()
        let statement: SQLiteStatement
        var owned = false
        let found: SQLiteStatement?
        if let last = lastStatement, last.key == key {
            found = last.statement
        } else {
            found = statements[key]
            if let found { lastStatement = (key, found) }
        }
        switch found {
        case let cached? where !cached.inUse:
            statement = cached
        case nil:
            statement = try SQLiteStatement(db: db, sql: key.text, persistent: true)
            statements[key] = statement
            lastStatement = (key, statement)
        case _?:
            statement = try SQLiteStatement(db: db, sql: key.text, persistent: false)
            owned = true
        }
        statement.inUse = true
        defer {
            statement.reset()
            statement.inUse = false
            if owned { statement.finalize() }
        }
        try statement.bind(bindings)
        return try body(statement)
    }

    /// Runs `sql` to completion, ignoring any rows.
    func execute(_ sql: String, _ bindings: [SQLiteValue] = []) throws {
        try execute(SQLiteSQL(sql), bindings)
    }

    /// Runs the statement `key` names to completion, ignoring any rows.
    func execute(_ key: SQLiteSQL, _ bindings: [SQLiteValue] = []) throws {
        try withStatement(key, bindings) { statement in
            while try statement.step() {}
        }
    }

    /// Runs a one-off statement (DDL) without caching it.
    func executeUncached(_ sql: String) throws {
        let statement = try SQLiteStatement(db: try handle(), sql: sql, persistent: false)
        defer { statement.finalize() }
        while try statement.step() {}
    }

    /// The first column of the first row `sql` returns, or `nil` when it returns no row.
    func scalar(_ sql: String, _ bindings: [SQLiteValue] = []) throws -> SQLiteValue? {
        try withStatement(sql, bindings) { statement in
            try statement.step() ? try statement.value(0) : nil
        }
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { db.map { Int(sqlite3_changes64($0)) } ?? 0 }

    /// The rowid of the last inserted row.
    var lastInsertRowID: Int64 { db.map { sqlite3_last_insert_rowid($0) } ?? 0 }

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` (takes the write lock at once, waiting up
    /// to the busy timeout) or `BEGIN DEFERRED`; `COMMIT` when it returns, `ROLLBACK` when it
    /// or the commit throws. Inside a transaction already open (a borrowed connection's, whose
    /// owner began it), `body` runs in a savepoint instead: released when it returns, rolled
    /// back to when it throws, so its failure still changes nothing.
    func transaction<T>(immediate: Bool, _ body: () throws -> T) throws -> T {
        let db = try handle()
        if sqlite3_get_autocommit(db) == 0 {
            try execute("SAVEPOINT \"osync_nested\"")
            do {
                let result = try body()
                try execute("RELEASE \"osync_nested\"")
                return result
            } catch {
                try? execute("ROLLBACK TO \"osync_nested\"")
                try? execute("RELEASE \"osync_nested\"")
                throw error
            }
        }
        try execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        defer { trimStatementCache() }
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            if sqlite3_get_autocommit(db) == 0 { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Finalizes every cached statement when the cache outgrew its limit (between transactions,
    /// so no statement is being stepped).
    func trimStatementCache() {
        guard statements.count > Self.statementCacheLimit else { return }
        for statement in statements.values where !statement.inUse { statement.finalize() }
        statements = statements.filter { $0.value.inUse }
        lastStatement = nil
    }

    /// Finalizes every statement and closes the handle; with `checkpoint`, first copies the WAL
    /// into the database file and truncates it. Safe to call twice.
    func close(checkpoint: Bool) {
        guard let db else { return }
        if checkpoint, ownsHandle { try? execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        for statement in statements.values { statement.finalize() }
        statements = [:]
        lastStatement = nil
        tableInfoCache = [:]
        shapes.removeAll()
        if ownsHandle { sqlite3_close_v2(db) }
        self.db = nil
    }
}

/// Owns one ``SQLiteConnection`` and the serial dispatch queue it is confined to. `async` callers hop
/// onto the queue with a checked continuation, so blocking SQLite calls never run on Swift's
/// cooperative pool.
final class SQLiteConnectionWorker: @unchecked Sendable {
    // @unchecked Sendable: `connection` is read and written only inside blocks running on
    // `queue`, which is serial, so one thread at a time touches it and its C handle. `queue`
    // is immutable and thread-safe.
    private let queue: DispatchQueue
    private var connection: SQLiteConnection?

    /// Creates a worker with no connection yet.
    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    /// Runs blocking `work` on the worker's queue.
    func perform<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try work() })
            }
        }
    }

    /// Opens the connection on the worker's queue.
    func open(_ make: @escaping @Sendable () throws -> SQLiteConnection) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            queue.async {
                do {
                    let connection = try make()
                    self.connection = connection
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Runs `work` with the connection on the worker's queue. Throws
    /// ``SyncError/Code/storeClosed`` once the worker is closed.
    func run<T: Sendable>(_ work: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                guard let connection = self.connection else {
                    continuation.resume(throwing: SyncError(.storeClosed, "the SQLite store is closed"))
                    return
                }
                continuation.resume(with: Result { try work(connection) })
            }
        }
    }

    /// Closes the connection after the work already queued. Safe to call twice.
    func close(checkpoint: Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.connection?.close(checkpoint: checkpoint)
                self.connection = nil
                continuation.resume()
            }
        }
    }
}

/// SQL text as a statement-cache key, compared by its exact bytes, with its hash computed once
/// when the key is made: a table keeps the keys of its per-row statements, so finding the
/// prepared statement for a row costs hashing one integer, not the whole SQL text.
struct SQLiteSQL: Hashable {
    let text: String
    private let hash: Int

    init(_ text: String) {
        let exact = ExactString(text)
        self.text = exact.value
        self.hash = exact.hashValue
    }

    static func == (lhs: SQLiteSQL, rhs: SQLiteSQL) -> Bool {
        lhs.hash == rhs.hash && ExactString(lhs.text) == ExactString(rhs.text)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }
}
