import COfflineSyncPostgreSQL
import Dispatch
import Foundation
import OfflineSync

/// One value bound to a `$n` parameter: raw bytes (sent in binary format, for `bytea`) or
/// text (sent in text format; the server parses it as the parameter's inferred type).
enum PGParameter {
    case bytes([UInt8])
    case text(String)
}

/// One PostgreSQL connection (`PGconn`). Owned by one ``PGWorker`` and used only on its
/// serial queue; `close()` is explicit.
final class PGConnection {
    private var handle: OpaquePointer?
    /// Where the connection goes, for messages (never the password).
    let endpoint: String
    /// Set when a command failed because the connection is gone: the worker then reconnects.
    private(set) var isBroken = false

    private init(handle: OpaquePointer, endpoint: String) {
        self.handle = handle
        self.endpoint = endpoint
    }

    deinit { assert(handle == nil, "PGConnection was not closed") }

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

    /// Runs one command with parameters (each as a parameter, never spliced) and returns its
    /// rows with every column in binary format. Throws a ``SyncError`` mapped from SQLSTATE.
    @discardableResult
    func execute(_ sql: String, _ parameters: [PGParameter] = []) throws -> PGRows {
        guard let handle else { throw SyncError(.storeClosed, "the PostgreSQL connection is closed") }
        let count = parameters.count
        let buffers: [[UInt8]] = parameters.map { parameter in
            switch parameter {
            case .bytes(let bytes): return bytes
            case .text(let text): return Array(text.utf8) + [0]
            }
        }
        var lengths: [Int32] = buffers.map { Int32($0.count) }
        var formats: [Int32] = parameters.map { if case .bytes = $0 { return 1 } else { return 0 } }
        let copies: [UnsafeMutablePointer<CChar>] = buffers.map { buffer in
            let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: max(buffer.count, 1))
            pointer.initialize(to: 0)
            buffer.withUnsafeBytes { raw in
                if !raw.isEmpty { UnsafeMutableRawPointer(pointer).copyMemory(from: raw.baseAddress!, byteCount: raw.count) }
            }
            return pointer
        }
        defer { for pointer in copies { pointer.deallocate() } }
        var values: [UnsafePointer<CChar>?] = copies.map { UnsafePointer($0) }
        let result: OpaquePointer? = PQexecParams(handle, sql, Int32(count), nil, &values, &lengths, &formats, 1)
        guard let result else {
            isBroken = PQstatus(handle) != CONNECTION_OK
            throw SyncError(isBroken ? .transient : .storageFailure,
                            "\(endpoint): \(String(cString: PQerrorMessage(handle)))")
        }
        let status = PQresultStatus(result)
        if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK {
            return PGRows(result)
        }
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
        let message = PQresultErrorMessage(result).map { String(cString: $0) } ?? ""
        PQclear(result)
        if PQstatus(handle) != CONNECTION_OK || state.hasPrefix("08") || state.hasPrefix("57P") { isBroken = true }
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
        case _ where state.hasPrefix("08") || state.hasPrefix("57P"):
            return SyncError(.transient, "\(endpoint): \(message) (SQLSTATE \(state))")
        default: return SyncError(.storageFailure, "\(endpoint): \(message) (SQLSTATE \(state))")
        }
    }

}

/// The rows of a result, copied out of libpq (binary format).
struct PGRows {
    /// Every row's columns: `nil` for SQL NULL, else the binary value.
    var rows: [[[UInt8]?]] = []

    init(_ result: OpaquePointer) {
        defer { PQclear(result) }
        let rowCount = PQntuples(result), columnCount = PQnfields(result)
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var columns: [[UInt8]?] = []
            for column in 0..<columnCount {
                if PQgetisnull(result, row, column) == 1 { columns.append(nil); continue }
                let length = Int(PQgetlength(result, row, column))
                let pointer = PQgetvalue(result, row, column)!
                columns.append(pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
                    Array(UnsafeBufferPointer(start: $0, count: length))
                })
            }
            rows.append(columns)
        }
    }

    /// A binary `bigint` column as an integer.
    static func int64(_ bytes: [UInt8]?) -> Int64 {
        guard let bytes, bytes.count == 8 else { return 0 }
        return bytes.reduce(0) { ($0 << 8) | Int64($1) }
    }
}
