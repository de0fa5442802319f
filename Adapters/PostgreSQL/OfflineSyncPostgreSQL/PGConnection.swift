import COfflineSyncPostgreSQL
import Dispatch
import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// One value bound to a `$n` parameter. Scalars travel in PostgreSQL's binary format with
/// their type named; text travels in text format and takes the type the statement gives it
/// (for example `jsonb`).
enum PGParameter {
    /// SQL NULL (its type is inferred from the statement).
    case null
    /// `bytea`, binary.
    case bytes([UInt8])
    /// `bigint`, binary.
    case int64(Int64)
    /// `double precision`, binary (every bit kept, `-0.0` included).
    case double(Double)
    /// `boolean`, binary.
    case bool(Bool)
    /// Text format; the type is inferred from the statement.
    case text(String)

    /// The type OID sent with the parameter, or 0 for "infer it".
    var typeOID: UInt32 {
        switch self {
        case .null, .text: return 0
        case .bytes: return 17
        case .int64: return 20
        case .double: return 701
        case .bool: return 16
        }
    }

    /// The parameter's bytes in its wire format (`nil` for NULL).
    var wireBytes: [UInt8]? {
        switch self {
        case .null: return nil
        case .bytes(let bytes): return bytes
        case .int64(let value): return withUnsafeBytes(of: value.bigEndian) { Array($0) }
        case .double(let value): return withUnsafeBytes(of: value.bitPattern.bigEndian) { Array($0) }
        case .bool(let value): return [value ? 1 : 0]
        case .text(let text): return Array(text.utf8)
        }
    }

    /// 1 for binary, 0 for text.
    var format: Int32 {
        if case .text = self { return 0 }
        return 1
    }
}

/// A statement to run: its text, its parameters and whether to prepare it.
struct PGStatement {
    var sql: String
    var parameters: [PGParameter]
    var prepare: Bool

    init(_ sql: String, _ parameters: [PGParameter] = [], prepare: Bool = true) {
        self.sql = sql
        self.parameters = parameters
        self.prepare = prepare
    }
}

/// One PostgreSQL connection (`PGconn`). Owned by one ``PGWorker`` and used only on its
/// serial queue; `close()` is explicit.
final class PGConnection {
    private(set) var handle: OpaquePointer?
    /// Where the connection goes, for messages (never the password).
    let endpoint: String
    /// Set when a command failed because the connection is gone: the worker then reconnects.
    private(set) var isBroken = false
    /// Set when a command failed with a serialization failure or a deadlock (SQLSTATE
    /// `40001`, `40P01`): the transaction was rolled back because of another writer, and may
    /// be run again. Kept until ``clearConflict()`` even when the caller swallowed the error,
    /// so a transaction's body that caught it cannot make its rolled-back work look done.
    private(set) var sawConflict = false

    /// Forgets a conflict seen by an earlier transaction (see ``sawConflict``).
    func clearConflict() { sawConflict = false }

