import COfflineSyncSQLite3
import Foundation
import OfflineSync
import OfflineSyncPostgreSQL
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncWire

/// `push-10k-server`: the server's side of push-10k — the service applying the ten pushed
/// batches of 1,000 inserts to its SQLite store, in process (no HTTP; the batches decoded
/// from the binary push before the clock starts, as the route decodes them) — against the sqlite3
/// C API inserting the same rows (every column as the service stored them) into the same
/// table and indexes with one multi-row `INSERT` per batch, one transaction each. The goal
/// is at least half the raw inserts' speed: a ratio of at most 2. What the service
/// does beyond the rows — each operation's remembered outcome (idempotency: the key in the
/// row it writes), the change sequence, the version and owner — is what the ratio prices.
enum PushServerApply: BenchWorkload {
    static let name = "push-10k-server"
    static let baseline = "raw-multi-row-inserts"
    static var fixedRecords: Int? { Push10k.count }
    static let batchSize = 1_000

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await apply(at: directory.appendingPathComponent("server.sqlite").path)
    }

    /// Applies push-10k's batches through a service on a new store at `path`; returns the time.
    static func apply(at path: String) async throws -> Double {
        try await apply(to: try await SQLiteStore(path: path))
    }

    /// Applies push-10k's batches through a service on `store` (new and empty), then closes it;
    /// returns the time.
    static func apply(to store: any LocalStore) async throws -> Double {
        let service = try await OfflineSyncService(store: store)
        // The batches as the server's `/v2/push` route hands them to the service: decoded from
        // the binary push, each item with room for the fields the service adds.
        let batches = try stride(from: 0, to: Push10k.count, by: batchSize).map { first in
            let operations = (first..<min(first + batchSize, Push10k.count)).map { i in
                PushOperation(id: "op-\(i)", table: "items", itemId: String(format: "item-%07d", i), kind: .insert,
                              item: SyncBench.record(i), baseVersion: nil)
            }
            return try PushBatch.encode(operations: operations).withUnsafeBytes {
                try PushBatch.decodeOperations($0, reservingExtraFields: OfflineSyncService.fieldsAddedToPushedItems)
            }
        }
        var applied = 0
        let seconds = try await LocalWrites.measure {
            for operations in batches {
                for result in try await service.push(identity: Identity(SyncBench.identity), operations) {
                    if case .applied = result.outcome { applied += 1 }
                }
            }
        }
        try await store.close()
        guard applied == Push10k.count else { throw SyncError(.storageFailure, "the service applied \(applied) of \(Push10k.count)") }
        return seconds
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        // The rows and the table's DDL, as the service stores them (made before the clock starts).
        let source = directory.appendingPathComponent("source.sqlite").path
        _ = try await apply(at: source)
        // That apply is set-up, not the baseline: only the inserts below are its window.
        MeasuredWindows.shared.reset()
        let (ddl, columns, rows) = try RawTable.dump(path: source, table: "items")
        guard rows.count % batchSize == 0 else { throw SyncError(.storageFailure, "\(rows.count) rows are not whole batches") }
        return try RawTable.insert(rows, columns: columns, ddl: ddl, table: "items",
                                   into: directory.appendingPathComponent("raw.sqlite").path, batch: batchSize)
    }
}

extension RawTable {
    /// Creates a durable SQLite file at `path` with `ddl` and inserts `rows` into `table`,
    /// `batch` at a time — one multi-row `INSERT` per transaction, as a raw baseline writes
    /// them; returns the seconds of the inserts alone (a ``MeasuredWindows`` window).
    static func insert(_ rows: [[Cell]], columns: [String], ddl: [String], table: String, into path: String,
                       batch: Int) throws -> Double {
        let db = try RawSQLite.open(path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, durable: true)
        defer { sqlite3_close_v2(db) }
        for statement in ddl { try RawSQLite.exec(db, statement) }
        let placeholders = "(" + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
        let head = "INSERT INTO \"\(table)\" (\(columns.map { "\"\($0)\"" }.joined(separator: ", "))) VALUES "
        var statements: [Int: OpaquePointer] = [:]
        defer { statements.values.forEach { sqlite3_finalize($0) } }
        for size in Set([batch, rows.count % batch]) where size > 0 {
            statements[size] = try RawSQLite.prepare(db, head + Array(repeating: placeholders, count: size).joined(separator: ", "))
        }
        var failed = false
        let seconds = LocalWrites.measureSync {
            for first in stride(from: 0, to: rows.count, by: batch) {
                let slice = rows[first..<min(first + batch, rows.count)]
                guard let insert = statements[slice.count] else { failed = true; return }
                sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
                var parameter: Int32 = 1
                for row in slice {
                    for value in row {
                        RawTable.bind(insert, parameter, value)
                        parameter += 1
                    }
                }
                if sqlite3_step(insert) != SQLITE_DONE { failed = true }
                sqlite3_reset(insert)
                if sqlite3_exec(db, "COMMIT", nil, nil, nil) != SQLITE_OK { failed = true }
            }
        }
        if failed { throw SyncError(.storageFailure, "raw insert failed: \(String(cString: sqlite3_errmsg(db)))") }
        return seconds
    }
}

