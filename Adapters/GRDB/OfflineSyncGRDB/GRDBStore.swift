import GRDB
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit
import Synchronization

/// A ``LocalStore`` in the app's own GRDB database: the app hands over its `DatabaseQueue`
/// or `DatabasePool` and keeps using it.
///
/// - Each table the sync engine defines is an ordinary table of the app's with typed
///   columns (``GRDBColumnCodec``): defining one the app created adopts it (its rows are
///   queued as inserts); defining one it did not creates it. The app reads synced rows with
///   its records, SQL and `ValueObservation`, and GRDB's observations see what a pull writes.
/// - Every write the app makes to a synced table, by any path, is captured by triggers in
///   the same transaction and queued before the engine's next read or write
///   (``GRDBCapture``); the engine's own writes are not captured again.
/// - The engine's bookkeeping (queue, errors, config, cursors) lives in the same database,
///   in `__`-prefixed tables laid out as the SQLite adapter lays them out.
///
/// Closing the store leaves the app's database open: it is the app's.
///
/// ```swift
/// let dbQueue = try DatabaseQueue(path: path)
/// let store = try await GRDBStore(dbQueue)
/// let context = try await SyncContext(store: store, remote: remote)
/// ```
public final class GRDBStore: LocalStore {
    /// The app's database.
    public let database: any DatabaseWriter
    private let blobs: any AttachmentFileStore
    private let state = Mutex(State())
    /// What the queries on the app's tables read and kept (tests check a query's memory
    /// with it).
    package let queryStatistics = GRDBQueryStatistics()

    private struct State: @unchecked Sendable {
        // @unchecked Sendable: `writerTables` wraps the writer connection's handle and is only
        // used inside the database's write accesses (serial) or a queue's reads (on the same
        // serial queue); the mutex guards the reference itself.
        var writerTables: SQLiteEmbeddedTables?
        /// App tables decoded from the catalog, by number, reused while their bytes match.
        var tables: [Int64: GRDBTypedTable] = [:]
        /// The commits this store object made (``externalChangeToken()``).
        var ownCommits: Int64 = 0
        var closed = false
    }

    /// Opens the store in `database`, creating the bookkeeping tables it lacks. A damaged or
    /// foreign file that GRDB opened without reading it yet throws
    /// ``SyncError/Code/notADatabase`` or ``SyncError/Code/corrupted`` and is not written to
    /// (``checkDatabaseFile(atPath:)`` says the same before GRDB opens it at all).
    public init(_ database: any DatabaseWriter) async throws {
        self.database = database
        let path = database.path
        let inMemory = path.isEmpty || path == ":memory:" || path.hasPrefix("file::memory:")
        blobs = inMemory ? MemoryAttachmentFiles() : BlobDirectory(path: path + "-attachments")
        if !inMemory { try Self.checkDatabaseFile(atPath: path) }
        do {
            try await database.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    let sql = try self.tables(for: db)
                    try sql.prepareCatalog()
                    for statement in GRDBCapture.bookkeeping { try sql.executeUncached(statement) }
                    return .commit
                }
                db.clearSchemaCache()
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_NOTADB || error.resultCode == .SQLITE_CORRUPT {
            throw SyncError(error.resultCode == .SQLITE_NOTADB ? .notADatabase : .corrupted,
                            "'\(path)' cannot be opened as a database: \(error.message ?? "SQLite result \(error.resultCode.rawValue)")")
        }
    }

    /// Checks the database file at `path` before the app opens it with GRDB: a file that is
    /// not a SQLite database throws ``SyncError/Code/notADatabase``, one whose header is
    /// damaged or that ends before the pages its header counts ``SyncError/Code/corrupted``;
    /// the file is only read. A missing or empty file passes (SQLite makes a new database).
    /// GRDB would otherwise report these as its own `DatabaseError`, or not until a later read.
    ///
    /// Damage inside the pages is not looked for: that takes a scan of the whole file
    /// (`PRAGMA quick_check`), which the app may run when it chooses.
    public static func checkDatabaseFile(atPath path: String) throws {
        try SQLiteStoreFile.checkHeader(atPath: path)
    }

    /// See ``LocalStore/attachmentFiles``: the directory `<path>-attachments` beside the
    /// database file (in memory for an in-memory database).
    public var attachmentFiles: (any AttachmentFileStore)? { blobs }

