import COfflineSyncSQLite3
import OfflineSync
import OfflineSyncStoreKit

/// Owns one prepared statement. Used only by its ``SQLiteConnection``, on that connection's queue.
///
/// The owner finalizes it explicitly (``finalize()``); `deinit` finalizes a statement that
/// was never finalized so nothing leaks.
final class SQLiteStatement {
    private(set) var handle: OpaquePointer?
    private let db: OpaquePointer
    /// Whether a caller is stepping it right now (a cached statement is never lent twice).
    var inUse = false

    /// Prepares `sql`, which must hold exactly one statement.
    init(db: OpaquePointer, sql: String, persistent: Bool) throws {
        self.db = db
        var statement: OpaquePointer?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        // The tail pointer points into the C string, so it is checked while the string lives.
        let (rc, hasTail) = sql.withCString { text -> (Int32, Bool) in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v3(db, text, -1, flags, &statement, &tail)
            return (rc, tail.map { $0.pointee != 0 } ?? false)
        }
        guard rc == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw SQLiteFailure.error(rc, db, "preparing a statement")
        }
        if hasTail {
            sqlite3_finalize(statement)
            throw SyncError(.storageFailure, "internal error: a statement held more than one SQL command")
        }
        handle = statement
    }

    deinit { finalize() }

    /// Releases the statement. Safe to call twice.
    func finalize() {
        if let handle { sqlite3_finalize(handle) }
        handle = nil
        arena.deallocate()
        arena = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    }

    /// The texts and blobs bound now, end to end. SQLite is handed pointers into it
    /// (`SQLITE_STATIC`) instead of copying each value into memory of its own
    /// (`SQLITE_TRANSIENT`: a `malloc`, a copy and a `free` per value, 11% of a pulled page's
    /// apply, `perf`, pull-1m). It is kept until the statement is finalized, so the pointers
    /// stay valid while SQLite holds them (it never writes through them: a value it must
    /// change it copies first), and is reused by the next use; only values of at most
    /// ``arenaLimit`` bytes in all go here.
    private var arena = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private static let arenaLimit = 65_536

    /// Ends any stepping, ready for reuse. The bindings stay unless they hold a long text or
    /// blob (one that did not fit ``arena`` is SQLite's own copy, kept until it is rebound or
    /// cleared, and a cached statement can wait long for its next use): every use binds every parameter anew
    /// (``bind(_:)`` clears first when given fewer), and clearing short values on every
    /// reset cost a get by id 0.8% (`perf`, local-reads-get-in-read).
    func reset() {
        guard let handle else { return }
        sqlite3_reset(handle)
        if holdsLongValue {
            sqlite3_clear_bindings(handle)
            holdsLongValue = false
        }
    }

    /// Whether a bound text or blob is longer than ``longValue`` bytes.
    private var holdsLongValue = false
    private static let longValue = 4_096

    /// Binds values to the parameters `?1…?n`; any parameter after them is NULL.
    func bind(_ values: [SQLiteValue]) throws {
        guard let handle else { throw SyncError(.storeClosed, "the statement was finalized") }
        if values.count < Int(sqlite3_bind_parameter_count(handle)) { sqlite3_clear_bindings(handle) }
        var bytes = 0
        for value in values {
            switch value {
            case .text(let s): bytes += s.utf8.count
            case .blob(let b): bytes += b.count
            case .null, .int, .double: continue
            }
        }
        // Past the limit every value is copied by SQLite, as long ones always were.
        let arenaUsed = bytes <= Self.arenaLimit
        if arenaUsed, bytes > arena.count {
            // No binding may point into the old arena once it is freed.
            sqlite3_clear_bindings(handle)
            arena.deallocate()
            arena = .allocate(byteCount: max(bytes, 256, min(arena.count * 2, Self.arenaLimit)), alignment: 8)
        }
        var used = 0
        /// Binds `source` through the arena, or copied by SQLite when the arena is not used.
        func bindBytes(_ source: UnsafeRawBufferPointer, _ index: Int32, text: Bool) -> Int32 {
            var bytes = source
            var destructor: sqlite3_destructor_type? = sqliteTransient
            if arenaUsed {
                let target = UnsafeMutableRawBufferPointer(rebasing: arena[used..<(used + source.count)])
                target.copyMemory(from: source)
                used += source.count
                bytes = UnsafeRawBufferPointer(target)
                destructor = nil // SQLITE_STATIC
            }
            guard text else { return sqlite3_bind_blob64(handle, index, bytes.baseAddress, UInt64(bytes.count), destructor) }
            return bytes.withMemoryRebound(to: CChar.self) {
                sqlite3_bind_text64(handle, index, $0.baseAddress, UInt64($0.count), destructor, UInt8(SQLITE_UTF8))
            }
        }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null:
                rc = sqlite3_bind_null(handle, index)
            case .int(let v):
                rc = sqlite3_bind_int64(handle, index, v)
            case .double(let v):
                rc = sqlite3_bind_double(handle, index, v)
            case .text(let s):
                if s.utf8.count > Self.longValue { holdsLongValue = true }
                var copy = s
                rc = copy.withUTF8 { buffer -> Int32 in
                    guard buffer.count > 0 else {
                        // A NULL pointer would bind SQL NULL: bind an empty, non-null string.
                        return sqlite3_bind_text64(handle, index, "", 0, sqliteTransient, UInt8(SQLITE_UTF8))
                    }
                    return bindBytes(UnsafeRawBufferPointer(buffer), index, text: true)
                }
            case .blob(let bytes):
                if bytes.count > Self.longValue { holdsLongValue = true }
                if bytes.isEmpty {
                    // A NULL pointer would bind SQL NULL: bind a zero-length blob.
                    rc = sqlite3_bind_zeroblob(handle, index, 0)
                } else {
                    rc = bytes.withUnsafeBytes { bindBytes($0, index, text: false) }
                }
            }
            guard rc == SQLITE_OK else { throw SQLiteFailure.error(rc, db, "binding a parameter") }
        }
    }

    /// Steps once: `true` when a row is available, `false` when the statement is done.
    func step() throws -> Bool {
        guard let handle else { throw SyncError(.storeClosed, "the statement was finalized") }
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw SQLiteFailure.error(rc, db, "executing a statement")
        }
    }

    /// The number of columns of the statement's rows.
    var columnCount: Int32 { sqlite3_column_count(handle) }

    /// The storage class of a column of the current row (`SQLITE_NULL`, `SQLITE_INTEGER`…).
    func columnType(_ column: Int32) -> Int32 { sqlite3_column_type(handle, column) }

    /// The integer in a column of the current row.
    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    /// The double in a column of the current row.
    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    /// The text in a column of the current row, byte for byte. Throws ``SyncError/Code/corrupted``
    /// when the bytes are not UTF-8.
    func text(_ column: Int32) throws -> String {
        try SQLiteCell.string(textBytes(column))
    }

    /// The bytes of a text column of the current row, borrowed until the next step or reset.
    /// Throws ``SyncError/Code/storageFailure`` when SQLite runs out of memory fetching them.
    private func textBytes(_ column: Int32) throws -> UnsafeRawBufferPointer {
        guard let pointer = sqlite3_column_text(handle, column) else {
            if sqlite3_errcode(db) == SQLITE_NOMEM { throw SyncError(.storageFailure, "out of memory reading a text column") }
            return UnsafeRawBufferPointer(start: nil, count: 0)
        }
        return UnsafeRawBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(handle, column)))
    }

    /// The bytes of a blob column of the current row, borrowed until the next step or reset.
    private func blobBytes(_ column: Int32) -> UnsafeRawBufferPointer {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return UnsafeRawBufferPointer(start: count > 0 ? pointer : nil, count: count)
    }

    /// Calls `body` with the bytes of a blob column of the current row (valid only inside).
    func withBlob<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try body(blobBytes(column))
    }

    /// A column of the current row as stored, fetched once: a text's or blob's bytes point
    /// into the statement and are valid until the next step or reset. Throws
    /// ``SyncError/Code/storageFailure`` when SQLite runs out of memory fetching a text.
    func cell(_ column: Int32) throws -> SQLiteCell {
        switch columnType(column) {
        case SQLITE_INTEGER: return .int(int64(column))
        case SQLITE_FLOAT: return .double(double(column))
        case SQLITE_TEXT: return .text(try textBytes(column))
        case SQLITE_BLOB: return .blob(blobBytes(column))
        default: return .null
        }
    }

    /// The bytes of a blob column of the current row.
    func blob(_ column: Int32) -> [UInt8] {
        withBlob(column) { Array($0) }
    }

    /// The value of a column of the current row as one of SQLite's storage classes (a copy
    /// of ``cell(_:)`` that outlives the row).
    func value(_ column: Int32) throws -> SQLiteValue {
        switch try cell(column) {
        case .null: return .null
        case .int(let v): return .int(v)
        case .double(let v): return .double(v)
        case .text(let bytes): return .text(try SQLiteCell.string(bytes))
        case .blob(let bytes): return .blob(Array(bytes))
        }
    }
}

/// A column of a statement's current row as SQLite stores it (``SQLiteStatement/cell(_:)``);
/// a text's or blob's bytes are borrowed from the statement.
enum SQLiteCell {
    case null
    case int(Int64)
    case double(Double)
    case text(UnsafeRawBufferPointer)
    case blob(UnsafeRawBufferPointer)

    /// A text's bytes as a string; ``SyncError/Code/corrupted`` when they are not UTF-8.
    static func string(_ bytes: UnsafeRawBufferPointer) throws -> String {
        guard let string = UTF8Text.string(bytes) else {
            throw SyncError(.corrupted, "a text column holds bytes that are not UTF-8")
        }
        return string
    }
}
