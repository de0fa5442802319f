import ArgumentParser
import Foundation
import GRDB
import OfflineSync
import OfflineSyncGRDB
import OfflineSyncSQLite

/// The app's own GRDB database, as the GRDB workloads use it: a `DatabasePool` (WAL) whose
/// migration creates `items` with typed columns, as an app would.
enum GRDBBench {
    /// A row of `items` as the app's GRDB record.
    struct Item: Codable, PersistableRecord, FetchableRecord {
        static let databaseTableName = "items"
        var id: String
        var title: String
        var n: Int64
        var done: Bool
        var note: String

        init(_ i: Int) {
            let record = LocalWrites.record(i)
            id = record.id
            title = record["title"].stringValue!
            n = record["n"].intValue!
            done = record["done"].boolValue!
            note = record["note"].stringValue!
        }
    }

    static func database(_ directory: URL) throws -> DatabasePool {
        let pool = try DatabasePool(path: directory.appendingPathComponent("app.sqlite").path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "items") { t in
                t.primaryKey("id", .text)
                t.column("title", .text)
                t.column("n", .integer)
                t.column("done", .boolean)
                t.column("note", .text)
            }
        }
        try migrator.migrate(pool)
        return pool
    }

    /// Inserts `records` app records through GRDB in transactions of `batch`.
    static func writeItems(_ pool: DatabasePool, records: Int, batch: Int) async throws {
        for start in stride(from: 0, to: records, by: batch) {
            let end = min(start + batch, records)
            try await pool.write { db in
                for i in start..<end { try Item(i).insert(db) }
            }
        }
    }
}

/// `local-writes-grdb`: local-writes-sqlite's rows written by the app through GRDB records
/// into its own table synced by the GRDB adapter — captured by its triggers and queued (the
/// time includes queuing all of them) — against GRDB writing the same rows into the same
/// table with no sync.
enum LocalWritesGRDB: BenchWorkload {
    static let name = "local-writes-grdb"
    static let baseline = "grdb-no-sync"

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let pool = try GRDBBench.database(directory)
        let store = try await GRDBStore(pool)
        let context = try await SyncContext(store: store, remote: UnusedRemote())
        try await context.defineTable(LocalWrites.schema)
        var queued = 0
        let seconds = try await LocalWrites.measure {
            try await GRDBBench.writeItems(pool, records: records, batch: batch)
            queued = try await context.queuedOperationCount()
        }
        guard queued == records else { throw ValidationError("expected \(records) queued operations, found \(queued)") }
        try await context.close()
        return seconds
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let pool = try GRDBBench.database(directory)
        let seconds = try await LocalWrites.measure {
            try await GRDBBench.writeItems(pool, records: records, batch: batch)
        }
        let count = try await pool.read { db in try GRDBBench.Item.fetchCount(db) }
        guard count == records else { throw ValidationError("expected \(records) rows, found \(count)") }
        return seconds
    }
}

/// `pull-1m-grdb`: pull-1m's first pull of 1,000,000 records into the app's GRDB database
/// (typed table, side table, the engine's bookkeeping beside it), against pull-1m itself
/// (the same pull into a SQLite store).
enum Pull1mGRDB: BenchWorkload {
    static let name = "pull-1m-grdb"
    static let baseline = "pull-1m"
    static var fixedRecords: Int? { Pull1m.count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await Pull1m.firstPull(Pull1m.count, directory: directory) {
            let pool = try GRDBBench.database(directory)
            return (try await GRDBStore(pool), { try await pool.read { db in try GRDBBench.Item.fetchCount(db) } })
        }
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await Pull1m.firstPull(Pull1m.count, directory: directory)
    }
}