    /// The SQL access on `db`'s connection: kept for the writer (a queue's only connection),
    /// made for one access on a pool's reader (then ``SQLiteEmbeddedTables/close()``d).
    private func tables(for db: Database) throws -> SQLiteEmbeddedTables {
        guard let handle = db.sqliteConnection else { throw SyncError(.storeClosed, "the GRDB database is closed") }
        return try state.withLock { state in
            if state.closed { throw SyncError(.storeClosed, "the GRDB store is closed") }
            if let kept = state.writerTables, kept.wraps(handle) { return kept }
            let made = SQLiteEmbeddedTables(handle: handle, path: database.path)
            // A pool's readers are read-only connections; the writer (a queue's only
            // connection) is not, and lives as long as the database.
            if state.writerTables == nil, !db.configuration.readonly { state.writerTables = made }
            return made
        }
    }

    private func keeps(_ sql: SQLiteEmbeddedTables) -> Bool {
        state.withLock { $0.writerTables === sql }
    }

    /// The catalog's app tables, reusing decoded ones.
    private func typedTables(_ sql: SQLiteEmbeddedTables) throws -> [ExactString: GRDBTypedTable] {
        let entries = try GRDBSchema.catalog(sql)
        return try state.withLock { state in
            var result: [ExactString: GRDBTypedTable] = [:]
            for entry in entries {
                let table: GRDBTypedTable
                if let cached = state.tables[entry.number], cached.schemaBytes == entry.bytes {
                    table = cached
                } else {
                    table = GRDBTypedTable(number: entry.number, schema: try ValueCodec.decodeSchema(entry.bytes),
                                           schemaBytes: entry.bytes)
                    state.tables[entry.number] = table
                }
                result[ExactString(table.schema.name)] = table
            }
            return result
        }
    }

    // MARK: LocalStore

