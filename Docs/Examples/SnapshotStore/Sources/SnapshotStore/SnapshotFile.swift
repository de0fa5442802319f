#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// The snapshot file: a fixed header, then every table's schema and records.
///
/// ```
/// offset  size  field
///      0     8  magic "OSSNAP\r\n"
///      8     4  format version, little-endian (1)
///     12     4  reserved, zero
///     16     8  payload length, little-endian
///     24     8  FNV-1a 64 checksum of the payload, little-endian
///     32     …  payload
/// ```
///
/// The payload is a table count, then per table its schema (JSON, length-prefixed), a record
/// count and each record in the core's ``ValueCodec`` encoding (length-prefixed). Counts and
/// lengths are 32-bit little-endian. Every commit writes a new file beside the old one,
/// flushes it and renames it over the old one, so the file is always one whole snapshot.
enum SnapshotFile {
    static let magic: [UInt8] = Array("OSSNAP\r\n".utf8)
    static let version: UInt32 = 1
    static let headerSize = 32

    /// Encodes the tables as a complete file.
    static func encode(_ tables: [ExactString: SnapshotStore.Table]) throws -> [UInt8] {
        var payload: [UInt8] = []
        append(UInt32(tables.count), to: &payload)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for (_, table) in tables.sorted(by: { Value.utf8Less($0.key.value, $1.key.value) }) {
            let schema = try [UInt8](encoder.encode(table.schema))
            append(UInt32(schema.count), to: &payload)
            payload += schema
            append(UInt32(table.rows.count), to: &payload)
            for record in table.rows.values {
                let bytes = ValueCodec.encode(record)
                append(UInt32(bytes.count), to: &payload)
                payload += bytes
            }
        }
        var file = magic
        append(version, to: &file)
        append(UInt32(0), to: &file)
        append(UInt64(payload.count), to: &file)
        append(checksum(payload), to: &file)
        return file + payload
    }

    /// Decodes a file written by ``encode(_:)``. Throws ``SyncError/Code/notADatabase`` when
    /// the file does not start with the magic and ``SyncError/Code/corrupted`` when anything
    /// after it is damaged; `path` only names the file in messages.
    static func decode(_ bytes: [UInt8], path: String) throws -> [ExactString: SnapshotStore.Table] {
        guard bytes.count >= magic.count, Array(bytes.prefix(magic.count)) == magic else {
            throw SyncError(.notADatabase, "\(path) is not a snapshot store (its first bytes are not the snapshot magic)")
        }
        guard bytes.count >= headerSize else {
            throw SyncError(.corrupted, "\(path) ends inside the snapshot header (\(bytes.count) bytes)")
        }
        var reader = Reader(bytes: bytes, offset: magic.count, path: path)
        let fileVersion = try reader.uint32()
        guard fileVersion == version else {
            throw SyncError(.unsupported, "\(path) has snapshot format version \(fileVersion); this adapter reads version \(version)")
        }
        _ = try reader.uint32()
        let length = try reader.uint64()
        let sum = try reader.uint64()
        guard length == UInt64(bytes.count - headerSize) else {
            throw SyncError(.corrupted, "\(path) should hold \(length) payload bytes but holds \(bytes.count - headerSize)")
        }
        guard checksum(bytes[headerSize...]) == sum else {
            throw SyncError(.corrupted, "\(path) fails its checksum")
        }
        var tables: [ExactString: SnapshotStore.Table] = [:]
        let decoder = JSONDecoder()
        for _ in 0..<(try reader.uint32()) {
            let schemaBytes = try reader.bytes(Int(try reader.uint32()))
            let schema: TableSchema
            do {
                schema = try decoder.decode(TableSchema.self, from: Data(schemaBytes))
            } catch {
                throw SyncError(.corrupted, "\(path) holds a table schema that does not decode")
            }
            var rows: [ExactString: Record] = [:]
            let count = try reader.uint32()
            rows.reserveCapacity(Int(count))
            for _ in 0..<count {
                let record = try reader.bytes(Int(try reader.uint32())).withUnsafeBytes { try ValueCodec.decodeRecord($0) }
                rows[ExactString(record.id)] = record
            }
            tables[ExactString(schema.name)] = SnapshotStore.Table(schema: schema, rows: rows)
        }
        guard reader.offset == bytes.count else { throw SyncError(.corrupted, "\(path) has bytes after its last table") }
        return tables
    }

    /// Writes `bytes` as the file at `path` so that a crash leaves either the old file or the
    /// new one: a temporary file beside it, flushed, renamed over it, and the directory flushed.
    static func replace(_ path: String, with bytes: [UInt8]) throws {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw failure("cannot create \(temporary)") }
        var ok = false
        defer {
            if !ok { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            var written = 0
            try bytes.withUnsafeBytes { buffer in
                while written < buffer.count {
                    let n = write(fd, buffer.baseAddress! + written, buffer.count - written)
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw failure("cannot write \(temporary)")
                    }
                    written += n
                }
            }
            guard fsync(fd) == 0 else { throw failure("cannot flush \(temporary)") }
        }
        guard rename(temporary, path) == 0 else { throw failure("cannot rename \(temporary) to \(path)") }
        ok = true
        let directory = open(URL(fileURLWithPath: path).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            defer { close(directory) }
            guard fsync(directory) == 0 else { throw failure("cannot flush the directory of \(path)") }
        }
    }

    private static func failure(_ what: String) -> SyncError {
        SyncError(.storageFailure, "\(what): \(String(cString: strerror(errno)))")
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    /// FNV-1a, 64 bits: enough to tell a damaged file from a whole one (not an attacker's).
    static func checksum<C: Collection>(_ bytes: C) -> UInt64 where C.Element == UInt8 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// Reads the file front to back, checking every length against what is left.
    struct Reader {
        let bytes: [UInt8]
        var offset: Int
        let path: String

        mutating func bytes(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, count <= bytes.count - offset else {
                throw SyncError(.corrupted, "\(path) ends inside a snapshot entry")
            }
            defer { offset += count }
            return bytes[offset..<(offset + count)]
        }

        mutating func uint32() throws -> UInt32 {
            try bytes(4).reversed().reduce(0) { $0 << 8 | UInt32($1) }
        }

        mutating func uint64() throws -> UInt64 {
            try bytes(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
    }
}
