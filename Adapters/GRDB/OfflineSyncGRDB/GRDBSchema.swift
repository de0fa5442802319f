import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit

/// `defineTable` for the app's tables: adopts the app's table (adding a column for a declared
/// field it lacks) or creates it, then installs the side table, indexes and capture triggers;
/// a changed schema migrates the rows in the same transaction.
enum GRDBSchema {
    struct CatalogEntry {
        let number: Int64
        let name: String
        let bytes: [UInt8]
    }

    static func catalog(_ sql: SQLiteEmbeddedTables) throws -> [CatalogEntry] {
        var entries: [CatalogEntry] = []
        try sql.rows("SELECT \"num\", \"name\", \"schema\" FROM \(GRDBName.catalog)") { row in
            guard case .int(let number) = row[0], case .text(let name) = row[1], case .blob(let bytes) = row[2] else {
                throw SyncError(.corrupted, "\(GRDBName.catalog) holds a row of the wrong types")
            }
            entries.append(CatalogEntry(number: number, name: name, bytes: bytes))
        }
        return entries
    }

    /// Checks the names SQLite or the adapter reserve, and the field the `id` column takes.
    static func validateNames(_ schema: TableSchema) throws {
        let folded = GRDBName.folded(schema.name)
        if folded.starts(with: Array("sqlite_".utf8)) {
            throw SyncError(.invalidName, "table name '\(schema.name)' starts with 'sqlite_', which SQLite reserves")
        }
        for field in schema.fields where GRDBName.folded(field.name) == Array("id".utf8) {
            throw SyncError(.invalidName, "table '\(schema.name)': field '\(field.name)' would share the 'id' column (SQLite column names ignore letter case)")
        }
    }

    /// Creates or migrates `schema`'s app table inside `txn`, and puts the result in its catalog snapshot.
    static func define(_ schema: TableSchema, in txn: GRDBWriteTransaction, systemNames: [String],
                       files: (any AttachmentFileStore)?) throws {
        try validateNames(schema)
        let sql = txn.sql
        let bytes = ValueCodec.encode(schema)
        let entries = try catalog(sql)
        if let existing = entries.first(where: { $0.name.utf8.elementsEqual(schema.name.utf8) }) {
            let table = GRDBTypedTable(number: existing.number, schema: schema, schemaBytes: bytes)
            let old = GRDBTypedTable(number: existing.number, schema: try ValueCodec.decodeSchema(existing.bytes),
                                     schemaBytes: existing.bytes)
            try checkColumns(of: old, sql)
            if existing.bytes != bytes {
                try migrate(from: old, to: table, txn, files: files)
                try sql.execute("UPDATE \(GRDBName.catalog) SET \"schema\" = ?1 WHERE \"num\" = ?2",
                                [.blob(bytes), .int(existing.number)])
            } else {
                // Unchanged: an app migration may still have rebuilt the table (create, copy,
                // drop, rename), which drops its triggers and indexes: those missing come back.
                for index in table.indexes { try sql.executeUncached(index.sql) }
                try GRDBCapture.installTriggers(table, sql)
            }
            txn.setTyped(table)
            return
        }
        for other in entries.map(\.name) + systemNames where collide(other, schema.name) {
            throw SyncError(.invalidName, "table name '\(schema.name)' differs only in letter case from the existing table '\(other)'")
        }
        try sql.execute("INSERT INTO \(GRDBName.catalog) (\"name\", \"schema\") VALUES (?1, ?2)", [.text(schema.name), .blob(bytes)])
        guard case .int(let number)? = try sql.scalar("SELECT \"num\" FROM \(GRDBName.catalog) WHERE \"name\" = ?1",
                                                     [.text(schema.name)]) else {
            throw SyncError(.storageFailure, "the table '\(schema.name)' was not entered in the catalog")
        }
        let table = GRDBTypedTable(number: number, schema: schema, schemaBytes: bytes)
        let existingColumns = try columns(of: table, sql)
        if let existingColumns {
            try adopt(table, columns: existingColumns, sql)
        } else {
            try sql.executeUncached(table.createTableSQL)
        }
        try sql.executeUncached(table.createMetaSQL)
        for index in table.indexes { try sql.executeUncached(index.sql) }
        try GRDBCapture.installTriggers(table, sql)
        if existingColumns != nil { try GRDBCapture.captureAll(table, sql) }
        txn.setTyped(table)
    }