    /// Creates or adopts the app table (``GRDBSchema``), or a `__`-prefixed bookkeeping table
    /// in the SQLite adapter's layout. Throws ``SyncError/Code/invalidName``,
    /// ``SyncError/Code/schemaMismatch`` (an adopted table without a text `id` key, a stored
    /// value the new schema's type refuses); a failure changes nothing.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try await writeAccess { txn, db in
            if GRDBReadTransaction.isSystem(schema.name) {
                for typed in txn.typed.values where GRDBSchema.collide(typed.schema.name, schema.name) {
                    throw SyncError(.invalidName, "table name '\(schema.name)' differs only in letter case from the existing table '\(typed.schema.name)'")
                }
                try txn.sql.define(schema)
            } else {
                try GRDBSchema.define(schema, in: txn, systemNames: try txn.sql.tableNames(), files: self.blobs)
            }
            db.clearSchemaCache()
        }
    }

    /// Runs `body` in a GRDB read access (a snapshot; on a pool, a reader connection). When
    /// the app has written synced rows that are not queued yet, a write transaction queues them
    /// first, so what `body` reads of the queue is whole. Throws ``SyncError/Code/busy`` when
    /// the app kept writing through three such rounds.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        // A read first has what the app wrote queued (a write), so the queue it reads is whole;
        // after three rounds of the app writing in between, it reads what is queued then.
        for round in 0..<3 {
            let answer: T? = try await database.read { db in
                let sql = try self.tables(for: db)
                defer { if self.keeps(sql) { sql.endAccess() } else { sql.close() } }
                if round < 2, try sql.scalar("SELECT 1 FROM \(GRDBName.captured) LIMIT 1") != nil { return nil }
                let typed = try self.typedTables(sql)
                return try sql.read { system in
                    let txn = GRDBReadTransaction(sql: sql, system: system, typed: typed, statistics: self.queryStatistics)
                    defer { txn.end() }
                    return try body(txn)
                }
            }
            if let answer { return answer }
            try await writeAccess { _, _ in }
        }
        throw SyncError(.busy, "the app kept writing to its synced tables while the store tried to read")
    }

    /// Runs `body` in a GRDB write access, in a `BEGIN IMMEDIATE` transaction: the app's
    /// captured writes are queued first, the capture is silent while `body` writes, and GRDB's
    /// observations of the app tables `body` wrote are told at the commit. Rethrows what
    /// `body` throws (rolling everything back, the queued captures included).
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await writeAccess { txn, _ in try body(txn) }
    }

    /// One write transaction (`BEGIN IMMEDIATE`): queues what the app wrote, silences the
    /// capture, runs `body`, counts the commit and tells GRDB's observers which app tables
    /// changed.
    private func writeAccess<T: Sendable>(_ body: @escaping @Sendable (GRDBWriteTransaction, Database) throws -> T) async throws -> T {
        try await database.writeWithoutTransaction { db in
            var result: T?
            try db.inTransaction(.immediate) {
                let sql = try self.tables(for: db)
                defer { sql.endAccess() }
                let typed = try self.typedTables(sql)
                let touched = try sql.write { system -> Set<String> in
                    let txn = GRDBWriteTransaction(sql: sql, system: system, typed: typed, statistics: self.queryStatistics)
                    defer { txn.end() }
                    try GRDBCapture.ingest(txn, files: self.blobs)
                    try sql.execute("INSERT INTO \(GRDBName.applying) VALUES (1)")
                    result = try body(txn, db)
                    try sql.execute("DELETE FROM \(GRDBName.applying)")
                    try sql.execute("UPDATE \(GRDBName.state) SET \"commits\" = \"commits\" + 1")
                    return txn.touched
                }
                // GRDB 7.10 quotes a name in its schema PRAGMAs without doubling an embedded
                // double quote, so it can observe no table whose name holds one (nor the whole
                // database while one exists): such a table's changes are not told.
                for name in touched where !name.contains("\"") { try db.notifyChanges(in: Table(name)) }
                self.state.withLock { $0.ownCommits += 1 }
                return .commit
            }
            return result!
        }
    }

    /// Changes when a commit this store object did not make lands: the app's own writes to
    /// its synced tables (counted by the capture triggers, in this process or another) and
    /// the commits of another process's store on the same file.
    public func externalChangeToken() async throws -> UInt64? {
        try state.withLock { if $0.closed { throw SyncError(.storeClosed, "the GRDB store is closed") } }
        let (captures, commits) = try await database.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT \"captures\", \"commits\" FROM \(GRDBName.state)")
            return (row?[0] as Int64? ?? 0, row?[1] as Int64? ?? 0)
        }
        let own = state.withLock { $0.ownCommits }
        return UInt64(bitPattern: captures &+ commits &- own)
    }

    /// Tells the app's GRDB observations (`ValueObservation`, `DatabaseRegionObservation`)
    /// about commits to the synced tables that GRDB cannot see: another process's (an app
    /// extension or widget writing the same file). GRDB observes only the writes of its own
    /// connections. Asks every `interval` whether ``externalChangeToken()`` moved and, when
    /// it did, notifies a change of every synced table; returns when the calling task is
    /// cancelled or the store is closed.
    ///
    /// ```swift
    /// let relay = Task { try await store.relayChangesFromOtherProcesses() }
    /// // … on the way out:
    /// relay.cancel()
    /// ```
    public func relayChangesFromOtherProcesses(every interval: Duration = .milliseconds(100)) async throws {
        var last = try await externalChangeToken()
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            let now: UInt64?
            do {
                now = try await externalChangeToken()
            } catch let error as SyncError where error.code == .storeClosed {
                return
            }
            guard now != last else { continue }
            last = now
            try await database.write { db in
                let names = try String.fetchAll(db, sql: "SELECT \"name\" FROM \(GRDBName.catalog)")
                for name in names where !name.contains("\"") { try db.notifyChanges(in: Table(name)) }
            }
        }
    }

    /// Finalizes the store's statements and checkpoints a WAL passively; later calls throw
    /// ``SyncError/Code/storeClosed``. The app's database stays open.
    public func close() async throws {
        let wasOpen = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        guard wasOpen else { return }
        // On the writer's queue: the statements are finalized where they are used. A passive
        // checkpoint (it waits for no reader) moves what the store committed from a WAL into
        // the database file, so a copy of the file taken now holds it.
        try? await database.writeWithoutTransaction { db in
            self.state.withLock { state in
                state.writerTables?.close()
                state.writerTables = nil
            }
            _ = try? db.checkpoint(.passive)
        }
    }
}
