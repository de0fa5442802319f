import COfflineSyncLMDB
import Foundation
import OfflineSync

/// Turns LMDB return codes into ``SyncError``s. Messages carry LMDB's `mdb_strerror` text and
/// what was being done, never keys or record contents.
enum LMDBFailure {
    /// The error for return code `rc` while doing `what`.
    static func error(_ rc: Int32, _ what: String) -> SyncError {
        let text = String(cString: mdb_strerror(rc))
        switch rc {
        case MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_PANIC:
            return SyncError(.corrupted, "LMDB \(what): \(text)")
        case MDB_INVALID:
            return SyncError(.notADatabase, "LMDB \(what): \(text)")
        case MDB_VERSION_MISMATCH:
            return SyncError(.unsupported, "LMDB \(what): \(text)")
        case MDB_READERS_FULL:
            return SyncError(.busy, "LMDB \(what): \(text) (raise Options.maxReaders)")
        case MDB_DBS_FULL:
            return SyncError(.limitExceeded, "LMDB \(what): \(text) (raise Options.maxDatabases)")
        case MDB_MAP_FULL:
            return SyncError(.limitExceeded, "LMDB \(what): \(text) (the map reached Options.maximumMapSize)")
        case EAGAIN, EBUSY:
            return SyncError(.busy, "LMDB \(what): \(text)")
        default:
            return SyncError(.storageFailure, "LMDB \(what): \(text)")
        }
    }

    /// Throws the error for `rc` unless it is `MDB_SUCCESS`.
    static func check(_ rc: Int32, _ what: @autoclosure () -> String) throws {
        if rc != MDB_SUCCESS { throw error(rc, what()) }
    }
}

/// Thrown inside a write transaction when LMDB reports `MDB_MAP_FULL`; the writer grows the
/// map and replays the transaction's log. Never escapes the store.
struct LMDBMapFull: Error {}

/// A read transaction needed a sub-database this process has no handle for yet.
struct LMDBUnopenedDatabase: Error {
    let name: String
}

/// Calls `body` with an `MDB_val` over `bytes` (valid only during the call).
@inline(__always)
func withVal<T>(_ bytes: [UInt8], _ body: (inout MDB_val) throws -> T) rethrows -> T {
    try bytes.withUnsafeBufferPointer { buffer in
        var val = MDB_val(mv_size: buffer.count, mv_data: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
        return try body(&val)
    }
}

extension MDB_val {
    /// The bytes LMDB points at (valid until the transaction changes or ends).
    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: mv_data, count: mv_size) }
    /// A copy of the bytes.
    var bytes: [UInt8] { Array(buffer) }
}

/// Big-endian fixed-width integers for keys and meta values.
enum BigEndian {
    static func bytes(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    static func uint64<C: Collection>(_ bytes: C) -> UInt64? where C.Element == UInt8 {
        guard bytes.count == 8 else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
