import COfflineSyncSQLite3
import Foundation
import OfflineSync
import OfflineSyncSQLite
import Testing

/// Runs `body` with a fresh temporary directory that is removed afterwards, even on failure.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("OfflineSyncSQLiteTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: url) }
    return try await body(url)
}

/// Opens a store at `path`, runs `body`, and closes the store, even when `body` throws.
func withStore<T>(at path: String, options: SQLiteStore.Options = .init(),
                  _ body: (SQLiteStore) async throws -> T) async throws -> T {
    let store = try await SQLiteStore(path: path, options: options)
    do {
        let result = try await body(store)
        try await store.close()
        return result
    } catch {
        try? await store.close()
        throw error
    }
}

/// The code of the ``SyncError`` `body` throws, or `nil` if it succeeds or throws something else.
func syncErrorCode(_ body: () async throws -> Void) async -> SyncError.Code? {
    do {
        try await body()
        return nil
    } catch let error as SyncError {
        return error.code
    } catch {
        return nil
    }
}

/// The ``SyncError`` `body` throws, or `nil`.
func syncError(_ body: () async throws -> Void) async -> SyncError? {
    do {
        try await body()
        return nil
    } catch let error as SyncError {
        return error
    } catch {
        return nil
    }
}

/// The bytes of a file, or `nil` when it does not exist.
func fileBytes(_ path: String) -> Data? {
    FileManager.default.contents(atPath: path)
}

/// A small deterministic generator (SplitMix64) so generated data is the same on every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
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

/// A reference-type box, so a test can smuggle a value out of a `@Sendable` closure.
final class Box<T>: @unchecked Sendable {
    // @unchecked Sendable: tests only write it inside a store closure and read it after that
    // closure's `await` returned, which orders the accesses.
    var value: T
    init(_ value: T) { self.value = value }
}
