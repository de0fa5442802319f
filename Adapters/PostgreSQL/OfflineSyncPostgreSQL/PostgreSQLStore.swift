import COfflineSyncPostgreSQL
import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// A ``LocalStore`` kept in a PostgreSQL database, in one schema of its own.
///
/// The store's schema (``Options/schema``, `offlinesync` by default) holds a catalog table
/// (`__osync_catalog`: table name → number and ``TableSchema`` encoded with ``ValueCodec``)
/// and one SQL table per store table, named by its number (`osync_t1`, …), so no table or
/// field name is ever part of a statement. System properties and declared fields are typed
/// columns (`c0`, `c1`, … by field position): booleans, `bigint`, `double precision`, dates
/// as `bigint` milliseconds, strings and ids as `bytea` holding their exact UTF-8 bytes (so
/// ordering is by bytes, as the core defines it, and a NUL survives); nested values as an
/// exact ``ValueCodec`` `bytea` plus a `jsonb` mirror for SQL tools; undeclared fields in one
/// encoded `extra` column. Every ``Value`` round-trips exactly (`-0.0`, `Int64.min`, NUL).
/// Declared indexes become B-tree indexes (GIN over the JSON mirror for an indexed nested
/// field). Queries over system properties and declared fields are translated to SQL with
/// the core's three-valued semantics, so filtering, ordering, offset and limit run in the
/// server on its indexes; conjuncts naming undeclared fields are decided by
/// ``QueryEvaluator`` over the rows SQL narrowed. Every value is a bound parameter of a
/// statement prepared once per connection; names are quoted.
///
/// Concurrency: a bounded pool of connections (``Options/poolSize``), each on its own serial
/// dispatch queue, so blocking libpq calls never run on Swift's cooperative pool. Reads run in
/// `REPEATABLE READ READ ONLY` transactions (one consistent snapshot). Write transactions and
/// table definitions take a transaction-scoped advisory lock on the store's schema, so writers
/// of the same schema — in this process or any other — run one after another: serializable.
/// A write confined to tables (``write(confinedTo:_:)``) takes that lock shared and one
/// exclusive lock per table, in one order for every transaction (so two never wait on each
/// other in a cycle): writers of different tables run at once, writers of one table one
/// after another, and an unconfined writer alone.
/// When the connection is lost before `COMMIT` (server restart, `pg_terminate_backend`), the
/// server has rolled the transaction back and the whole body is run again on a fresh
/// connection (bodies are pure functions of the transaction, so re-running is safe); when it
/// is lost during `COMMIT` the outcome is unknown and ``SyncError/Code/transient`` is thrown.
///
/// ```swift
/// let store = try await PostgreSQLStore(connectionString: "postgres://app@db.example/app",
///                                       options: .init(schema: "myapp"))
/// ```
public final class PostgreSQLStore: LocalStore {
    /// How a store connects and runs.
    public struct Options: Sendable, Hashable {
        /// The most connections the store opens (each opened on first use). Default 4.
        public var poolSize: Int
        /// The PostgreSQL schema holding the store's tables; created when missing.
        /// Default `offlinesync`. 1–63 bytes, no NUL.
        public var schema: String
        /// PostgreSQL's `statement_timeout` for every statement, or `nil` for the server's
        /// setting. A statement cancelled by it throws ``SyncError/Code/busy``.
        public var statementTimeout: Duration?
        /// How many times a transaction whose connection was lost before commit is run again
        /// on a fresh connection. Default 3.
        public var reconnectAttempts: Int
        /// Whether a schema without a store gets one (the default); when false, opening it
        /// throws ``SyncError/Code/notFound`` and creates nothing.
        public var createIfMissing: Bool
        /// The directory this device keeps attachment files in (made on the first one), or
        /// `nil`, the default, for a store that keeps none (a context on it refuses
        /// attachments with ``SyncError/Code/unsupported``). The bytes stay on the device:
        /// the database holds only the references, as every adapter's rows do.
        public var attachmentsDirectory: String?
        /// Connection strings of hot standbys of the database that serve reads beside the
        /// primary (`target_session_attrs` is not needed). A read goes to one of them, in
        /// turn, once it has replayed every write committed on the primary when the read
        /// began, so a read never misses a write that was acknowledged before it; otherwise,
        /// after ``replicaWait``, to the primary. A replica that fails is left out for 5 s.
        /// Each gets a pool of ``poolSize`` connections. Default none.
        public var replicas: [String] = []
        /// How long a read waits for a replica to replay what it needs before the primary
        /// serves it. Default 100 ms.
        public var replicaWait: Duration = .milliseconds(100)

