import OfflineSync
import OfflineSyncStoreKit

/// `defineTable`: creates a table, or migrates it to a changed schema in one transaction.
enum SQLiteSchemaDefinition {
    /// Creates or migrates the table on the writer connection. Everything happens in one
    /// `BEGIN IMMEDIATE` transaction, so a failure (``SyncError/Code/schemaMismatch``,
    /// ``SyncError/Code/invalidName``…) changes nothing.
    static func define(_ schema: TableSchema, on connection: SQLiteConnection) throws {
        let bytes = ValueCodec.encode(schema)
        try connection.transaction(immediate: true) {
            let entries = try catalogEntries(connection)
            if let existing = entries.first(where: { $0.name.utf8.elementsEqual(schema.name.utf8) }) {
                if existing.bytes == bytes { return }
                let old = SQLiteTable(number: existing.number, schema: try ValueCodec.decodeSchema(existing.bytes),
                                    schemaBytes: existing.bytes)
                let new = SQLiteTable(number: existing.number, schema: schema, schemaBytes: bytes)
                if new.hasSameColumns(as: old) {
                    let indexBytes = { (info: SQLiteTable) in info.indexColumns.map { $0.map { Array($0.utf8) } } }
                    if indexBytes(new) != indexBytes(old) {
                        try dropIndexes(of: old, connection)
                        try createIndexes(of: new, connection)
                    }
                } else {
                    try rebuild(from: old, to: new, connection)
                    try createIndexes(of: new, connection)
                }
                try connection.execute("UPDATE \(SQLiteName.catalog) SET \"schema\" = ?1 WHERE \"num\" = ?2",
                                       [.blob(bytes), .int(existing.number)])
            } else {
                if let clash = entries.first(where: { SQLiteName.collide($0.name, schema.name) }) {
                    throw SyncError(.invalidName, "table name '\(schema.name)' differs only in letter case from the existing table '\(clash.name)'")
                }
                try connection.execute("INSERT INTO \(SQLiteName.catalog) (\"name\", \"schema\") VALUES (?1, ?2)",
                                       [.text(schema.name), .blob(bytes)])
                let info = SQLiteTable(number: connection.lastInsertRowID, schema: schema, schemaBytes: bytes)
                try connection.executeUncached(info.createTableSQL(named: info.sqlName))
                try createIndexes(of: info, connection)
            }
        }
    }

    struct CatalogEntry {
        let number: Int64
        let name: String
        let bytes: [UInt8]
    }

    static func catalogEntries(_ connection: SQLiteConnection) throws -> [CatalogEntry] {
        try connection.withStatement("SELECT \"num\", \"name\", \"schema\" FROM \(SQLiteName.catalog)") { statement in
            var entries: [CatalogEntry] = []
            while try statement.step() {
                entries.append(CatalogEntry(number: statement.int64(0), name: try statement.text(1), bytes: statement.blob(2)))
            }
            return entries
        }
    }

    /// Copies every row into a table of the new layout (undeclared values that the new schema
    /// declares move into their columns, values of fields it no longer declares move into
    /// `extra`), then replaces the old table with it.
    private static func rebuild(from old: SQLiteTable, to new: SQLiteTable, _ connection: SQLiteConnection) throws {
        try connection.executeUncached("DROP TABLE IF EXISTS \(SQLiteName.migrationTable)")
        try connection.executeUncached(new.createTableSQL(named: SQLiteName.migrationTable))
        let insert = new.insertSQL(into: SQLiteName.migrationTable)
        try connection.withStatement("SELECT \(old.selectList) FROM \(old.sqlName)") { rows in
            while try rows.step() {
                let record = try old.decodeRow(rows)
                for field in new.schema.fields where !field.type.accepts(record[field.name]) {
                    throw SyncError(.schemaMismatch, "table '\(new.schema.name)': a record holds a \(record[field.name].kind.rawValue) in field '\(field.name)', which the new schema declares \(field.type.rawValue); nothing was changed")
                }
                try connection.execute(insert, new.bindings(for: record))
            }
        }
        try connection.executeUncached("DROP TABLE \(old.sqlName)")
        try connection.executeUncached("ALTER TABLE \(SQLiteName.migrationTable) RENAME TO \(new.sqlName)")
    }

    private static func dropIndexes(of info: SQLiteTable, _ connection: SQLiteConnection) throws {
        for position in info.indexColumns.indices {
            try connection.executeUncached("DROP INDEX IF EXISTS \(SQLiteName.index(table: info.number, position: position))")
        }
    }

    private static func createIndexes(of info: SQLiteTable, _ connection: SQLiteConnection) throws {
        for index in info.createIndexSQL { try connection.executeUncached(index.sql) }
    }
}
