import GRDB
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit

/// Renaming and dropping a synced table's column in the app's own migration: the same
/// `ALTER TABLE` the app would write, plus what it means for the sync engine, in the same
/// transaction.
///
/// ```swift
/// migrator.registerMigration("v2") { db in
///     try db.renameSyncedColumn("title", to: "name", inTable: "todo")
/// }
/// ```
extension Database {
    /// Renames `column` of the synced table `table` to `newName`, and every write still queued
    /// under the old name with it: a write made offline before the app updated is pushed
    /// under the new name. The engine's schema of the table, its side rows, its indexes and
    /// its triggers follow, so `defineTable` with the new schema finds nothing left to migrate.
    ///
    /// Call it in place of `alter(table:) { $0.rename(column:to:) }`. When the app already
    /// renamed the column with its own SQL, it renames only what the engine keeps. On a
    /// table the engine does not sync (or a column that is not a declared field), it is the
    /// plain `ALTER TABLE … RENAME COLUMN`.
    ///
    /// Throws ``SyncError/Code/invalidName`` when `newName` is not a field name the engine
    /// accepts or is taken, and ``SyncError/Code/schemaMismatch`` when a record keeps an
    /// undeclared field named `newName` or a queued write holds both names; a failure changes
    /// nothing.
    public func renameSyncedColumn(_ column: String, to newName: String, inTable table: String) throws {
        try inSavepoint {
            try GRDBSyncedColumns.rename(column, to: newName, inTable: table, self)
            return .commit
        }
    }

    /// Drops `column` from the synced table `table`: the engine stops declaring the field
    /// (its values stay on the server and in other devices' stores) and its triggers and
    /// indexes are rebuilt without it. Call it in place of
    /// `alter(table:) { $0.drop(column:) }`, which SQLite refuses while the capture triggers
    /// read the column.
    ///
    /// A write queued offline that carries the field would have nowhere to go after the
    /// drop: while one is queued, the drop is refused with
    /// ``SyncError/Code/pendingOperations`` and nothing changes. Push first (or, to move the
    /// field to another table, copy the values there and drop the column once the queue holds
    /// no write of it). On a table the engine does not sync, it is the plain
    /// `ALTER TABLE … DROP COLUMN`.
    public func dropSyncedColumn(_ column: String, fromTable table: String) throws {
        try inSavepoint {
            try GRDBSyncedColumns.drop(column, fromTable: table, self)
            return .commit
        }
    }
}

/// The work of ``GRDB/Database/renameSyncedColumn(_:to:inTable:)`` and
/// ``GRDB/Database/dropSyncedColumn(_:fromTable:)``, on the SQLite adapter's access to the
/// app's connection.
enum GRDBSyncedColumns {
    static func rename(_ column: String, to newName: String, inTable tableName: String, _ db: Database) throws {
        try withSynced(tableName, db) { sql, table in
            guard let table, let position = table.schema.position(ofField: column) else {
                try sql.executeUncached("ALTER TABLE \(GRDBName.quote(tableName)) RENAME COLUMN \(GRDBName.quote(column)) TO \(GRDBName.quote(newName))")
                return
            }
            var schema = table.schema
            if let other = schema.fields.firstIndex(where: { GRDBName.folded($0.name) == GRDBName.folded(newName) }), other != position {
                throw SyncError(.invalidName, "table '\(tableName)' already has a field '\(schema.fields[other].name)'")
            }
            schema.fields[position].name = newName
            schema.indexes = schema.indexes.map { IndexDefinition($0.fields.map { $0 == column ? newName : $0 }) }
            try schema.validate()
            try GRDBSchema.validateNames(schema)
            let columns = try appColumns(tableName, sql)
            if !columns.contains(GRDBName.folded(newName)) || GRDBName.folded(newName) == GRDBName.folded(column) {
                guard columns.contains(GRDBName.folded(column)) else {
                    throw SyncError(.schemaMismatch, "the app's table '\(tableName)' has no column '\(column)'")
                }
                try sql.executeUncached("ALTER TABLE \(table.sqlName) RENAME COLUMN \(GRDBName.quote(column)) TO \(GRDBName.quote(newName))")
            } else if columns.contains(GRDBName.folded(column)) {
                throw SyncError(.invalidName, "the app's table '\(tableName)' has columns '\(column)' and '\(newName)' both")
            }
            try renameInSideRows(column, to: newName, of: table, sql)
            try sql.write { system in _ = try QueuedFieldChanges.rename(column, to: newName, inTable: tableName, in: system) }
            try replace(table, with: schema, sql)
        }
    }

