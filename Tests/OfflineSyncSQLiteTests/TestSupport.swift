import COfflineSyncSQLite3
import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Opens a store at `path`, runs `body`, and closes the store, even when `body` throws.
func withStore<T>(at path: String, options: SQLiteStore.Options = .init(),
                  _ body: (SQLiteStore) async throws -> T) async throws -> T {
    try await withClosing(try await SQLiteStore(path: path, options: options), body)
}

/// The bytes of a file, or `nil` when it does not exist (read without Foundation's leak:
/// ``OfflineSyncStoreKit/fileContents(_:)``).
func fileBytes(_ path: String) -> Data? {
    fileContents(path).map { Data($0) }
}

/// A raw sqlite3 connection for building foreign files and holding locks in tests.
final class RawDatabase {
    private(set) var db: OpaquePointer?

    init(path: String) throws {
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
        guard rc == SQLITE_OK else {
            sqlite3_close_v2(handle)
            throw SyncError(.storageFailure, "raw open failed: \(rc)")
        }
        db = handle
    }

    deinit { close() }

    /// Runs SQL (one or more statements, no parameters).
    func exec(_ sql: String) throws {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else {
            throw SyncError(.storageFailure, "raw exec failed (\(rc)): \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    /// The text of the first column of each row `sql` returns.
    func strings(_ sql: String) throws -> [String] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else {
            throw SyncError(.storageFailure, "raw prepare failed: \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(statement) }
        var result: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            result.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "NULL")
        }
        return result
    }

    func close() {
        if let db { sqlite3_close_v2(db) }
        db = nil
    }
}
