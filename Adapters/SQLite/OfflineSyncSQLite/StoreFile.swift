import COfflineSyncSQLite3
import Foundation
import OfflineSync

/// Checks an existing file before the adapter lets SQLite write to it, so a corrupt,
/// truncated, foreign or non-SQLite file is refused with a typed error and left untouched.
enum StoreFile {
    /// The 16-byte magic string at the start of every SQLite 3 database.
    static let magic: [UInt8] = Array("SQLite format 3".utf8) + [0]

    /// Reads the header of an existing, non-empty file: the magic (else
    /// ``SyncError/Code/notADatabase``), a valid page size, and — when the in-header page count
    /// is valid — a file at least that many pages long (else ``SyncError/Code/corrupted``).
    /// A missing or empty file passes (SQLite treats it as a new database).
    static func checkHeader(atPath path: String) throws {
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
        try checkHeader(header, fileSize: size, path: path)
    }

    /// The header checks on bytes already read (`header` is the file's first ≤ 100 bytes).
    static func checkHeader(_ header: [UInt8], fileSize size: UInt64, path: String) throws {
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
        let changeCounter = bigEndian32(header, 24)
        let pageCount = UInt64(bigEndian32(header, 28))
        let versionValidFor = bigEndian32(header, 92)
        if pageCount > 0, changeCounter == versionValidFor, size < pageCount * pageSize {
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
        let connection = try Connection.open(path: path, flags: SQLITE_OPEN_READONLY,
                                             busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        defer { connection.close(checkpoint: false) }
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
        if quickCheck {
            let verdict = try connection.withStatement("PRAGMA quick_check(1)") { statement -> String in
                guard try statement.step(), case .text(let text) = try statement.value(0) else { return "" }
                return text
            }
            guard verdict == "ok" else {
                throw SyncError(.corrupted, "'\(path)' failed SQLite's integrity check: \(verdict)")
            }
        }
    }

    /// The format whose rows had no `sum` column.
    static let uncheckedFormatVersion: Int32 = 1

    /// Upgrades a format-1 file inside the caller's transaction: each table gains its `sum`
    /// column, every row must decode and is then given its checksum, a batch at a time (by
    /// rowid, so memory stays bounded), and the format version becomes 2. A row that does
    /// not decode throws ``SyncError/Code/corrupted`` and the caller rolls everything back, so
    /// a damaged old file is never sealed with checksums that would vouch for its damage.
    static func upgradeUncheckedFormat(_ connection: Connection) throws {
        for entry in try SchemaDefinition.catalogEntries(connection) {
            let info = TableInfo(number: entry.number, schema: try ValueCodec.decodeSchema(entry.bytes), schemaBytes: entry.bytes)
            try connection.executeUncached("ALTER TABLE \(info.sqlName) ADD COLUMN \(TableInfo.sumColumnName) INTEGER")
            let select = "SELECT \(info.uncheckedSelectList), rowid FROM \(info.sqlName) WHERE rowid > ?1 ORDER BY rowid LIMIT 256"
            let update = "UPDATE \(info.sqlName) SET \(TableInfo.sumColumnName) = ?1 WHERE rowid = ?2"
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
    static func integer(_ connection: Connection, _ sql: String) throws -> Int64 {
        guard case .int(let value)? = try connection.scalar(sql) else {
            throw SyncError(.storageFailure, "'\(connection.path)': '\(sql)' returned no integer")
        }
        return value
    }

    /// Opens the writer connection, marks a new database as an OfflineSync store (application
    /// id, format version, catalog) and switches a file to WAL with the chosen synchronous mode.
    static func openWriter(path: String, inMemory: Bool, options: SQLiteStore.Options) throws -> Connection {
        let connection = try Connection.open(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
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
                    "CREATE TABLE IF NOT EXISTS \(SQLName.catalog) (\"num\" INTEGER PRIMARY KEY, \"name\" TEXT NOT NULL UNIQUE, \"schema\" BLOB NOT NULL)"
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