        /// Creates options; every parameter has the documented default.
        public init(poolSize: Int = 4, schema: String = "offlinesync", statementTimeout: Duration? = nil,
                    reconnectAttempts: Int = 3, createIfMissing: Bool = true, attachmentsDirectory: String? = nil) {
            self.attachmentsDirectory = attachmentsDirectory
            self.poolSize = poolSize
            self.schema = schema
            self.statementTimeout = statementTimeout
            self.reconnectAttempts = reconnectAttempts
            self.createIfMissing = createIfMissing
        }
    }

    /// The options the store was opened with.
    public let options: Options
    /// The server the store talks to, for messages (`PostgreSQL server HOST port PORT`).
    public let endpoint: String

    let pool: CheckoutPool<PGWorker>
    /// The hot standbys that serve reads (``Options/replicas``), if any.
    let replicas: PGReplicas?
    private let blobs: BlobDirectory?

    /// See ``LocalStore/attachmentFiles``: files in ``Options/attachmentsDirectory``, if set.
    public var attachmentFiles: (any AttachmentFileStore)? { blobs }
    let quotedSchema: String
    /// `notify`'s pool access and the open `LISTEN` connections (PostgreSQLStore+Notifications.swift).
    let notificationHub: PGNotificationHub

    /// Opens (creating its schema and catalog when missing) the store in the database a libpq
    /// connection string (`host=… dbname=…`) or URL (`postgres://user:password@host:port/db`)
    /// names.
    ///
    /// Throws ``SyncError/Code/invalidStoreURL`` for a malformed connection string or bad
    /// options, ``SyncError/Code/authenticationFailed`` when the server refuses the
    /// credentials, ``SyncError/Code/transient`` when the server cannot be reached and
    /// ``SyncError/Code/storageFailure`` for other server errors. Messages name the host and
    /// port, never the password.
    public init(connectionString: String, options: Options = .init()) async throws {
        guard options.poolSize >= 1 else { throw SyncError(.invalidStoreURL, "the PostgreSQL pool size is at least 1") }
        let schemaBytes = options.schema.utf8.count
        guard schemaBytes >= 1, schemaBytes <= 63, !options.schema.utf8.contains(0) else {
            throw SyncError(.invalidName, "a PostgreSQL schema name has 1 to 63 bytes and no NUL")
        }
        let password = try PostgreSQLStore.password(in: connectionString)
        var setup: [String] = []
        if let timeout = options.statementTimeout {
            let (seconds, attoseconds) = timeout.components
            let milliseconds = max(0, seconds) * 1000 + max(0, attoseconds) / 1_000_000_000_000_000
            setup.append("SET statement_timeout = \(milliseconds)")
        }
        // A commit must be flushed before anyone may read it: a write the store acknowledged
        // is on disk, and in the WAL a replica replays (``PGReplicas``). Raised from `off`
        // only: `local` and the remote levels already flush first.
        setup.append("SELECT set_config('synchronous_commit', 'local', false) WHERE current_setting('synchronous_commit') = 'off'")
        let statements = setup
        let connect: @Sendable () throws -> PGConnection = {
            let connection = try PGConnection.connect(connectionString, password: password)
            do {
                try connection.execute("SET client_min_messages = warning")
                for statement in statements { try connection.execute(statement) }
            } catch {
                connection.close()
                throw error
            }
            return connection
        }
        let workers = (0..<options.poolSize).map { PGWorker(label: "OfflineSyncPostgreSQL.connection\($0)", connect: connect) }
        self.pool = CheckoutPool(workers, storeName: "PostgreSQL")
        self.notificationHub = PGNotificationHub(pool: pool, connect: connect, password: password)
        self.options = options
        blobs = options.attachmentsDirectory.map { BlobDirectory(path: $0) }
        self.quotedSchema = PostgreSQLStore.quote(options.schema)
        let quoted = quotedSchema, schemaName = options.schema, create = options.createIfMissing, hasReplicas = !options.replicas.isEmpty
        let cluster: DatabaseIdentity?
        do {
            (endpoint, cluster) = try await pool.run { connection, _ in
                try connection.execute("BEGIN")
                do {
                    try connection.execute(PostgreSQLStore.lockStatement, [.text(schemaName)])
                    let catalog = "\(quoted).\"__osync_catalog\""
                    let found = try connection.execute(
                        "SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1), 'pg_class')", [.text(catalog)])
                    if found.bool(0, 0) == true {
                        try PostgreSQLStore.checkLayout(found.bytes(0, 1).map { String(decoding: $0, as: UTF8.self) },
                                                        schema: schemaName, endpoint: connection.endpoint)
                    } else if !create {
                        throw SyncError(.notFound, "there is no OfflineSync store in schema '\(schemaName)' on \(connection.endpoint)")
                    } else {
                        try connection.execute("CREATE SCHEMA IF NOT EXISTS \(quoted)")
                        try connection.execute("""
                            CREATE TABLE \(catalog) (
                                "name" bytea PRIMARY KEY, "num" bigserial NOT NULL UNIQUE, "schema" bytea NOT NULL)
                            """)
                        try connection.execute("COMMENT ON TABLE \(catalog) IS '\(PostgreSQLStore.layoutMarker)'")
                    }

                    try connection.execute("COMMIT")
                } catch {
                    if connection.isAlive { _ = try? connection.execute("ROLLBACK") }
                    throw error
                }
                // Replicas must be standbys of this database (``PGReplicas``).
                return (connection.endpoint, hasReplicas ? try DatabaseIdentity(connection) : nil)
            }
            replicas = try cluster.map {
                try PGReplicas(options.replicas, poolSize: options.poolSize, wait: options.replicaWait, setup: statements, primary: $0)
            }
        } catch {
            await pool.shutDown()
            throw error
        }
    }

