import OfflineSync
/// What one committed transaction or table definition changed, as ``MemoryTables`` hands it
/// to a commit hook: table definitions, then per table the records upserted and the ids
/// deleted. ``encode()`` turns it into compact bytes that `init(decoding:)` reads back, so
/// an adapter can persist it and replay it with ``MemoryTables/apply(_:)``.
///
/// Encoding (version 1): a format byte `1`; a varint count of definitions, each a varint
/// length and the ``ValueCodec``-encoded schema object; a varint count of tables, each its
/// name (varint length + UTF-8), a varint count of upserts (each a varint length and the
/// ``ValueCodec``-encoded record) and a varint count of deleted ids (varint length + UTF-8).
public struct ChangeSet: Sendable, Hashable {
    /// The record changes of one table.
    public struct TableChanges: Sendable, Hashable {
        /// The table's name.
        public var table: String
        /// Records inserted or replaced, whole.
        public var upserts: [Record]
        /// Ids of records deleted.
        public var deletes: [String]

        /// Describes the changes of one table.
        public init(table: String, upserts: [Record] = [], deletes: [String] = []) {
            self.table = table
            self.upserts = upserts
            self.deletes = deletes
        }
    }

    /// Tables defined or redefined, applied before the record changes.
    public var definitions: [TableSchema]
    /// Record changes, per table.
    public var tables: [TableChanges]

    /// Creates a change set.
    public init(definitions: [TableSchema] = [], tables: [TableChanges] = []) {
        self.definitions = definitions
        self.tables = tables
    }

    /// Whether it changes nothing.
    public var isEmpty: Bool {
        definitions.isEmpty && tables.allSatisfy { $0.upserts.isEmpty && $0.deletes.isEmpty }
    }

    /// The number of upserted and deleted records.
    public var recordCount: Int { tables.reduce(0) { $0 + $1.upserts.count + $1.deletes.count } }

    private static let format: UInt8 = 1

    /// The compact binary form (see the type's documentation).
    public func encode() -> [UInt8] {
        var out: [UInt8] = [ChangeSet.format]
        out.reserveCapacity(64 + recordCount * 256)
        ValueCodec.writeVarint(UInt64(definitions.count), into: &out)
        for schema in definitions { Self.writeBlock(ValueCodec.encode(schema), into: &out) }
        ValueCodec.writeVarint(UInt64(tables.count), into: &out)
        var prefix: [UInt8] = []
        for table in tables {
            Self.writeBlock(Array(table.table.utf8), into: &out)
            ValueCodec.writeVarint(UInt64(table.upserts.count), into: &out)
            for record in table.upserts {
                // Encoded in place after room for a two-byte length (records of 128 bytes to
                // 16 KiB); a length of another size moves the record's bytes once. Encoding
                // each into a scratch buffer and copying it after its length was 5% of a
                // write to the encrypted file (`perf`, local-writes-encrypted-file).
                let start = out.count
                out.append(0)
                out.append(0)
                ValueCodec.write(record, into: &out)
                prefix.removeAll(keepingCapacity: true)
                ValueCodec.writeVarint(UInt64(out.count - start - 2), into: &prefix)
                out.replaceSubrange(start..<(start + 2), with: prefix)
            }
            ValueCodec.writeVarint(UInt64(table.deletes.count), into: &out)
            for id in table.deletes {
                ValueCodec.writeVarint(UInt64(id.utf8.count), into: &out)
                out.append(contentsOf: id.utf8)
            }
        }
        return out
    }

    /// Reads the bytes ``encode()`` produced. Throws `SyncError/Code/corrupted` for anything
    /// else (never traps).
    public init(decoding bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { try ChangeSet(decoding: $0) }
    }

    /// Reads the bytes ``encode()`` produced from raw memory. Throws `SyncError/Code/corrupted`.
    public init(decoding buffer: UnsafeRawBufferPointer) throws {
        var reader = Reader(buffer: buffer)
        guard try reader.byte() == ChangeSet.format else { throw SyncError(.corrupted, "unknown change set format") }
        var definitions: [TableSchema] = []
        for _ in 0..<(try reader.count()) {
            definitions.append(try ValueCodec.decodeSchema(try reader.block()))
        }
        var tables: [TableChanges] = []
        for _ in 0..<(try reader.count()) {
            var table = TableChanges(table: try reader.string())
            let upserts = try reader.count()
            table.upserts.reserveCapacity(upserts)
            for _ in 0..<upserts { table.upserts.append(try ValueCodec.decodeRecord(try reader.block())) }
            for _ in 0..<(try reader.count()) { table.deletes.append(try reader.string()) }
            tables.append(table)
        }
        guard reader.offset == buffer.count else { throw SyncError(.corrupted, "trailing bytes after a change set") }
        self.init(definitions: definitions, tables: tables)
    }

    private static func writeBlock(_ bytes: [UInt8], into out: inout [UInt8]) {
        ValueCodec.writeVarint(UInt64(bytes.count), into: &out)
        out.append(contentsOf: bytes)
    }


    private struct Reader {
        let buffer: UnsafeRawBufferPointer
        var offset = 0

        mutating func byte() throws -> UInt8 {
            guard offset < buffer.count else { throw SyncError(.corrupted, "change set ends early") }
            defer { offset += 1 }
            return buffer[offset]
        }

        mutating func varint() throws -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let b = try byte()
                guard shift < 63 || (shift == 63 && b <= 1) else { throw SyncError(.corrupted, "varint overflows 64 bits") }
                result |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return result }
                shift += 7
            }
        }

        /// A count of items, each at least one byte long, so it cannot exceed what is left.
        mutating func count() throws -> Int {
            let n = try varint()
            guard n <= UInt64(buffer.count - offset) else { throw SyncError(.corrupted, "count exceeds the change set") }
            return Int(n)
        }

        mutating func block() throws -> UnsafeRawBufferPointer {
            let n = try count()
            defer { offset += n }
            return UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + n)])
        }

        mutating func string() throws -> String {
            guard let s = String(validating: try block(), as: UTF8.self) else {
                throw SyncError(.corrupted, "a name in a change set is not valid UTF-8")
            }
            return s
        }
    }
}