    /// Refuses a synced table whose app table lost a column the engine reads: the app renamed
    /// or dropped it with its own SQL. The engine's schema is left as it is, so the writes
    /// queued under it are kept.
    private static func checkColumns(of table: GRDBTypedTable, _ sql: SQLiteEmbeddedTables) throws {
        let help = "rename or drop a synced column with Database.renameSyncedColumn(_:to:inTable:) or dropSyncedColumn(_:fromTable:); the writes queued under the old schema are kept"
        guard let present = try columns(of: table, sql) else {
            throw SyncError(.schemaMismatch, "the app's table '\(table.schema.name)', which the engine syncs, is gone; \(help)")
        }
        if let missing = table.schema.fields.first(where: { present[GRDBName.folded($0.name)] == nil }) {
            throw SyncError(.schemaMismatch, "the app's table '\(table.schema.name)' has no column '\(missing.name)', which the engine syncs; \(help)")
        }
    }

    /// The app table's columns (folded names) and whether `id` is its key; `nil` when the
    /// database has no such table.
    private static func columns(of table: GRDBTypedTable, _ sql: SQLiteEmbeddedTables) throws -> [[UInt8]: (pk: Int64, notNull: Bool)]? {
        guard try sql.scalar("SELECT 1 FROM sqlite_master WHERE \"type\" = 'table' AND \"name\" = ?1 COLLATE NOCASE",
                             [.text(table.schema.name)]) != nil else { return nil }
        var columns: [[UInt8]: (pk: Int64, notNull: Bool)] = [:]
        try sql.rows("SELECT \"name\", \"pk\", \"notnull\" FROM pragma_table_info(?1)", [.text(table.schema.name)]) { row in
            guard case .text(let name) = row[0], case .int(let pk) = row[1], case .int(let notNull) = row[2] else { return }
            columns[GRDBName.folded(name)] = (pk, notNull != 0)
        }
        return columns
    }

    /// Takes over a table the app created: it must have an `id` column that is its primary key
    /// (alone) or unique; a declared field without a column gets one (nullable, typed).
    private static func adopt(_ table: GRDBTypedTable, columns: [[UInt8]: (pk: Int64, notNull: Bool)],
                              _ sql: SQLiteEmbeddedTables) throws {
        guard let id = columns[Array("id".utf8)] else {
            throw SyncError(.schemaMismatch, "the app's table '\(table.schema.name)' has no 'id' column (a synced table's key is a text column named 'id')")
        }
        let keyColumns = columns.values.filter { $0.pk > 0 }.count
        let uniqueOnId = try sql.scalar("""
            SELECT 1 FROM pragma_index_list(?1) AS l WHERE l."unique" = 1 AND \
            (SELECT count(*) FROM pragma_index_info(l."name")) = 1 AND \
            (SELECT "name" FROM pragma_index_info(l."name")) = 'id' COLLATE NOCASE
            """, [.text(table.schema.name)]) != nil
        guard (id.pk == 1 && keyColumns == 1) || uniqueOnId else {
            throw SyncError(.schemaMismatch, "the app's table '\(table.schema.name)': its 'id' column must be its primary key or unique")
        }
        for (field, column) in zip(table.schema.fields, table.columns) where columns[GRDBName.folded(field.name)] == nil {
            try sql.executeUncached("ALTER TABLE \(table.sqlName) ADD COLUMN \(column) \(GRDBColumnCodec.sqlType(field.type))")
        }
    }

