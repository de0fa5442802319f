import COfflineSyncSQLite3
import OfflineSync

/// A value bound to, or read from, a statement: SQLite's five storage classes.
package enum SQLiteValue: Sendable, Hashable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])
}

/// SQLite's `SQLITE_TRANSIENT` destructor (a C macro Swift cannot import): SQLite copies the
/// bound bytes before the bind call returns.
var sqliteTransient: sqlite3_destructor_type {
    unsafeBitCast(-1 as Int, to: sqlite3_destructor_type.self)
}

/// Maps SQLite result codes to ``SyncError``s. Messages carry the operation, SQLite's own
/// message and code, and file or table names, never a bound value.
enum SQLiteFailure {
    /// The error for a failed call. `db` supplies SQLite's message when available.
    static func error(_ rc: Int32, _ db: OpaquePointer?, _ context: String) -> SyncError {
        let message: String
        if let db, let text = sqlite3_errmsg(db) {
            message = String(cString: text)
        } else if let text = sqlite3_errstr(rc) {
            message = String(cString: text)
        } else {
            message = "unknown error"
        }
        let text = "\(context): \(message) (SQLite result code \(rc))"
        if rc == 522 { // SQLITE_IOERR_SHORT_READ: the file ends before a page it claims to have
            return SyncError(.corrupted, text)
        }
        switch rc & 0xFF {
        case SQLITE_BUSY: return SyncError(.busy, text)
        case SQLITE_NOTADB: return SyncError(.notADatabase, text)
        case SQLITE_CORRUPT: return SyncError(.corrupted, text)
        default: return SyncError(.storageFailure, text)
        }
    }
}

/// SQL identifier quoting: every table, column and index name the adapter writes into SQL
/// goes through here, so no name is ever spliced raw.
package enum SQLiteName {
    /// The prefix of the adapter's own schema objects (catalog, indexes, migration table).
    /// Table names starting with it, in any letter case, are refused.
    static let internalPrefix = "__osync_"
    /// The catalog table's name: one row per defined table.
    static let catalogName = "\(internalPrefix)catalog"
    /// The catalog table's name, quoted.
    static let catalog = quote(catalogName)
    /// The scratch table a migration copies rows into.
    static let migrationTable = quote("__osync_migrate")

    /// `name` in double quotes, embedded double quotes doubled. Byte exact otherwise.
    package static func quote(_ name: String) -> String {
        var out = "\""
        out.unicodeScalars.reserveCapacity(name.unicodeScalars.count + 2)
        for scalar in name.unicodeScalars {
            if scalar == "\"" { out.unicodeScalars.append("\"") }
            out.unicodeScalars.append(scalar)
        }
        out.unicodeScalars.append("\"")
        return out
    }

    /// The quoted column of a declared field: prefixed so it never collides with a system column.
    static func fieldColumn(_ field: String) -> String { quote("f_" + field) }

    /// The quoted name of the `position`th index of the table with catalog number `tableNumber`.
    static func index(table tableNumber: Int64, position: Int) -> String {
        quote("\(internalPrefix)idx_\(tableNumber)_\(position)")
    }

    /// The unquoted name prefix of every index of the table with catalog number `tableNumber`.
    static func indexPrefix(table tableNumber: Int64) -> String {
        "\(internalPrefix)idx_\(tableNumber)_"
    }

    /// ASCII-only lowercasing: how SQLite folds identifier case.
    package static func asciiLowercased(_ s: String) -> [UInt8] {
        s.utf8.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
    }

    /// Throws ``SyncError/Code/invalidName`` for table names SQLite or this adapter reserves.
    static func validateTableName(_ name: String) throws {
        let folded = asciiLowercased(name)
        if folded.starts(with: Array("sqlite_".utf8)) {
            throw SyncError(.invalidName, "table name '\(name)' starts with 'sqlite_', which SQLite reserves")
        }
        if folded.starts(with: Array(internalPrefix.utf8)) {
            throw SyncError(.invalidName, "table name '\(name)' starts with '\(internalPrefix)', which the SQLite adapter reserves")
        }
    }

    /// Whether two table names would name the same SQLite table or differ only in letter case
    /// (ASCII or Unicode), which the adapter refuses so every engine sees distinct tables.
    package static func collide(_ a: String, _ b: String) -> Bool {
        asciiLowercased(a) == asciiLowercased(b) || a.lowercased().utf8.elementsEqual(b.lowercased().utf8)
    }
}