    /// How many reads the replicas served, and how many they left to the primary (behind
    /// after ``Options/replicaWait``, failed, or no longer a standby), since the store opened.
    public var replicaReads: (served: Int, leftToPrimary: Int) {
        guard let replicas else { return (0, 0) }
        return (replicas.served.load(ordering: .relaxed), replicas.leftToPrimary.load(ordering: .relaxed))
    }

    /// The comment on the catalog table naming the layout this adapter reads and writes.
    static let layoutMarker = "OfflineSync PostgreSQL layout 1"

    /// Checks the comment of an existing catalog table: ``SyncError/Code/unsupported`` for
    /// another layout version, ``SyncError/Code/foreignDatabase`` for a table OfflineSync did
    /// not create. Nothing is changed either way.
    static func checkLayout(_ comment: String?, schema: String, endpoint: String) throws {
        if comment == layoutMarker { return }
        if let comment, comment.hasPrefix("OfflineSync PostgreSQL layout ") {
            throw SyncError(.unsupported, "schema '\(schema)' on \(endpoint) holds an OfflineSync store in a layout this version does not read ('\(comment)'; this version reads '\(layoutMarker)')")
        }
        throw SyncError(.foreignDatabase, "schema '\(schema)' on \(endpoint) has a table \"__osync_catalog\" that OfflineSync did not create; choose another schema")
    }

