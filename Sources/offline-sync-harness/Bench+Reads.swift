import COfflineSyncSQLite3
import Foundation
import OfflineSync
import OfflineSyncSQLite

/// The local-reads workloads, measured as GRDB measures its fetches: a 100,000-row SQLite
/// store (written once per run, untimed), then many small reads through the public API
/// (`SyncTable.get`, `SyncTable.query`), against the sqlite3 C API doing the same reads on
/// the same file with prepared statements and building the same Swift values.
enum LocalReads {
    static let rows = 100_000
    /// Rows per `group` value: a query by group returns this many.
    static let groupSize = 100
    static let schema = TableSchema("items", fields: [
        FieldDefinition("title", .string), FieldDefinition("n", .int), FieldDefinition("done", .bool),
        FieldDefinition("note", .string), FieldDefinition("group", .int, indexed: true),
    ])

    static func record(_ i: Int) -> Record {
        var record = LocalWrites.record(i)
        record["group"] = .int(Int64(i / groupSize))
        return record
    }

    /// A store at `directory` holding the rows, closed; its path.
    static func seed(_ directory: URL) async throws -> String {
        let path = directory.appendingPathComponent("reads.sqlite").path
        let store = try await SQLiteStore(path: path)
        let context = try await SyncContext(store: store, remote: UnusedRemote())
        try await context.defineTable(schema)
        for start in stride(from: 0, to: rows, by: 5_000) {
            try await context.transaction { tx in
                for i in start..<start + 5_000 { try tx.insert(record(i), into: "items") }
            }
        }
        try await context.close()
        return path
    }

    /// The ids and groups read, in a fixed pseudo-random order (the same on both sides).
    static func picks(_ count: Int, below limit: Int) -> [Int] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(limit))
        }
    }

    /// What one row becomes on the raw side: the same Swift values a record holds.
    struct Row {
        var id: String
        var title: String
        var n: Int64
        var done: Bool
        var note: String
        var group: Int64
    }

    /// The raw side: `sql` prepared once, bound with each pick, every row read into a `Row`;
    /// one read transaction per pick, or one for all of them when `oneTransaction`.
    static func raw(_ path: String, _ sql: String, picks: [Int], oneTransaction: Bool = false,
                    bind: (OpaquePointer, Int) -> Void, expect: Int) throws -> Double {
        let db = try RawSQLite.open(path, flags: SQLITE_OPEN_READONLY)
        defer { sqlite3_close_v2(db) }
        let statement = try RawSQLite.prepare(db, sql)
        defer { sqlite3_finalize(statement) }
        func text(_ column: Int32) -> String { String(cString: sqlite3_column_text(statement, column)) }
        var read = 0
        let seconds = LocalWrites.measureSync {
            // One read transaction per read, as the store's reads each take a snapshot; or one
            // around them all, as `SyncContext.read` takes one for its whole closure.
            if oneTransaction { sqlite3_exec(db, "BEGIN", nil, nil, nil) }
            for pick in picks {
                if !oneTransaction { sqlite3_exec(db, "BEGIN", nil, nil, nil) }
                bind(statement, pick)
                var rows: [Row] = []
                while sqlite3_step(statement) == SQLITE_ROW {
                    rows.append(Row(id: text(0), title: text(1), n: sqlite3_column_int64(statement, 2),
                                    done: sqlite3_column_int64(statement, 3) != 0, note: text(4),
                                    group: sqlite3_column_int64(statement, 5)))
                }
                read += rows.count
                sqlite3_reset(statement)
                if !oneTransaction { sqlite3_exec(db, "COMMIT", nil, nil, nil) }
            }
            if oneTransaction { sqlite3_exec(db, "COMMIT", nil, nil, nil) }
        }
        guard read == expect else { throw SyncError(.storageFailure, "the raw side read \(read) rows, not \(expect)") }
        return seconds
    }

    /// Our side: the seeded store opened in a context, `read` timed once per pick through its
    /// `items` table; `read` returns the rows it read, which must add up to `expect`.
    static func ours(_ directory: URL, picks: [Int], expect: Int,
                     _ read: (SyncTable, Int) async throws -> Int) async throws -> Double {
        try await timed(directory, expect: expect) { context in
            let table = context.table("items")
            var rows = 0
            for pick in picks { rows += try await read(table, pick) }
            return rows
        }
    }

    /// Our side as GRDB measures its fetches: every pick read inside one
    /// `SyncContext.read { reader in … }` (one snapshot, on the reader's thread, no hop per read).
    static func oursInOneRead(_ directory: URL, picks: [Int], expect: Int,
                              _ read: @escaping @Sendable (SyncReader, Int) throws -> Int) async throws -> Double {
        try await timed(directory, expect: expect) { context in
            try await context.read { reader in try picks.reduce(0) { try $0 + read(reader, $1) } }
        }
    }

    /// Seeds the store, opens it in a context and times `reads`, which returns the rows it
    /// read; they must be `expect`.
    private static func timed(_ directory: URL, expect: Int, _ reads: (SyncContext) async throws -> Int) async throws -> Double {
        let path = try await seed(directory)
        let context = try await SyncContext(store: try await SQLiteStore(path: path), remote: UnusedRemote())
        var rows = 0
        let seconds = try await LocalWrites.measure { rows = try await reads(context) }
        try await context.close()
        guard rows == expect else { throw SyncError(.storageFailure, "read \(rows) rows, not \(expect)") }
        return seconds
    }

    static let getSQL = #"SELECT "id", "f_title", "f_n", "f_done", "f_note", "f_group" FROM "items" WHERE "id" = ?1"#
    static let querySQL = #"SELECT "id", "f_title", "f_n", "f_done", "f_note", "f_group" FROM "items" WHERE "f_group" = ?1 ORDER BY "id""#
}

