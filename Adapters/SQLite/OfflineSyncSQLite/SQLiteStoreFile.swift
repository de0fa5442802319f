import COfflineSyncSQLite3
import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// Checks an existing file before the adapter lets SQLite write to it, so a corrupt,
/// truncated, foreign or non-SQLite file is refused with a typed error and left untouched.
package enum SQLiteStoreFile {
    /// The 16-byte magic string at the start of every SQLite 3 database.
    static let magic: [UInt8] = Array("SQLite format 3".utf8) + [0]

    /// Reads the header of an existing, non-empty file: the magic (else
    /// ``SyncError/Code/notADatabase``), a valid page size, and — when the in-header page count
    /// is valid — a file at least that many pages long (else ``SyncError/Code/corrupted``),
    /// unless a non-empty `-wal` file lies beside it: a checkpoint interrupted by a crash may
    /// have written page 1 before the pages that lengthen the file, and SQLite completes it
    /// from the WAL (the read-only checks that follow still look at every page).
    /// A missing or empty file passes (SQLite treats it as a new database).
    package static func checkHeader(atPath path: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return }
        if isDirectory.boolValue { throw SyncError(.notADatabase, "'\(path)' is a directory, not a database file") }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw SyncError(.storageFailure, "cannot read '\(path)'")
        }
        defer { try? handle.close() }
        let size: UInt64
        let header: [UInt8]
        do {
            size = try handle.seekToEnd()
            if size == 0 { return }
            try handle.seek(toOffset: 0)
            header = [UInt8](try handle.read(upToCount: 100) ?? Data())
        } catch {
            throw SyncError(.storageFailure, "cannot read '\(path)': \(error.localizedDescription)")
        }
        let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? UInt64) ?? 0
        try checkHeader(header, fileSize: size, path: path, walPending: wal > 0)
    }

    /// The header checks on bytes already read (`header` is the file's first ≤ 100 bytes).
    static func checkHeader(_ header: [UInt8], fileSize size: UInt64, path: String, walPending: Bool = false) throws {
        if header.count < 100 || size < 100 {
            let comparable = min(header.count, magic.count)
            if comparable > 0, header.prefix(comparable).elementsEqual(magic.prefix(comparable)) {
                throw SyncError(.corrupted, "'\(path)' is a truncated SQLite database (\(size) bytes, shorter than its header)")
            }
            throw SyncError(.notADatabase, "'\(path)' is not a SQLite database (\(size) bytes, no SQLite header)")
        }
        guard header.prefix(16).elementsEqual(magic) else {
            throw SyncError(.notADatabase, "'\(path)' is not a SQLite database (no SQLite header)")
        }
        let rawPageSize = UInt64(header[16]) << 8 | UInt64(header[17])
        let pageSize: UInt64 = rawPageSize == 1 ? 65_536 : rawPageSize
        guard pageSize >= 512, pageSize <= 65_536, pageSize & (pageSize - 1) == 0 else {
            throw SyncError(.corrupted, "'\(path)' has an invalid page size in its SQLite header")
        }
        // The fields whose values the file format fixes (sqlite.org/fileformat2.html, 1.3):
        // SQLite refuses a file that breaks one with a generic error ("unsupported file
        // format"), which would otherwise surface as storageFailure, not as the damage it is.
        let schemaCookie = bigEndian32(header, 40), schemaFormat = bigEndian32(header, 44), encoding = bigEndian32(header, 56)
        let fixedFieldsHold = (1...2).contains(header[18]) && (1...2).contains(header[19])
            && header[21] == 64 && header[22] == 32 && header[23] == 32
            && ((1...4).contains(schemaFormat) || (schemaFormat == 0 && schemaCookie == 0))
            && (encoding <= 3) && header[72..<92].allSatisfy { $0 == 0 }
        guard fixedFieldsHold else {
            throw SyncError(.corrupted, "'\(path)' has a SQLite header whose fixed fields (format versions, payload fractions, schema format, text encoding, reserved bytes) hold values no SQLite writes")
        }
        let changeCounter = bigEndian32(header, 24)
        let pageCount = UInt64(bigEndian32(header, 28))
        let versionValidFor = bigEndian32(header, 92)
        if pageCount > 0, changeCounter == versionValidFor, size < pageCount * pageSize, !walPending {
            throw SyncError(.corrupted, "'\(path)' is truncated: \(size) bytes, but its header counts \(pageCount) pages of \(pageSize) bytes")
        }
        if size < pageSize {
            throw SyncError(.corrupted, "'\(path)' is truncated: \(size) bytes, shorter than one \(pageSize)-byte page")
        }
    }

    private static func bigEndian32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Opens an existing file read-only and checks that it is an OfflineSync store (or an empty
    /// database), that SQLite can read it, and — with `quickCheck` — that `PRAGMA quick_check`
    /// passes. Throws ``SyncError/Code/foreignDatabase``, ``SyncError/Code/notADatabase``,
    /// ``SyncError/Code/corrupted`` or ``SyncError/Code/unsupported`` (a newer format).
    static func probe(path: String, busyTimeoutMilliseconds: Int32, quickCheck: Bool) throws {
        let connection = try SQLiteConnection.open(path: path, flags: SQLITE_OPEN_READONLY,
                                             busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        defer { connection.close(checkpoint: false) }
        // One read transaction, so every check sees one snapshot: another process defining a
        // table between two of these reads (its catalog row and its table are one commit)
        // would otherwise look like a catalog row whose table is missing.
        try connection.transaction(immediate: false) {
            try probeSnapshot(connection, path: path, quickCheck: quickCheck)
        }
    }

    private static func probeSnapshot(_ connection: SQLiteConnection, path: String, quickCheck: Bool) throws {
        let objects = try integer(connection, "SELECT count(*) FROM sqlite_master")
        let applicationID = try integer(connection, "PRAGMA application_id")
        let userVersion = try integer(connection, "PRAGMA user_version")
        if applicationID == Int64(SQLiteStore.applicationID) {
            if userVersion > Int64(SQLiteStore.formatVersion) {
                throw SyncError(.unsupported, "'\(path)' is an OfflineSync store of a newer format (version \(userVersion))")
            }
        } else if applicationID != 0 || objects != 0 {
            throw SyncError(.foreignDatabase, "'\(path)' is a SQLite database of another application")
        }
        if applicationID == Int64(SQLiteStore.applicationID) {
            try verifySchema(connection, formatVersion: userVersion, path: path)
        }
        if quickCheck {
            let verdict = try pragmaVerdict(connection, "PRAGMA quick_check(1)")
            guard verdict == "ok" else {
                throw SyncError(.corrupted, "'\(path)' failed SQLite's integrity check: \(verdict)")
            }
        }
    }

    /// The catalog table's definition, after `CREATE TABLE`.
    static let catalogDefinition =
        "\(SQLiteName.catalog) (\"num\" INTEGER PRIMARY KEY, \"name\" TEXT NOT NULL UNIQUE, \"schema\" BLOB NOT NULL)"

    /// Checks that `sqlite_master` holds exactly the objects this adapter creates for the
    /// tables its catalog lists — the catalog, each table, each index, each primary key's
    /// automatic index — with exactly the definitions it writes (``SQLiteTable/createTableSQL(named:checksummed:)``,
    /// ``SQLiteTable/createIndexSQL``), and that every catalog row decodes to a schema of its own
    /// name. `PRAGMA quick_check` does not look inside the definitions, so without this a
    /// flipped bit in a column name would open as a store whose queries fail or, worse, read
    /// another column. Throws ``SyncError/Code/corrupted``, naming the first damaged object.
    /// Cheap: it reads `sqlite_master` and the catalog, never a table's rows.
    static func verifySchema(_ connection: SQLiteConnection, formatVersion: Int64, path: String) throws {
        // Compared byte for byte: two names or definitions that differ only in their Unicode
        // normalisation are different to SQLite.
        struct Object: Equatable {
            var type: ExactString
            var table: ExactString
            var sql: ExactString?
            init(type: String, table: String, sql: String?) {
                self.type = ExactString(type)
                self.table = ExactString(table)
                self.sql = sql.map(ExactString.init)
            }
        }
        let damaged = { (what: String) in SyncError(.corrupted, "'\(path)' has a damaged schema: \(what)") }
        var found: [ExactString: Object] = [:]
        try connection.withStatement("SELECT \"type\", \"name\", \"tbl_name\", \"sql\" FROM sqlite_master") { statement in
            while try statement.step() {
                let sql: String? = statement.columnType(3) == SQLITE_NULL ? nil : try statement.text(3)
                let name = try statement.text(1)
                guard found.updateValue(Object(type: try statement.text(0), table: try statement.text(2), sql: sql), forKey: ExactString(name)) == nil else {
                    throw damaged("two schema objects are named '\(name)'")
                }
            }
        }
        // `ANALYZE` (run by hand, say) adds statistics tables; they hold no data of ours.
        found = found.filter { !($0.key.value.hasPrefix("sqlite_stat") && $0.value.type.value == "table") }

        var expected: [ExactString: Object] = [:]
        let catalogName = SQLiteName.catalogName
        expected[ExactString(catalogName)] = Object(type: "table", table: catalogName, sql: "CREATE TABLE \(catalogDefinition)")
        expected[ExactString("sqlite_autoindex_\(catalogName)_1")] = Object(type: "index", table: catalogName, sql: nil)
        guard found[ExactString(catalogName)] == expected[ExactString(catalogName)] else {
            throw damaged(found[ExactString(catalogName)] == nil ? "the catalog table is missing" : "the catalog table's definition differs from the one this adapter writes")
        }
        // Every table is found by name through the catalog's unique index: a damaged entry
        // there would make a table vanish. The catalog is small, so SQLite's full check of it
        // (index entries against rows, which `quick_check` skips) costs next to nothing.
        let catalogVerdict = try pragmaVerdict(connection, "PRAGMA integrity_check(\(SQLiteName.catalog))")
        guard catalogVerdict == "ok" else { throw damaged("the catalog fails SQLite's integrity check: \(catalogVerdict)") }
        for entry in try SQLiteSchemaDefinition.catalogEntries(connection) {
            let schema: TableSchema
            do {
                schema = try ValueCodec.decodeSchema(entry.bytes)
            } catch {
                throw damaged("the catalog row of table '\(entry.name)' does not decode")
            }
            guard schema.name.utf8.elementsEqual(entry.name.utf8) else {
                throw damaged("the catalog row of table '\(entry.name)' holds the schema of table '\(schema.name)'")
            }
            let info = SQLiteTable(number: entry.number, schema: schema, schemaBytes: entry.bytes)
            let sql = info.createTableSQL(named: info.sqlName, checksummed: formatVersion != Int64(uncheckedFormatVersion))
            expected[ExactString(entry.name)] = Object(type: "table", table: entry.name, sql: sql)
            expected[ExactString("sqlite_autoindex_\(entry.name)_1")] = Object(type: "index", table: entry.name, sql: nil)
            for index in info.createIndexSQL {
                expected[ExactString(index.name)] = Object(type: "index", table: entry.name, sql: index.sql)
            }
        }
        for (name, object) in expected.sorted(by: { $0.key.value < $1.key.value }) where found[name] != object {
            throw damaged(found[name] == nil ? "the \(object.type.value) '\(name.value)' is missing"
                                             : "the definition of the \(object.type.value) '\(name.value)' differs from the one this adapter writes")
        }
        if let stray = found.keys.filter({ expected[$0] == nil }).min(by: { $0.value < $1.value }) {
            throw damaged("it holds a \(found[stray]!.type.value) '\(stray.value)' that no catalog row accounts for")
        }
    }

    /// The first line a `quick_check` or `integrity_check` pragma answers ("ok" when sound).
    private static func pragmaVerdict(_ connection: SQLiteConnection, _ pragma: String) throws -> String {
        try connection.withStatement(pragma) { statement -> String in
            guard try statement.step(), case .text(let text) = try statement.value(0) else { return "" }
            return text
        }
    }

    /// The format whose rows had no `sum` column.
    static let uncheckedFormatVersion: Int32 = 1

    /// Upgrades a format-1 file inside the caller's transaction: each table gains its `sum`
    /// column, every row must decode and is then given its checksum, a batch at a time (by
    /// rowid, so memory stays bounded), and the format version becomes 2. A row that does
    /// not decode throws ``SyncError/Code/corrupted`` and the caller rolls everything back, so
    /// a damaged old file is never sealed with checksums that would vouch for its damage.
    static func upgradeUncheckedFormat(_ connection: SQLiteConnection) throws {
        for entry in try SQLiteSchemaDefinition.catalogEntries(connection) {
            let info = SQLiteTable(number: entry.number, schema: try ValueCodec.decodeSchema(entry.bytes), schemaBytes: entry.bytes)
            try connection.executeUncached("ALTER TABLE \(info.sqlName) ADD COLUMN \(SQLiteTable.sumColumnName) INTEGER")
            let select = "SELECT \(info.uncheckedSelectList), rowid FROM \(info.sqlName) WHERE rowid > ?1 ORDER BY rowid LIMIT 256"
            let update = "UPDATE \(info.sqlName) SET \(SQLiteTable.sumColumnName) = ?1 WHERE rowid = ?2"
            var after = Int64.min
            while true {
                // The rowid comes right after the unchecked columns, where `sum` will be.
                let batch = try connection.withStatement(select, [.int(after)]) { statement -> [(rowid: Int64, sum: UInt32)] in
                    var rows: [(rowid: Int64, sum: UInt32)] = []
                    while try statement.step() {
                        _ = try info.decodeRow(statement, verify: false)
                        rows.append((statement.int64(info.sumColumn), info.checksum(of: statement)))
                    }
                    return rows
                }
                guard let last = batch.last else { break }
                for row in batch { try connection.execute(update, [.int(Int64(row.sum)), .int(row.rowid)]) }
                after = last.rowid
            }
        }
        try connection.executeUncached("PRAGMA user_version = \(SQLiteStore.formatVersion)")
    }

    /// The integer `sql` returns.
    static func integer(_ connection: SQLiteConnection, _ sql: String) throws -> Int64 {
        guard case .int(let value)? = try connection.scalar(sql) else {
            throw SyncError(.storageFailure, "'\(connection.path)': '\(sql)' returned no integer")
        }
        return value
    }

    /// Opens the writer connection, marks a new database as an OfflineSync store (application
    /// id, format version, catalog) and switches a file to WAL with the chosen synchronous mode.
    static func openWriter(path: String, inMemory: Bool, options: SQLiteStore.Options) throws -> SQLiteConnection {
        let connection = try SQLiteConnection.open(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                             busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
        do {
            try connection.execute("PRAGMA synchronous = \(options.synchronous.sqlKeyword)")
            // Checked again under the write lock: another process may have written the file
            // since the read-only probe. Nothing is written unless it is ours or empty.
            try connection.transaction(immediate: true) {
                let applicationID = try integer(connection, "PRAGMA application_id")
                if applicationID != Int64(SQLiteStore.applicationID) {
                    let objects = try integer(connection, "SELECT count(*) FROM sqlite_master")
                    guard applicationID == 0, objects == 0 else {
                        throw SyncError(.foreignDatabase, "'\(path)' is a SQLite database of another application")
                    }
                    try connection.executeUncached("PRAGMA application_id = \(SQLiteStore.applicationID)")
                    try connection.executeUncached("PRAGMA user_version = \(SQLiteStore.formatVersion)")
                } else if try integer(connection, "PRAGMA user_version") == Int64(uncheckedFormatVersion) {
                    try upgradeUncheckedFormat(connection)
                }
                try connection.executeUncached(
                    "CREATE TABLE IF NOT EXISTS \(catalogDefinition)"
                )
            }
            if !inMemory {
                guard case .text(let mode)? = try connection.scalar("PRAGMA journal_mode = WAL"),
                      mode.lowercased() == "wal" else {
                    throw SyncError(.storageFailure, "'\(path)': SQLite could not switch to WAL journal mode")
                }
            }
        } catch {
            connection.close(checkpoint: false)
            throw error
        }
        return connection
    }
}