    /// Quotes an identifier: double quotes, inner double quotes doubled.
    static func quote(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Serializes writers of one schema across every connection and process.
    static let lockStatement = "SELECT pg_advisory_xact_lock(1330862414, hashtext($1))"

    /// The schema's lock taken shared: confined writers run beside each other, never beside
    /// an unconfined one.
    static let sharedLockStatement = "SELECT pg_advisory_xact_lock_shared(1330862414, hashtext($1))"

    /// One table's lock, in the single-`bigint` key space (which PostgreSQL keeps apart from
    /// the two-`integer` one the schema's lock uses).
    static let tableLockStatement = "SELECT pg_advisory_xact_lock($1)"

    /// The key of `table`'s lock in `schema`: 64-bit FNV-1a over both names (NUL-separated,
    /// so no two pairs share a spelling). Two tables whose keys collided would only be
    /// written one after another.
    static func tableLockKey(schema: String, table: String) -> Int64 {
        Int64(bitPattern: FNV1a.hash64(schema.utf8 + [0] + table.utf8))
    }

    /// The statements that open a transaction of `kind` in `schema` and take its locks, sent
    /// in one round trip. Table locks are taken in ascending key order, the same in every
    /// transaction.
    static func openingStatements(_ kind: TransactionKind, schema: String) -> [PGStatement] {
        switch kind {
        case .read:
            return [PGStatement("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", prepare: false)]
        case .write:
            return [PGStatement("BEGIN ISOLATION LEVEL READ COMMITTED", prepare: false),
                    PGStatement(lockStatement, [.text(schema)])]
        case .confined(let tables):
            let keys = Set(tables.map { tableLockKey(schema: schema, table: $0) }).sorted()
            return [PGStatement("BEGIN ISOLATION LEVEL READ COMMITTED", prepare: false),
                    PGStatement(sharedLockStatement, [.text(schema)])]
                + keys.map { PGStatement(tableLockStatement, [.int64($0)]) }
        }
    }

    /// What a transaction may do, and so which locks it takes.
    enum TransactionKind {
        /// A read-only snapshot; no lock.
        case read
        /// A writer alone in the schema.
        case write
        /// A writer beside others whose tables differ.
        case confined(Set<String>)

        var writable: Bool {
            if case .read = self { return false }
            return true
        }
    }

    /// The password a connection string carries, to keep it out of messages.
    static func password(in connectionString: String) throws -> String? {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &errorMessage) else {
            if let errorMessage { PQfreemem(errorMessage) }
            throw SyncError(.invalidStoreURL, "malformed PostgreSQL connection string")
        }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "password", let value = option.pointee.val { return String(cString: value) }
            option += 1
        }
        return nil
    }

    /// Creates the table, or migrates it to a changed schema in one transaction: a schema
    /// with the same columns only updates the catalog and the indexes; otherwise every row is
    /// copied, page by page, into a table of the new layout after checking it fits the newly
    /// declared field types. Throws ``SyncError/Code/invalidName``,
    /// ``SyncError/Code/schemaMismatch`` (nothing changed) or ``SyncError/Code/storeClosed``.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        let quoted = quotedSchema
        _ = try await transaction(.write) { transaction in
            let connection = try transaction.live()
            let name = PGParameter.bytes(Array(schema.name.utf8))
            let found = try connection.execute("SELECT \"num\", \"schema\" FROM \(quoted).\"__osync_catalog\" WHERE \"name\" = $1", [name])
            guard found.count == 1, let number = found.int64(0, 0) else {
                let inserted = try connection.execute(
                    "INSERT INTO \(quoted).\"__osync_catalog\" (\"name\", \"schema\") VALUES ($1, $2) RETURNING \"num\"",
                    [name, .bytes(ValueCodec.encode(schema))])
                let table = PGTable(number: inserted.int64(0, 0) ?? 0, schema: schema, quotedSchema: quoted)
                try connection.execute(table.createTableSQL)
                for statement in table.createIndexSQL(quotedSchema: quoted) { try connection.execute(statement) }
                return 0
            }
            let existing = try found.withBytes(0, 1) { try ValueCodec.decodeSchema($0) }
            if existing == schema { return 0 }
            let old = PGTable(number: number, schema: existing, quotedSchema: quoted)
            let sameColumns = existing.fields.count == schema.fields.count
                && zip(existing.fields, schema.fields).allSatisfy { $0.type == $1.type && $0.name.utf8.elementsEqual($1.name.utf8) }
            var new = PGTable(number: number, schema: schema, quotedSchema: quoted)
            if sameColumns {
                for position in old.createIndexSQL(quotedSchema: quoted).indices {
                    try connection.execute("DROP INDEX IF EXISTS \(quoted).\"\(PGTable.indexName(number, position))\"")
                }
            } else {
                let next = try connection.execute("SELECT nextval(pg_get_serial_sequence($1, 'num'))",
                                                  [.text("\(quoted).\"__osync_catalog\"")])
                new = PGTable(number: next.int64(0, 0) ?? 0, schema: schema, quotedSchema: quoted)
                try connection.execute(new.createTableSQL)
                try PostgreSQLStore.copyRows(from: old, to: new, connection)
                try connection.execute("DROP TABLE \(old.sqlName)")
            }
            for statement in new.createIndexSQL(quotedSchema: quoted) { try connection.execute(statement) }
            try connection.execute("UPDATE \(quoted).\"__osync_catalog\" SET \"num\" = $2, \"schema\" = $3 WHERE \"name\" = $1",
                                   [name, .int64(new.number), .bytes(ValueCodec.encode(schema))])
            return 0
        }
    }

    /// Copies every row of `old` into `new`, a thousand at a time in id order (memory stays
    /// bounded by the page), checking each fits the new schema's declared types.
    private static func copyRows(from old: PGTable, to new: PGTable, _ connection: PGConnection) throws {
        var after: [UInt8]?
        while true {
            let page = try after.map {
                try connection.execute("SELECT \(old.selectList) FROM \(old.sqlName) WHERE \"id\" > $1 ORDER BY \"id\" LIMIT 1000", [.bytes($0)])
            } ?? connection.execute("SELECT \(old.selectList) FROM \(old.sqlName) ORDER BY \"id\" LIMIT 1000")
            if page.count == 0 { return }
            var records: [Record] = []
            records.reserveCapacity(page.count)
            for row in 0..<page.count {
                let record = try old.decode(page, row)
                for field in new.schema.fields where !field.type.accepts(record[field.name]) {
                    throw SyncError(.schemaMismatch, "table '\(new.schema.name)': record '\(record.id)' has a \(record[field.name].kind.rawValue) in field '\(field.name)', which the new schema declares \(field.type.rawValue); nothing was changed")
                }
                records.append(record)
            }
            try new.upsert(records, on: connection)
            after = page.bytes(page.count - 1, 0)
        }
    }

    /// Runs `body` in a `REPEATABLE READ READ ONLY` transaction: one consistent snapshot. With
    /// ``Options/replicas``, on a replica that has replayed every commit the primary had when
    /// the read began (one round trip to the primary first), else on the primary; `body` may
    /// run twice (a replica that failed part-way). Rethrows what `body` throws; throws
    /// ``SyncError/Code/storeClosed`` after ``close()`` and ``SyncError/Code/transient`` when
    /// the server cannot be reached.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        if let replicas {
            // The primary's WAL position first (see ``Options/replicas``); a primary that
            // cannot tell it (a lost connection) is left to the path that reconnects.
            let position = try? await pool.run { connection, _ in PGReplicas.position(try connection.execute([PGReplicas.positionStatement])) }
            if let position = position ?? nil {
                if let value = try await replicas.read(reaching: position, schema: quotedSchema, { transaction, _ in try body(transaction) }) {
                    return value
                }
            } else {
                try Task.checkCancellation()
                replicas.leftToPrimaryWithoutTrying()
            }
        }
        return try await transaction(.read) { try body($0) }
    }

    /// Runs `body` in a write transaction holding the schema's advisory lock: committed when
    /// it returns, rolled back when it throws. When the connection is lost before commit the
    /// body runs again on a fresh connection (up to ``Options/reconnectAttempts`` times).
    /// Rethrows what `body` throws; throws ``SyncError/Code/transient`` when the server cannot
    /// be reached or the connection is lost during commit, and ``SyncError/Code/storeClosed``
    /// after ``close()``.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await transaction(.write) { try body($0) }
    }

    /// Runs `body` in a write transaction that holds the schema's lock shared and each of
    /// `tables`' locks exclusive (see ``LocalStore/write(confinedTo:_:)``): it runs beside
    /// confined writers of other tables, after those of its own and apart from unconfined
    /// ones. Throws as ``write(_:)`` does.
    public func write<T: Sendable>(confinedTo tables: Set<String>,
                                   _ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await transaction(.confined(tables)) { try body($0) }
    }

    /// Waits for running transactions and closes every connection. Later calls throw
    /// ``SyncError/Code/storeClosed``; closing twice is harmless.
    public func close() async throws {
        await notificationHub.close()
        await pool.shutDown()
        await replicas?.shutDown()
    }

    /// `COMMIT`, after lifting the statement timeout for a writer (whether the store's option,
    /// the role's or the database's set it): a `COMMIT` waiting for a synchronous standby that
    /// the timeout cancelled would report success with only a warning, committed here but not
    /// on the standby, and a failover would then lose a write the client was told is applied.
    /// Both go in one round trip.
    static let commitStatements = [PGStatement("SET LOCAL statement_timeout = 0", prepare: false), PGStatement("COMMIT", prepare: false)]

    /// The connection was lost before `COMMIT`: the server rolled the transaction back.
    private struct ConnectionLost: Error { var underlying: any Error }

    private func transaction<T: Sendable>(_ kind: TransactionKind,
                                          _ body: @escaping @Sendable (PGTransaction) throws -> T) async throws -> T {
        let quoted = quotedSchema, writable = kind.writable
        let opening = PostgreSQLStore.openingStatements(kind, schema: options.schema)
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await pool.run { connection, worker in
                    func lost(_ error: any Error) -> any Error { connection.isAlive ? error : ConnectionLost(underlying: error) }
                    do {
                        _ = try connection.execute(opening)
                    } catch {
                        // A failure part-way (a lock refused by `statement_timeout`) leaves
                        // the transaction open and aborted.
                        if connection.isAlive { _ = try? connection.execute("ROLLBACK") }
                        throw lost(error)
                    }
                    let transaction = PGTransaction(connection: connection, queueKey: worker.queueKey,
                                                    schema: quoted, writable: writable)
                    let value: T
                    do {
                        value = try body(transaction)
                        try transaction.flush()
                        transaction.end()
                    } catch {
                        transaction.end()
                        if connection.isAlive { _ = try? connection.execute("ROLLBACK") }
                        throw lost(error)
                    }
                    do {
                        try connection.execute(writable ? PostgreSQLStore.commitStatements : [PGStatement("COMMIT", prepare: false)])
                    } catch {
                        if connection.isAlive { _ = try? connection.execute("ROLLBACK") }
                        throw SyncError(.transient, "\(connection.endpoint): the connection failed during COMMIT; the transaction may or may not have been applied")
                    }
                    return value
                }
            } catch let error as ConnectionLost {
                if attempt > max(0, options.reconnectAttempts) { throw error.underlying }
            }
        }
    }
}