/// `local-reads-get`: 20,000 gets by id.
enum LocalReadsGet: BenchWorkload {
    static let name = "local-reads-get"
    static let baseline = "raw-sqlite3"
    static let count = 20_000
    static var fixedRecords: Int? { LocalReads.rows }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await LocalReads.ours(directory, picks: LocalReads.picks(count, below: LocalReads.rows), expect: count) { table, pick in
            try await table.get("item-\(pick)") == nil ? 0 : 1
        }
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let path = try await LocalReads.seed(directory)
        return try LocalReads.raw(path, LocalReads.getSQL,
                                  picks: LocalReads.picks(count, below: LocalReads.rows),
                                  bind: { sqlite3_bind_text($0, 1, "item-\($1)", -1, RawSQLite.transient) }, expect: count)
    }
}

/// `local-reads-query`: 2,000 queries by an indexed field, 100 rows each, in id order.
enum LocalReadsQuery: BenchWorkload {
    static let name = "local-reads-query"
    static let baseline = "raw-sqlite3"
    static let count = 2_000
    static var fixedRecords: Int? { LocalReads.rows }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await LocalReads.ours(directory, picks: LocalReads.picks(count, below: LocalReads.rows / LocalReads.groupSize),
                                  expect: count * LocalReads.groupSize) { table, pick in
            try await table.query(Query(Field("group") == .int(Int64(pick)))).count
        }
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let path = try await LocalReads.seed(directory)
        return try LocalReads.raw(path, LocalReads.querySQL,
                                  picks: LocalReads.picks(count, below: LocalReads.rows / LocalReads.groupSize),
                                  bind: { sqlite3_bind_int64($0, 1, Int64($1)) }, expect: count * LocalReads.groupSize)
    }
}

/// `local-reads-get-in-read`: 200,000 gets by id inside one read (`SyncContext.read`),
/// against sqlite3 doing them in one read transaction: GRDB's way of measuring
/// (`dbQueue.read { db in … }` around the fetches, the C API around the same steps), which
/// leaves out the thread hop each `async` call pays. Ten times local-reads-get's count: at
/// 20,000 the timed window was 0.1 s and moved ±20% between runs, wider than the gap to the
/// goal.
enum LocalReadsGetInRead: BenchWorkload {
    static let name = "local-reads-get-in-read"
    static let baseline = "raw-sqlite3-one-transaction"
    static let count = 200_000
    static var fixedRecords: Int? { LocalReads.rows }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await LocalReads.oursInOneRead(directory, picks: LocalReads.picks(count, below: LocalReads.rows), expect: count) { reader, pick in
            try reader.record(in: "items", id: "item-\(pick)") == nil ? 0 : 1
        }
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let path = try await LocalReads.seed(directory)
        return try LocalReads.raw(path, LocalReads.getSQL, picks: LocalReads.picks(count, below: LocalReads.rows),
                                  oneTransaction: true, bind: { sqlite3_bind_text($0, 1, "item-\($1)", -1, RawSQLite.transient) },
                                  expect: count)
    }
}