    /// Whether a transaction is open on the connection (running or failed).
    var inTransaction: Bool {
        guard let handle else { return false }
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    private init(handle: OpaquePointer, endpoint: String) {
        self.handle = handle
        self.endpoint = endpoint
    }

    deinit { assert(handle == nil, "PGConnection was not closed") }

    /// Table layouts built from catalog rows, by table name, reused by later transactions
    /// while the row's number, schema bytes and store schema are unchanged — so a query shape
    /// remembered for a layout (``shapes``) is found again, and a migrated table is a new one.
    var tables: [ExactString: (number: Int64, schemaBytes: [UInt8], storeSchema: String, table: PGTable)] = [:]
    /// The SQL each query shape was translated to on this connection (see `SQLQueryShape`).
    var shapes = SQLQueryShapes<PGTable, String>(limit: preparedLimit)

    /// Whether the server's encoding is UTF-8, from the `server_encoding` libpq received at
    /// connect (no round trip).
    var serverUsesUTF8: Bool {
        guard let handle, let value = PQparameterStatus(handle, "server_encoding") else { return false }
        return String(cString: value) == "UTF8"
    }

    /// Connects with a libpq connection string or URL. Throws
    /// ``SyncError/Code/authenticationFailed`` when the server refuses the credentials and
    /// ``SyncError/Code/transient`` when it cannot be reached; messages name host and port,
    /// never the password.
    static func connect(_ conninfo: String, password: String?) throws -> PGConnection {
        var attempt = 0
        while true {
            do {
                return try connectOnce(conninfo, password: password)
            } catch let error as SyncError where error.code == .transient && error.message.contains("too many clients") && attempt < 100 {
                // The server is at max_connections: wait for a slot rather than failing.
                attempt += 1
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
    }

    private static func connectOnce(_ conninfo: String, password: String?) throws -> PGConnection {
        guard let handle = PQconnectdb(conninfo) else {
            throw SyncError(.storageFailure, "libpq could not allocate a connection")
        }
        let host = PQhost(handle).map { String(cString: $0) } ?? "?"
        let port = PQport(handle).map { String(cString: $0) } ?? "?"
        let user = PQuser(handle).map { String(cString: $0) } ?? "?"
        let endpoint = "PostgreSQL server \(host) port \(port)"
        if PQstatus(handle) != CONNECTION_OK {
            var message = PQerrorMessage(handle).map { String(cString: $0) } ?? ""
            PQfinish(handle)
            message = redact(message.trimmingCharacters(in: .whitespacesAndNewlines), password: password)
            if message.contains("password authentication failed") || message.contains("authentication failed")
                || message.contains("no password supplied") || message.contains("28P01") {
                throw SyncError(.authenticationFailed, "\(endpoint) refused user '\(user)': \(message)")
            }
            throw SyncError(.transient, "cannot connect to \(endpoint): \(message)")
        }
        return PGConnection(handle: handle, endpoint: endpoint)
    }

    /// Removes every occurrence of the password from a server or libpq message.
    static func redact(_ message: String, password: String?) -> String {
        guard let password, !password.isEmpty else { return message }
        return message.replacingOccurrences(of: password, with: "***")
    }

    /// Closes the connection; closing twice is harmless.
    func close() {
        if let handle { PQfinish(handle) }
        handle = nil
    }

    /// Statements prepared on this connection, by SQL text, and their names.
    private var prepared: [String: String] = [:]
    /// The most statements one connection keeps prepared; beyond it statements run unnamed.
    static let preparedLimit = 512

    /// Runs one command with parameters (each as a parameter, never spliced) and returns its
    /// rows with every column in binary format. With `prepare`, the statement is prepared on
    /// the connection the first time its text is seen and reused afterwards (up to
    /// ``preparedLimit`` statements per connection). Throws a ``SyncError`` mapped from SQLSTATE.
    @discardableResult
    func execute(_ sql: String, _ parameters: [PGParameter] = [], prepare: Bool = false) throws -> PGResult {
        guard let handle else { throw SyncError(.storeClosed, "the PostgreSQL connection is closed") }
        let name = try preparedName(sql, parameters, prepare: prepare, handle)
        let result = PGConnection.withWire(parameters) { count, types, values, lengths, formats in
            if let name { return PQexecPrepared(handle, name, count, values, lengths, formats, 1) }
            return PQexecParams(handle, sql, count, types, values, lengths, formats, 1)
        }
        return try check(result, handle)
    }

    /// Runs statements in one round trip (libpq's pipeline mode) and returns the last one's
    /// result. When one fails the server skips the rest, and its error is thrown once every
    /// result has been read; inside a transaction the transaction is then aborted.
    @discardableResult
    func execute(_ statements: [PGStatement]) throws -> PGResult {
        guard let last = try executeAll(statements).last else { throw SyncError(.storageFailure, "no statement to run") }
        return last
    }

    /// Runs statements in one round trip, as ``execute(_:)-([PGStatement])``, and returns
    /// every statement's result, in order.
    func executeAll(_ statements: [PGStatement]) throws -> [PGResult] {
        guard let handle else { throw SyncError(.storeClosed, "the PostgreSQL connection is closed") }
        if statements.isEmpty { return [] }
        if statements.count == 1 {
            return [try execute(statements[0].sql, statements[0].parameters, prepare: statements[0].prepare)]
        }
        let names = try statements.map { try preparedName($0.sql, $0.parameters, prepare: $0.prepare, handle) }
        guard PQenterPipelineMode(handle) == 1 else { throw lostOrFailed(handle) }
        var sent = 0
        for (statement, name) in zip(statements, names) {
            let ok = PGConnection.withWire(statement.parameters) { count, types, values, lengths, formats in
                if let name { return PQsendQueryPrepared(handle, name, count, values, lengths, formats, 1) }
                return PQsendQueryParams(handle, statement.sql, count, types, values, lengths, formats, 1)
            }
            if ok != 1 { break }
            sent += 1
        }
        guard PQpipelineSync(handle) == 1 else {
            let error = lostOrFailed(handle)
            isBroken = true
            throw error
        }
        var firstError: (any Error)?
        var results: [PGResult] = []
        results.reserveCapacity(sent)
        for _ in 0..<sent {
            // Each statement's results end with a NULL.
            var outcome: OpaquePointer?
            while let result = PQgetResult(handle) {
                if outcome == nil { outcome = result } else { PQclear(result) }
            }
            guard let outcome else {
                firstError = firstError ?? lostOrFailed(handle)
                break
            }
            if PQresultStatus(outcome) == PGRES_PIPELINE_ABORTED {
                PQclear(outcome)
                continue
            }
            do {
                results.append(try check(outcome, handle))
            } catch {
                firstError = firstError ?? error
            }
        }
        // The sync point, then back to normal mode.
        var synced = false
        while let result = PQgetResult(handle) {
            if PQresultStatus(result) == PGRES_PIPELINE_SYNC { synced = true }
            PQclear(result)
            if synced { break }
        }
        if !synced || PQexitPipelineMode(handle) != 1 {
            isBroken = true
            throw firstError ?? lostOrFailed(handle)
        }
        if let firstError { throw firstError }
        if sent < statements.count || results.count < statements.count { throw lostOrFailed(handle) }
        return results
    }

    /// The error for a libpq call that failed outside a result.
    private func lostOrFailed(_ handle: OpaquePointer) -> SyncError {
        if PQstatus(handle) != CONNECTION_OK { isBroken = true }
        return SyncError(isBroken ? .transient : .storageFailure, "\(endpoint): \(String(cString: PQerrorMessage(handle)))")
    }

    /// The name the statement is prepared under (preparing it the first time), or `nil` to
    /// run it unnamed.
    private func preparedName(_ sql: String, _ parameters: [PGParameter], prepare: Bool, _ handle: OpaquePointer) throws -> String? {
        guard prepare else { return nil }
        if let existing = prepared[sql] { return existing }
        guard prepared.count < PGConnection.preparedLimit else { return nil }
        let name = "osync_\(prepared.count)"
        var types = parameters.map(\.typeOID)
        _ = try check(PQprepare(handle, name, sql, Int32(types.count), &types), handle)
        prepared[sql] = name
        return name
    }

    /// Lays the parameters out as libpq takes them, for the duration of `body`.
    private static func withWire<R>(_ parameters: [PGParameter],
                                    _ body: (Int32, UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?,
                                             UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R) -> R {
        let wire = parameters.map(\.wireBytes)
        let types: [UInt32] = parameters.map(\.typeOID)
        let lengths: [Int32] = wire.map { Int32($0?.count ?? 0) }
        let formats: [Int32] = parameters.map(\.format)
        let storage = UnsafeMutableRawPointer.allocate(byteCount: max(1, wire.reduce(0) { $0 + ($1?.count ?? 0) + 1 }),
                                                       alignment: 1)
        defer { storage.deallocate() }
        var values: [UnsafePointer<CChar>?] = []
        values.reserveCapacity(wire.count)
        var offset = 0
        for bytes in wire {
            guard let bytes else { values.append(nil); continue }
            let start = storage + offset
            bytes.withUnsafeBytes { raw in
                if !raw.isEmpty { start.copyMemory(from: raw.baseAddress!, byteCount: raw.count) }
            }
            start.storeBytes(of: 0, toByteOffset: bytes.count, as: UInt8.self)
            values.append(UnsafePointer(start.assumingMemoryBound(to: CChar.self)))
            offset += bytes.count + 1
        }
        return body(Int32(parameters.count), types, values, lengths, formats)
    }

    /// The result when the command succeeded; otherwise clears it and throws the mapped error.
    private func check(_ result: OpaquePointer?, _ handle: OpaquePointer) throws -> PGResult {
        guard let result else {
            isBroken = PQstatus(handle) != CONNECTION_OK
            throw SyncError(isBroken ? .transient : .storageFailure,
                            "\(endpoint): \(String(cString: PQerrorMessage(handle)))")
        }
        let status = PQresultStatus(result)
        if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK {
            return PGResult(result)
        }
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
        let message = PQresultErrorMessage(result).map { String(cString: $0) } ?? ""
        PQclear(result)
        if PQstatus(handle) != CONNECTION_OK || state.hasPrefix("08") || state.hasPrefix("57P") { isBroken = true }
        if state == "40001" || state == "40P01" { sawConflict = true }
        throw PGConnection.error(state: state, message: message.trimmingCharacters(in: .whitespacesAndNewlines),
                                 endpoint: endpoint, broken: isBroken)
    }

    /// Whether the connection is still usable.
    var isAlive: Bool {
        guard let handle, !isBroken else { return false }
        return PQstatus(handle) == CONNECTION_OK
    }

    static func error(state: String, message: String, endpoint: String, broken: Bool) -> SyncError {
        if broken { return SyncError(.transient, "\(endpoint): connection lost: \(message)") }
        switch state {
        case "40001", "40P01", "55P03", "57014": return SyncError(.busy, "\(endpoint): \(message) (SQLSTATE \(state))")
        case "28P01", "28000": return SyncError(.authenticationFailed, "\(endpoint): \(message)")
        // The store's own tables lack a table, column or type its catalog promises (someone
        // changed them outside OfflineSync), or PostgreSQL found a damaged page or index.
        case "42P01", "42703", "42804", "42883", "XX001", "XX002":
            return SyncError(.corrupted, "\(endpoint): the store's tables do not match its catalog or are damaged: \(message) (SQLSTATE \(state))")
        case _ where state.hasPrefix("08") || state.hasPrefix("57P"):
            return SyncError(.transient, "\(endpoint): \(message) (SQLSTATE \(state))")
        default: return SyncError(.storageFailure, "\(endpoint): \(message) (SQLSTATE \(state))")
        }
    }

}

/// A command's result (every column in binary format), read in place and freed with the
/// object. Used only on its connection's queue.
final class PGResult {
    private let result: OpaquePointer
    /// The number of rows.
    let count: Int
    /// The number of columns.
    let columnCount: Int

    init(_ result: OpaquePointer) {
        self.result = result
        count = Int(PQntuples(result))
        columnCount = Int(PQnfields(result))
    }

    deinit { PQclear(result) }

    /// Whether the value is SQL NULL.
    func isNull(_ row: Int, _ column: Int) -> Bool {
        PQgetisnull(result, Int32(row), Int32(column)) == 1
    }

    /// The value's bytes, valid while the result lives (empty for NULL).
    func withBytes<T>(_ row: Int, _ column: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        guard let pointer = PQgetvalue(result, Int32(row), Int32(column)) else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try body(UnsafeRawBufferPointer(start: UnsafeRawPointer(pointer), count: length))
    }

    /// The value's bytes, or `nil` for SQL NULL.
    func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        if isNull(row, column) { return nil }
        return withBytes(row, column) { Array($0) }
    }

    /// A binary `bigint` (or `integer`, `smallint`), or `nil` for NULL or an unexpected size.
    func int64(_ row: Int, _ column: Int) -> Int64? {
        if isNull(row, column) { return nil }
        return withBytes(row, column) { raw -> Int64? in
            switch raw.count {
            case 8: return Int64(bigEndian: raw.loadUnaligned(as: Int64.self))
            case 4: return Int64(Int32(bigEndian: raw.loadUnaligned(as: Int32.self)))
            case 2: return Int64(Int16(bigEndian: raw.loadUnaligned(as: Int16.self)))
            default: return nil
            }
        }
    }

    /// A binary `double precision`, or `nil` for NULL or an unexpected size.
    func double(_ row: Int, _ column: Int) -> Double? {
        if isNull(row, column) { return nil }
        return withBytes(row, column) { raw -> Double? in
            guard raw.count == 8 else { return nil }
            return Double(bitPattern: UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)))
        }
    }

    /// A binary `boolean`, or `nil` for NULL or an unexpected value.
    func bool(_ row: Int, _ column: Int) -> Bool? {
        if isNull(row, column) { return nil }
        return withBytes(row, column) { raw -> Bool? in
            guard raw.count == 1, raw[0] <= 1 else { return nil }
            return raw[0] == 1
        }
    }

    /// Every row's columns copied out: `nil` for SQL NULL, else the binary value.
    var rows: [[[UInt8]?]] {
        (0..<count).map { row in (0..<columnCount).map { bytes(row, $0) } }
    }
}