    static func drop(_ column: String, fromTable tableName: String, _ db: Database) throws {
        try withSynced(tableName, db) { sql, table in
            guard let table, let position = table.schema.position(ofField: column) else {
                try sql.executeUncached("ALTER TABLE \(GRDBName.quote(tableName)) DROP COLUMN \(GRDBName.quote(column))")
                return
            }
            let carrying = try sql.read { system in try QueuedFieldChanges.count(carrying: column, inTable: tableName, in: system) }
            guard carrying == 0 else {
                throw SyncError(.pendingOperations, "\(carrying) write(s) queued on table '\(tableName)' carry field '\(column)': push them before dropping the column")
            }
            // The notes the triggers took name fields by position: those after the dropped
            // one move down a place. Bit 62 stands for every position from 62 on, so when it
            // was set it stays set too (fields past 62 keep sharing it; the field that moves to
            // 61 is reported as well, which may report one field more, never one less).
            if position < 62 {
                let below = (Int64(1) << Int64(position)) - 1, shared = Int64(1) << 62
                try sql.execute("""
                    UPDATE \(GRDBName.captured) SET "changed" = ("changed" & \(below)) \
                    | (("changed" >> \(position + 1)) << \(position)) | ("changed" & \(shared)) \
                    WHERE "tbl" = ?1 AND "changed" >= 0
                    """, [.int(table.number)])
            }
            var schema = table.schema
            schema.fields.remove(at: position)
            schema.indexes = schema.indexes.filter { !$0.fields.contains(column) }
            try GRDBCapture.dropTriggers(table.number, sql)
            for name in table.indexNames { try sql.executeUncached("DROP INDEX IF EXISTS \(GRDBName.quote(name))") }
            if try appColumns(tableName, sql).contains(GRDBName.folded(column)) {
                try sql.executeUncached("ALTER TABLE \(table.sqlName) DROP COLUMN \(GRDBName.quote(column))")
            }
            try replace(table, with: schema, sql)
        }
    }

    /// Runs `body` with SQL access on `db`'s connection and the synced table named exactly
    /// `name` (`nil` when the database has no engine catalog or the table is not in it).
    private static func withSynced(_ name: String, _ db: Database,
                                   _ body: (SQLiteEmbeddedTables, GRDBTypedTable?) throws -> Void) throws {
        guard let handle = db.sqliteConnection else { throw SyncError(.storeClosed, "the GRDB database is closed") }
        let sql = SQLiteEmbeddedTables(handle: handle, path: "")
        defer { sql.close() }
        var table: GRDBTypedTable?
        if try sql.scalar("SELECT 1 FROM sqlite_master WHERE \"type\" = 'table' AND \"name\" = '__osync_grdb_tables'") != nil,
           let entry = try GRDBSchema.catalog(sql).first(where: { $0.name.utf8.elementsEqual(name.utf8) }) {
            table = GRDBTypedTable(number: entry.number, schema: try ValueCodec.decodeSchema(entry.bytes), schemaBytes: entry.bytes)
        }
        try body(sql, table)
        db.clearSchemaCache()
    }

    /// The app table's column names, folded.
    private static func appColumns(_ table: String, _ sql: SQLiteEmbeddedTables) throws -> Set<[UInt8]> {
        var names = Set<[UInt8]>()
        try sql.rows("SELECT \"name\" FROM pragma_table_info(?1)", [.text(table)]) { row in
            if case .text(let name) = row[0] { names.insert(GRDBName.folded(name)) }
        }
        return names
    }

    /// Renames the field in the side rows' exact values, and refuses when a record keeps an
    /// undeclared field of the new name (the declared field would hide it).
    private static func renameInSideRows(_ old: String, to new: String, of table: GRDBTypedTable, _ sql: SQLiteEmbeddedTables) throws {
        var rewritten: [(id: String, exact: [UInt8])] = []
        try sql.rows("SELECT \"id\", \"extra\", \"exact\" FROM \(table.metaName) WHERE \"extra\" IS NOT NULL OR \"exact\" IS NOT NULL") { row in
            guard case .text(let id) = row[0] else { return }
            if case .blob(let bytes) = row[1], case .object(let extra) = try ValueCodec.decode(bytes), extra[new] != nil {
                throw SyncError(.schemaMismatch, "table '\(table.schema.name)': record '\(id)' keeps an undeclared field '\(new)'; renaming '\(old)' to it would hide it")
            }
            if case .blob(let bytes) = row[2], case .object(var exact) = try ValueCodec.decode(bytes), let value = exact[old] {
                exact[old] = nil
                exact[new] = value
                rewritten.append((id, ValueCodec.encodeObject(distinct: exact.map { ($0.key, $0.value) })))
            }
        }
        for (id, exact) in rewritten {
            try sql.execute("UPDATE \(table.metaName) SET \"exact\" = ?1 WHERE \"id\" = ?2", [.blob(exact), .text(id)])
        }
    }

    /// Stores `schema` as the table's definition and makes its indexes and triggers anew.
    private static func replace(_ table: GRDBTypedTable, with schema: TableSchema, _ sql: SQLiteEmbeddedTables) throws {
        let bytes = ValueCodec.encode(schema)
        try sql.execute("UPDATE \(GRDBName.catalog) SET \"schema\" = ?1 WHERE \"num\" = ?2", [.blob(bytes), .int(table.number)])
        let updated = GRDBTypedTable(number: table.number, schema: schema, schemaBytes: bytes)
        try GRDBCapture.dropTriggers(table.number, sql)
        for name in table.indexNames { try sql.executeUncached("DROP INDEX IF EXISTS \(GRDBName.quote(name))") }
        for index in updated.indexes { try sql.executeUncached(index.sql) }
        try GRDBCapture.installTriggers(updated, sql)
    }
}