/// `local-reads-query-in-read`: 20,000 queries (ten times local-reads-query's, for the
/// reason ``LocalReadsGetInRead`` gives) inside one read, against sqlite3 in one read
/// transaction.
enum LocalReadsQueryInRead: BenchWorkload {
    static let name = "local-reads-query-in-read"
    static let baseline = "raw-sqlite3-one-transaction"
    static let count = 20_000
    static var fixedRecords: Int? { LocalReads.rows }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await LocalReads.oursInOneRead(directory, picks: LocalReads.picks(count, below: LocalReads.rows / LocalReads.groupSize),
                                           expect: count * LocalReads.groupSize) { reader, pick in
            try reader.records(in: "items", matching: Query(Field("group") == .int(Int64(pick)))).count
        }
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let path = try await LocalReads.seed(directory)
        return try LocalReads.raw(path, LocalReads.querySQL,
                                  picks: LocalReads.picks(count, below: LocalReads.rows / LocalReads.groupSize),
                                  oneTransaction: true, bind: { sqlite3_bind_int64($0, 1, Int64($1)) },
                                  expect: count * LocalReads.groupSize)
    }
}

/// `pull-1m-local`: pull-1m beside the local limit — the sqlite3 C API writing the same
/// 1,000,000 rows (fields, version, timestamp) into the same table, in the same transactions
/// of one page (1,000 rows) each, with nothing fetched or decoded. The time the wire and the
/// engine add over what the store itself must do.
enum Pull1mLocal: BenchWorkload {
    static let name = "pull-1m-local"
    static let baseline = "raw-sqlite3-pages"
    static var fixedRecords: Int? { Pull1m.count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await Pull1m.ours(directory: directory, records: records, batch: batch)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let path = directory.appendingPathComponent("client.sqlite").path
        try await LocalWrites.emptySQLiteStore(at: path, defining: SyncBench.schema)
        let db = try RawSQLite.open(path, durable: true)
        defer { sqlite3_close_v2(db) }
        let insert = try RawSQLite.prepare(db, """
            INSERT INTO "items" ("id", "version", "updatedAt", "deleted", "extra", "f_title", "f_n", "f_done", "f_note")
            VALUES (?1, ?2, ?3, 0, NULL, ?4, ?5, ?6, ?7)
            """)
        defer { sqlite3_finalize(insert) }
        let transient = RawSQLite.transient
        let now = Timestamp.now().millisecondsSince1970
        // The rows are made before the clock starts, as ours receives them made by the server.
        let rows = (0..<Pull1m.count).map { SyncBench.record($0) }
        var failed = false
        let seconds = LocalWrites.measureSync {
            for first in stride(from: 0, to: rows.count, by: 1_000) {
                sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
                for record in rows[first..<min(first + 1_000, rows.count)] {
                    sqlite3_bind_text(insert, 1, record.id, -1, transient)
                    sqlite3_bind_text(insert, 2, "v\(first)", -1, transient)
                    sqlite3_bind_int64(insert, 3, now)
                    sqlite3_bind_text(insert, 4, record["title"].stringValue!, -1, transient)
                    sqlite3_bind_int64(insert, 5, record["n"].intValue!)
                    sqlite3_bind_int64(insert, 6, record["done"].boolValue! ? 1 : 0)
                    sqlite3_bind_text(insert, 7, record["note"].stringValue!, -1, transient)
                    if sqlite3_step(insert) != SQLITE_DONE { failed = true }
                    sqlite3_reset(insert)
                }
                if sqlite3_exec(db, "COMMIT", nil, nil, nil) != SQLITE_OK { failed = true }
            }
        }
        if failed { throw SyncError(.storageFailure, "raw insert failed: \(String(cString: sqlite3_errmsg(db)))") }
        return seconds
    }
}