/// `push-10k-server-postgres`: push-10k-server's batches applied by a service on PostgreSQL
/// (the store several server instances share, a server on this machine), against the same
/// apply on the embedded SQLite default. PostgreSQL's cost is round trips: the service reads
/// a batch's outcomes and rows in one ``LocalReadTransaction/read(_:)`` call, which the
/// adapter sends as one pipeline, and its writes go out buffered.
enum PushServerApplyPostgreSQL: BenchWorkload {
    static let name = "push-10k-server-postgres"
    static let baseline = "same-apply-on-sqlite"
    static var fixedRecords: Int? { Push10k.count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let url = try LocalWritesPostgreSQL.server(), schema = LocalWritesPostgreSQL.schemaName(directory)
        defer { try? RawPostgreSQL(url).execute("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE") }
        return try await PushServerApply.apply(to: try await PostgreSQLStore(connectionString: url, options: .init(schema: schema)))
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await PushServerApply.apply(at: directory.appendingPathComponent("server.sqlite").path)
    }
}

/// A SQLite table copied column by column with the C API (``RawSQLite``), for baselines that
/// write exactly what a store wrote.
enum RawTable {
    enum Cell {
        case null, int(Int64), double(Double), text([UInt8]), blob([UInt8])
    }

    /// The DDL of `table` and its indexes, its column names and every row.
    static func dump(path: String, table: String) throws -> (ddl: [String], columns: [String], rows: [[Cell]]) {
        let db = try RawSQLite.open(path)
        defer { sqlite3_close_v2(db) }
        var ddl: [String] = []
        try query(db, "SELECT sql FROM sqlite_master WHERE tbl_name = '\(table)' AND sql IS NOT NULL ORDER BY type DESC") { statement in
            ddl.append(String(cString: sqlite3_column_text(statement, 0)))
        }
        guard !ddl.isEmpty else { throw SyncError(.storageFailure, "no table '\(table)' in \(path)") }
        var columns: [String] = []
        var rows: [[Cell]] = []
        try query(db, "SELECT * FROM \"\(table)\"") { statement in
            let count = sqlite3_column_count(statement)
            if columns.isEmpty { columns = (0..<count).map { String(cString: sqlite3_column_name(statement, $0)) } }
            rows.append((0..<count).map { column in
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: return .int(sqlite3_column_int64(statement, column))
                case SQLITE_FLOAT: return .double(sqlite3_column_double(statement, column))
                case SQLITE_TEXT: return .text(bytes(statement, column, sqlite3_column_text(statement, column)))
                case SQLITE_BLOB: return .blob(bytes(statement, column, sqlite3_column_blob(statement, column)))
                default: return .null
                }
            })
        }
        return (ddl, columns, rows)
    }

    private static func bytes(_ statement: OpaquePointer, _ column: Int32, _ pointer: UnsafeRawPointer?) -> [UInt8] {
        guard let pointer else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(statement, column))))
    }

    private static func query(_ db: OpaquePointer, _ sql: String, _ row: (OpaquePointer) -> Void) throws {
        let statement = try RawSQLite.prepare(db, sql)
        defer { sqlite3_finalize(statement) }
        while sqlite3_step(statement) == SQLITE_ROW { row(statement) }
    }

    static func bind(_ statement: OpaquePointer, _ index: Int32, _ cell: Cell) {
        switch cell {
        case .null: sqlite3_bind_null(statement, index)
        case .int(let v): sqlite3_bind_int64(statement, index, v)
        case .double(let v): sqlite3_bind_double(statement, index, v)
        case .text(let bytes): sqlite3_bind_text(statement, index, bytes, Int32(bytes.count), RawSQLite.transient)
        case .blob(let bytes): sqlite3_bind_blob(statement, index, bytes, Int32(bytes.count), RawSQLite.transient)
        }
    }
}
