import ArgumentParser
import COfflineSyncPostgreSQL
import Foundation
import OfflineSync
import OfflineSyncPostgreSQL
import OfflineSyncStoreKit

/// 100,000 records through `SyncTable` into PostgreSQL, against libpq issuing the same
/// inserts of the same rows (record row and queue row, typed columns and JSON mirrors) as
/// prepared statements in the same transactions. Both sides use the server
/// `OFFLINE_SYNC_TEST_POSTGRES_URL` names (`make bench` starts a throwaway one), each in a
/// fresh schema dropped afterwards.
enum LocalWritesPostgreSQL: BenchWorkload {
    static let name = "local-writes-postgres"
    static let baseline = "raw-libpq"

    static func server() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["OFFLINE_SYNC_TEST_POSTGRES_URL"], !url.isEmpty else {
            throw ValidationError("local-writes-postgres needs a PostgreSQL server: run `make bench` (it starts one) or set OFFLINE_SYNC_TEST_POSTGRES_URL")
        }
        return url
    }

    /// A schema of its own for one run, named after the run's directory.
    static func schemaName(_ directory: URL) -> String {
        "bench_" + directory.lastPathComponent.lowercased().filter { $0.isLetter || $0.isNumber }.prefix(32)
    }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let url = try server(), schema = schemaName(directory)
        defer { try? RawPostgreSQL(url).execute("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE") }
        let store = try await PostgreSQLStore(connectionString: url, options: .init(schema: schema))
        return try await LocalWrites.throughSyncTable(store, records: records, batch: batch)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let url = try server(), schema = schemaName(directory)
        defer { try? RawPostgreSQL(url).execute("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE") }
        // Both sides start from the same empty store: our catalog, tables and indexes.
        let store = try await PostgreSQLStore(connectionString: url, options: .init(schema: schema))
        let context = try await SyncContext(store: store, remote: UnusedRemote())
        try await context.defineTable(LocalWrites.schema)
        try await store.close()
        return try RawPostgreSQLBaseline(url: url, schema: schema).run(records: records, batch: batch)
    }
}

/// The baseline: one prepared `INSERT` per record row and per queue row, parameters in
/// binary format, through libpq and nothing else.
struct RawPostgreSQLBaseline {
    let url: String
    let schema: String

    func run(records: Int, batch: Int) throws -> Double {
        let pg = try RawPostgreSQL(url)
        let items = try pg.tableNumber("items", schema: schema)
        let operations = try pg.tableNumber(SystemTables.operations, schema: schema)
        let fields = SystemTables.operationsSchema.fields.map(\.name)
        func column(_ name: String, json: Bool = false) -> String {
            "\"\(json ? "j" : "c")\(fields.firstIndex(of: name)!)\""
        }
        try pg.prepare("item", """
            INSERT INTO "\(schema)"."osync_t\(items)" ("id", "version", "updatedAt", "deleted", "extra", "c0", "c1", "c2", "c3")
            VALUES ($1, NULL, NULL, FALSE, NULL, $2, $3, $4, $5)
            """)
        let columns = ["sequence", "table", "itemId", "kind", "item", "state", "attempts", "createdAt", "changedAt",
                       "transaction", "sendId", "changedFields"].map { column($0) }
        try pg.prepare("operation", """
            INSERT INTO "\(schema)"."osync_t\(operations)" ("id", "version", "updatedAt", "deleted", "extra", \(columns.joined(separator: ", ")),
              \(column("item", json: true)), \(column("changedFields", json: true)))
            VALUES ($1, NULL, NULL, FALSE, NULL, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $1, $11, $12, $13)
            """)
        let changed = ValueCodec.encode(Value.array(["done", "n", "note", "title"]))
        let changedJSON = #"["done","n","note","title"]"#
        let cpu = MeasuredWindows.processCPUSeconds(), start = DispatchTime.now().uptimeNanoseconds
        var sequence: Int64 = 0
        for first in stride(from: 0, to: records, by: batch) {
            try pg.execute("BEGIN")
            let transaction = Array(UUID.random().uuidString.utf8)
            let now = Timestamp.now().millisecondsSince1970
            for i in first..<min(first + batch, records) {
                let record = LocalWrites.record(i)
                let title = record["title"].stringValue!, note = record["note"].stringValue!
                let n = record["n"].intValue!, done = record["done"].boolValue!
                try pg.run("item", [.bytes(Array(record.id.utf8)), .bytes(Array(title.utf8)), .int(n), .bool(done),
                                    .bytes(Array(note.utf8))])
                sequence += 1
                let itemJSON = #"{"done":\#(done),"n":\#(n),"note":"\#(note)","title":"\#(title)"}"#
                try pg.run("operation", [
                    .bytes(Array(UUID.random().uuidString.utf8)), .int(sequence), .bytes(Array("items".utf8)),
                    .bytes(Array(record.id.utf8)), .bytes(Array("insert".utf8)), .bytes(ValueCodec.encode(Value.object(record.fields))),
                    .bytes(Array("pending".utf8)), .int(0), .int(now), .bytes(transaction), .bytes(changed),
                    .text(itemJSON), .text(changedJSON),
                ])
            }
            try pg.execute("COMMIT")
        }
        return MeasuredWindows.shared.close(started: start, cpu: cpu)
    }
}

