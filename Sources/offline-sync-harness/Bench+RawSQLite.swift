import COfflineSyncSQLite3
import OfflineSync

/// The sqlite3 C API as the raw baselines use it, written once: open, run, prepare, step.
/// Every failure is ``SyncError/Code/storageFailure`` with SQLite's message.
enum RawSQLite {
    /// Tells SQLite to copy a bound text or blob (the Swift buffer lives only for the call).
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Opens `path` with `flags`; `durable` sets WAL and `synchronous = FULL`, as the stores'
    /// writers do, so a baseline commits the way the store it is compared with does.
    static func open(_ path: String, flags: Int32 = SQLITE_OPEN_READWRITE, durable: Bool = false) throws -> OpaquePointer {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, flags, nil) == SQLITE_OK, let db else {
            sqlite3_close_v2(db)
            throw SyncError(.storageFailure, "cannot open \(path)")
        }
        if durable {
            do {
                try exec(db, "PRAGMA journal_mode = WAL")
                try exec(db, "PRAGMA synchronous = FULL")
            } catch {
                sqlite3_close_v2(db)
                throw error
            }
        }
        return db
    }

    static func exec(_ db: OpaquePointer, _ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw SyncError(.storageFailure, "\(sql.prefix(60)): \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    /// A prepared statement; the caller finalizes it.
    static func prepare(_ db: OpaquePointer, _ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw SyncError(.storageFailure, "prepare \(sql.prefix(60)): \(String(cString: sqlite3_errmsg(db)))")
        }
        return statement
    }

    /// Steps a statement that returns no rows to its end, then resets it.
    static func step(_ db: OpaquePointer, _ statement: OpaquePointer) throws {
        defer { sqlite3_reset(statement) }
        guard sqlite3_step(statement) == SQLITE_DONE else {
            throw SyncError(.storageFailure, "step: \(String(cString: sqlite3_errmsg(db)))")
        }
    }
}