    /// Moves every row to the new schema: a newly declared field takes its column (added when
    /// missing) and the value the row kept as an undeclared field; a field no longer declared
    /// keeps its value as an undeclared one (its column is the app's, left as it is); a
    /// changed type is checked against every value (``SyncError/Code/schemaMismatch``, and the
    /// transaction changes nothing). Indexes and triggers are made anew.
    private static func migrate(from old: GRDBTypedTable, to new: GRDBTypedTable, _ txn: GRDBWriteTransaction,
                                files: (any AttachmentFileStore)?) throws {
        let sql = txn.sql
        let existing = try columns(of: new, sql) ?? [:]
        for (field, column) in zip(new.schema.fields, new.columns) where existing[GRDBName.folded(field.name)] == nil {
            try sql.executeUncached("ALTER TABLE \(new.sqlName) ADD COLUMN \(column) \(GRDBColumnCodec.sqlType(field.type))")
        }
        if old.schema.fields != new.schema.fields || old.schema.undeclaredFields != new.schema.undeclaredFields {
            try rewriteRows(from: old, to: new, txn, files: files)
        }
        for name in old.indexNames { try sql.executeUncached("DROP INDEX IF EXISTS \(GRDBName.quote(name))") }
        for index in new.indexes { try sql.executeUncached(index.sql) }
        try GRDBCapture.dropTriggers(old.number, sql)
        try GRDBCapture.installTriggers(new, sql)
    }

    /// Writes every row the engine knows in the new layout. A newly declared field takes the
    /// value the app's column holds (its migration added and filled it) or else the one the
    /// row kept as an undeclared field; a value the app put in the column is the app's
    /// write, queued as an update of that field (folded into a pending insert or update).
    private static func rewriteRows(from old: GRDBTypedTable, to new: GRDBTypedTable, _ txn: GRDBWriteTransaction,
                                    files: (any AttachmentFileStore)?) throws {
        let sql = txn.sql
        let added = zip(new.schema.fields, new.columns).filter { old.layout.position(of: $0.0.name) == nil }
        let addedSelect = added.isEmpty ? nil
            : "SELECT " + added.map(\.1).joined(separator: ", ") + " FROM \(new.sqlName) WHERE \"id\" = ?1"
        var ids: [String] = []
        try sql.rows("SELECT \"id\" FROM \(new.metaName)") { row in
            if case .text(let id) = row[0] { ids.append(id) }
        }
        var changes: [CapturedChange] = []
        for id in ids {
            var found: Record?
            try sql.rows(old.selectFrom + " WHERE t.\"id\" = ?1", [.text(id)]) { found = try old.decode($0) }
            guard var record = found else { continue }
            var changed: [String] = []
            if let addedSelect {
                try sql.rows(addedSelect, [.text(id)]) { columns in
                    for ((field, _), stored) in zip(added, columns) {
                        let value = try GRDBColumnCodec.decode(stored, as: field.type, table: new.schema.name, id: id, field: field.name)
                        guard !value.isNull, value != record[field.name] else { continue }
                        record.fields[field.name] = value
                        changed.append(field.name)
                    }
                }
            }
            for field in new.schema.fields where !field.type.accepts(record[field.name]) {
                throw SyncError(.schemaMismatch, "table '\(new.schema.name)': a record holds a \(record[field.name].kind.rawValue) in field '\(field.name)', which the new schema declares \(field.type.rawValue); nothing was changed")
            }
            let (row, meta) = try new.bindings(for: record)
            try sql.execute(new.upsertSQL, row)
            try sql.execute(new.metaUpsertSQL, meta)
            if !changed.isEmpty {
                changes.append(CapturedChange(table: new.schema.name, itemId: id, kind: .update,
                                              item: Record(id: id, fields: record.fields), baseVersion: record.version,
                                              changedFields: changed))
            }
        }
        // A value the migration wrote that cannot be queued (a malformed attachment
        // reference) holds back its row's write, as a captured write's would.
        let refused = try CapturedChange.queue(changes, in: txn, files: files)
        try GRDBCapture.noteRefusals(refused, of: new, unknown: [], sql)
    }

    /// Whether two table names would name the same SQLite table or differ only in letter case
    /// (the SQLite adapter's rule, so a bookkeeping table and an app table never clash).
    static func collide(_ a: String, _ b: String) -> Bool { SQLiteName.collide(a, b) }
}
