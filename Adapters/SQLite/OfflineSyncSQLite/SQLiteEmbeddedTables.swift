import COfflineSyncSQLite3
import OfflineSync
import OfflineSyncStoreKit

/// This adapter's tables (catalog, layout, statements, checksums) inside a database another
/// library opened and owns — an app's GRDB database, where the GRDB adapter keeps the sync
/// bookkeeping (`__operations`, `__config`…) this way beside the app's own tables.
///
/// Works on the owner's connection handle, inside the transaction the owner began: nothing
/// here begins, commits or closes anything of the owner's. Both libraries must link the same
/// SQLite (two copies in one process would each keep their own POSIX locks and corrupt the
/// file); the GRDB adapter and this one both link the system's `libsqlite3`.
///
/// One thread at a time: the thread the owner lends its connection on.
package final class SQLiteEmbeddedTables: @unchecked Sendable {
    // @unchecked Sendable: the reference may be kept across the owner's accesses to its
    // connection (GRDB's writer), but every call runs inside one of them, which the owner
    // serializes on its connection's queue.
    private let connection: SQLiteConnection

    /// Tables on `handle`, a connection to the database at `path` (for messages).
    package init(handle: OpaquePointer, path: String) {
        connection = SQLiteConnection.borrowing(handle, path: path)
    }

    /// Whether this wraps `handle`.
    package func wraps(_ handle: OpaquePointer) -> Bool {
        (try? connection.handle()) == handle
    }

    /// Creates the catalog if the database has none. Call inside a write transaction.
    package func prepareCatalog() throws {
        try connection.executeUncached("CREATE TABLE IF NOT EXISTS \(SQLiteStoreFile.catalogDefinition)")
    }

    /// Creates or migrates a table as ``SQLiteStore/defineTable(_:)`` does, in a savepoint of
    /// the owner's write transaction.
    package func define(_ schema: TableSchema) throws {
        try schema.validate()
        try SQLiteName.validateTableName(schema.name)
        try SQLiteSchemaDefinition.define(schema, on: connection)
    }

    /// The names of the tables this catalog holds.
    package func tableNames() throws -> [String] {
        try SQLiteSchemaDefinition.catalogEntries(connection).map(\.name)
    }

    /// Runs `body` with a read transaction over the owner's open transaction; the transaction
    /// refuses every call once `body` returns.
    package func read<T>(_ body: (any LocalReadTransaction) throws -> T) throws -> T {
        let transaction = SQLiteReadTransaction(connection: connection)
        defer { transaction.end() }
        return try body(transaction)
    }

    /// Runs `body` with a write transaction over the owner's open write transaction.
    package func write<T>(_ body: (any LocalWriteTransaction) throws -> T) throws -> T {
        let transaction = SQLiteWriteTransaction(connection: connection)
        defer { transaction.end() }
        return try body(transaction)
    }

    // MARK: Plain SQL, for the owner's own tables beside these

    /// Runs `sql` (one statement, prepared once and cached) to completion with `bindings`,
    /// bound exactly (a text's and a blob's length given, so a NUL byte is kept); returns the
    /// rows it changed.
    @discardableResult
    package func execute(_ sql: String, _ bindings: [SQLiteValue] = []) throws -> Int {
        try connection.execute(sql, bindings)
        return connection.changes
    }

    /// Runs a one-off statement (DDL) without caching it.
    package func executeUncached(_ sql: String) throws {
        try connection.executeUncached(sql)
    }

    /// Runs `sql` with `bindings` and hands each row's columns to `row`, as SQLite stores them.
    package func rows(_ sql: String, _ bindings: [SQLiteValue] = [], _ row: ([SQLiteValue]) throws -> Void) throws {
        try connection.withStatement(sql, bindings) { statement in
            var columns: [SQLiteValue] = []
            while try statement.step() {
                columns.removeAll(keepingCapacity: true)
                for column in 0..<statement.columnCount { columns.append(try statement.value(column)) }
                try row(columns)
            }
        }
    }

    /// The first column of the first row `sql` returns, or `nil` for no row.
    package func scalar(_ sql: String, _ bindings: [SQLiteValue] = []) throws -> SQLiteValue? {
        try connection.scalar(sql, bindings)
    }

    /// Ends one of the owner's accesses: the statement cache is trimmed to its limit, as an
    /// own connection's is after each transaction.
    package func endAccess() {
        connection.trimStatementCache()
    }

    /// Finalizes the prepared statements; the handle stays open (its owner closes it).
    package func close() {
        connection.close(checkpoint: false)
    }
}