/// A bare libpq connection for the baseline and for cleaning up.
final class RawPostgreSQL {
    enum Parameter {
        case bytes([UInt8])
        case int(Int64)
        case bool(Bool)
        case text(String)
        /// SQL NULL.
        case null
    }

    private let connection: OpaquePointer

    init(_ url: String) throws {
        guard let connection = PQconnectdb(url), PQstatus(connection) == CONNECTION_OK else {
            throw ValidationError("cannot connect to the benchmark's PostgreSQL server")
        }
        self.connection = connection
    }

    deinit { PQfinish(connection) }

    func execute(_ sql: String) throws {
        try check(PQexec(connection, sql))
    }

    func prepare(_ name: String, _ sql: String) throws {
        try check(PQprepare(connection, name, sql, 0, nil))
    }

    /// The catalog number of a store table.
    func tableNumber(_ table: String, schema: String) throws -> Int64 {
        let sql = "SELECT \"num\" FROM \"\(schema)\".\"__osync_catalog\" WHERE \"name\" = convert_to('\(table)', 'UTF8')"
        guard let result = PQexec(connection, sql) else { throw ValidationError("catalog lookup failed") }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_TUPLES_OK, PQntuples(result) == 1, let text = PQgetvalue(result, 0, 0),
              let number = Int64(String(cString: text)) else {
            throw ValidationError("table \(table) is missing from the catalog")
        }
        return number
    }

    /// Runs a prepared statement with binary parameters (text for JSON).
    func run(_ name: String, _ parameters: [Parameter]) throws {
        let wire: [[UInt8]] = parameters.map {
            switch $0 {
            case .bytes(let bytes): return bytes
            case .int(let value): return withUnsafeBytes(of: value.bigEndian) { Array($0) }
            case .bool(let value): return [value ? 1 : 0]
            case .text(let text): return Array(text.utf8) + [0]
            case .null: return []
            }
        }
        var lengths = wire.map { Int32($0.count) }
        var formats: [Int32] = parameters.map { if case .text = $0 { return 0 } else { return 1 } }
        let pointers = wire.map { bytes -> UnsafeMutableRawPointer in
            let pointer = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
            bytes.withUnsafeBytes { if !$0.isEmpty { pointer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
            return pointer
        }
        defer { pointers.forEach { $0.deallocate() } }
        var values: [UnsafePointer<CChar>?] = zip(pointers, parameters).map { pointer, parameter in
            if case .null = parameter { return nil }
            return UnsafePointer(pointer.assumingMemoryBound(to: CChar.self))
        }
        try check(PQexecPrepared(connection, name, Int32(parameters.count), &values, &lengths, &formats, 1))
    }

    /// A query's rows, every value in PostgreSQL's text form (`nil` for NULL).
    func rows(_ sql: String) throws -> [[String?]] {
        guard let result = PQexec(connection, sql) else { throw ValidationError("PostgreSQL: \(String(cString: PQerrorMessage(connection)))") }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_TUPLES_OK else { throw ValidationError("PostgreSQL: \(String(cString: PQerrorMessage(connection)))") }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }

    /// The time to insert up to `limit` rows of store table `table` (in `schema`) again, into
    /// a new table of the same columns and indexes, `batch` rows per multi-row `INSERT` and
    /// transaction: the baseline of writes into the same PostgreSQL server. Returns the rows
    /// inserted and the seconds the inserts took.
    func reinsert(table: String, schema: String, limit: Int, batch: Int) throws -> (rows: Int, seconds: Double) {
        let source = "\"\(schema)\".\"osync_t\(try tableNumber(table, schema: schema))\""
        let copy = "\"\(schema)\".\"raw_reinsert\""
        try execute("SET client_min_messages = warning; DROP TABLE IF EXISTS \(copy); CREATE TABLE \(copy) (LIKE \(source) INCLUDING ALL)")
        let rows = try self.rows("SELECT * FROM \(source) LIMIT \(limit)")
        guard let width = rows.first?.count, width > 0 else { return (0, 0) }
        for size in Set([batch, rows.count % batch]) where size > 0 {
            let values = (0..<size).map { row in "(" + (1...width).map { "$\(row * width + $0)" }.joined(separator: ", ") + ")" }
            try prepare("reinsert\(size)", "INSERT INTO \(copy) VALUES " + values.joined(separator: ", "))
        }
        // From a checkpoint: the writes of the workload measured before it would otherwise
        // still be flushing, at a cost that grows with what that workload wrote. A role that
        // may not checkpoint measures without one, and says so.
        do {
            try execute("CHECKPOINT")
        } catch {
            say("raw libpq baseline: no CHECKPOINT before it (\(error)); the workload's writes may still be flushing while it runs")
        }
        let started = ContinuousClock.now
        for first in stride(from: 0, to: rows.count, by: batch) {
            let slice = rows[first..<min(first + batch, rows.count)]
            try execute("BEGIN")
            try run("reinsert\(slice.count)", slice.flatMap { $0.map { $0.map(Parameter.text) ?? .null } })
            try execute("COMMIT")
        }
        let elapsed = ContinuousClock.now - started
        try execute("DROP TABLE \(copy)")
        return (rows.count, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    private func check(_ result: OpaquePointer?) throws {
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            throw ValidationError("PostgreSQL: \(String(cString: PQerrorMessage(connection)))")
        }
    }
}
