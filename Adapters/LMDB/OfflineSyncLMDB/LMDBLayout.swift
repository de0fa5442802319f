import OfflineSync
import OfflineSyncStoreKit

/// How the store lays out its data in LMDB (see Docs/LMDBAdapter.md).
///
/// - `offlinesync.meta`: the marker (`format` → ``marker``), the format version
///   (`version` → 8-byte big-endian), the next table number (`next-table`), and one entry per
///   table: `table:` + the table name's UTF-8 bytes → ``LMDBTable``.
/// - `t.<n>`: the records of table number `n`, key ``recordKey(_:)``, value
///   ``recordValue(_:)``: the record as ``ValueCodec`` encodes it, then the CRC-32C of those
///   bytes (format 2; format 1 had no checksum and is upgraded when opened).
/// - `i.<n>.<g>.<k>`: index `k` of generation `g` of table `n` (`MDB_DUPSORT`): key
///   ``LMDBIndexKey`` of the indexed values, data the record key.
enum LMDBLayout {
    /// The name of the meta sub-database.
    static let metaDatabase = "offlinesync.meta"
    /// The marker kept under `format` in the meta sub-database.
    static let marker: [UInt8] = Array("OfflineSync LMDB store".utf8)
    /// The storage format version the adapter writes and reads. Version 1 kept records
    /// without a checksum; opening one rewrites its records with one (``LMDBStore``'s bootstrap).
    static let formatVersion: UInt64 = 2
    /// The format that stored records without a checksum.
    static let uncheckedFormatVersion: UInt64 = 1

    static let formatKey: [UInt8] = Array("format".utf8)
    static let versionKey: [UInt8] = Array("version".utf8)
    static let nextTableKey: [UInt8] = Array("next-table".utf8)
    static let tablePrefix: [UInt8] = Array("table:".utf8)

    /// The meta key of a table.
    static func tableKey(_ name: String) -> [UInt8] { tablePrefix + Array(name.utf8) }

    /// The sub-database of table number `n`.
    static func tableDatabase(_ number: UInt64) -> String { "t.\(number)" }

    /// The sub-database of index `position` of generation `generation` of table `number`.
    static func indexDatabase(_ number: UInt64, generation: UInt64, position: Int) -> String {
        "i.\(number).\(generation).\(position)"
    }

    /// Ids up to this many UTF-8 bytes are their own key. LMDB keys are at most 511 bytes.
    static let directIdLength = 480

    /// The key of a record: its id's UTF-8 bytes when they fit (ids never contain NUL), or
    /// for a longer id the first ``directIdLength`` bytes, a NUL, a 64-bit hash of the whole id
    /// and a probe byte, so colliding long ids each get their own key. Keys sort like ids,
    /// except long ids sharing their first ``directIdLength`` bytes.
    static func recordKey(_ id: String, probe: UInt8 = 0) -> [UInt8] {
        let utf8 = Array(id.utf8)
        if utf8.count <= directIdLength { return utf8 }
        return longKeyBase(utf8) + [probe]
    }

    /// A record's stored value: its ``ValueCodec`` encoding, then the CRC-32C of that
    /// encoding, 4 bytes big-endian.
    static func recordValue(_ record: Record) -> [UInt8] {
        var value: [UInt8] = []
        value.reserveCapacity(256)
        ValueCodec.write(record, into: &value)
        appendChecksum(to: &value)
        return value
    }

    /// `encoded` followed by its CRC-32C, 4 bytes big-endian.
    static func sealed(_ encoded: [UInt8]) -> [UInt8] {
        var value = encoded
        appendChecksum(to: &value)
        return value
    }

    /// Appends the CRC-32C of `value`, 4 bytes big-endian, in place (a new array per record
    /// for the four bytes cost a write 1.2%, `perf`, local-writes-lmdb).
    private static func appendChecksum(to value: inout [UInt8]) {
        let sum = CRC32C.checksum(value)
        value.append(UInt8(sum >> 24))
        value.append(UInt8((sum >> 16) & 0xFF))
        value.append(UInt8((sum >> 8) & 0xFF))
        value.append(UInt8(sum & 0xFF))
    }

    /// Decodes a stored value (``recordValue(_:)``). A checksum that does not match throws
    /// ``SyncError/Code/corrupted``: a byte of the record changed on disk.
    static func decodeRecord(_ value: UnsafeRawBufferPointer) throws -> Record {
        guard value.count > 4 else {
            throw SyncError(.corrupted, "the LMDB store holds a record too short for its checksum: the file is damaged")
        }
        let body = UnsafeRawBufferPointer(rebasing: value[..<(value.count - 4)])
        var sum = CRC32C()
        sum.update(body)
        let stored = value[(value.count - 4)...].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard sum.value == stored else {
            throw SyncError(.corrupted, "an LMDB record fails its checksum: the store file is damaged")
        }
        return try ValueCodec.decodeRecord(body)
    }

    /// Whether an id needs a hashed key.
    static func isLong(_ id: String) -> Bool { id.utf8.count > directIdLength }

    /// The part shared by every probe of a long id's key.
    static func longKeyBase(_ utf8: [UInt8]) -> [UInt8] {
        Array(utf8.prefix(directIdLength)) + [0] + BigEndian.bytes(FNV1a.hash64(utf8))
    }
}

/// A table as stored in the meta sub-database: its number, index generation and schema.
struct LMDBTable {
    let number: UInt64
    let generation: UInt64
    let schema: TableSchema
    /// The encoded entry (compared to reuse decoded entries).
    let bytes: [UInt8]
    /// The indexes the schema asks for: one per `indexed` field, then the composite ones.
    /// Kept, not derived per use: every write and every planned query reads them, and
    /// deriving them each time was a seventh of the queue's per-write look-up in `perf`.
    let indexes: [[String]]
    /// Each index's sub-database name, by position.
    private let indexDatabases: [String]

    init(number: UInt64, generation: UInt64, schema: TableSchema) {
        self.init(number: number, generation: generation, schema: schema,
                  bytes: BigEndian.bytes(number) + BigEndian.bytes(generation) + ValueCodec.encode(schema))
    }

    private init(number: UInt64, generation: UInt64, schema: TableSchema, bytes: [UInt8]) {
        self.number = number
        self.generation = generation
        self.schema = schema
        self.bytes = bytes
        indexes = Self.indexes(of: schema)
        indexDatabases = indexes.indices.map { LMDBLayout.indexDatabase(number, generation: generation, position: $0) }
    }

    init(decoding bytes: [UInt8]) throws {
        guard bytes.count > 16, let number = BigEndian.uint64(bytes[0..<8]),
              let generation = BigEndian.uint64(bytes[8..<16]) else {
            throw SyncError(.corrupted, "the LMDB store's meta database holds a malformed table entry")
        }
        self.init(number: number, generation: generation, schema: try ValueCodec.decodeSchema(Array(bytes[16...])), bytes: bytes)
    }

    static func indexes(of schema: TableSchema) -> [[String]] {
        schema.fields.filter(\.indexed).map { [$0.name] } + schema.indexes.map(\.fields)
    }

    var database: String { LMDBLayout.tableDatabase(number) }

    func indexDatabase(_ position: Int) -> String {
        indexDatabases[position]
    }
}

/// The key of an index entry: each indexed value in an order-preserving form, concatenated,
/// cut at ``maxLength`` bytes. Cut keys only make index scans return extra candidates, which
/// the query evaluator filters out; plans that rely on index order use fixed-width fields only.
enum LMDBIndexKey {
    /// The longest index key (LMDB keys are at most 511 bytes).
    static let maxLength = 480

    static func key(_ record: Record, _ fields: [String]) -> [UInt8] {
        var out: [UInt8] = []
        // Room for a typical key at once: growing it value by value reallocated it several
        // times per key (building the queue row's three index keys was 8% of a local write
        // in `perf`, local-writes-lmdb).
        out.reserveCapacity(64)
        for field in fields {
            append(record[field], to: &out)
            if out.count >= maxLength { return Array(out.prefix(maxLength)) }
        }
        return out
    }

    /// Appends one value. Fixed-width kinds (null, bool, int, date) sort like
    /// ``QueryEvaluator/orderCompare(_:_:)`` within a field declared of that kind.
    static func append(_ value: Value, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(0)
        case .bool(let b): out.append(1); out.append(b ? 1 : 0)
        case .int(let i): out.append(2); appendBigEndian(UInt64(bitPattern: i) ^ (1 << 63), to: &out)
        case .string(var s): out.append(3); s.withUTF8 { escaped($0, into: &out) }
        case .date(let d): out.append(4); appendBigEndian(UInt64(bitPattern: d.millisecondsSince1970) ^ (1 << 63), to: &out)
        default: out.append(5); escaped(ValueCodec.encode(value), into: &out)
        }
    }

    /// The 8 bytes of `value`, most significant first (`BigEndian/bytes(_:)`, without an array).
    private static func appendBigEndian(_ value: UInt64, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }

    /// Bytes with NUL escaped as `00 01` and terminated by `00 00`, so values are self-delimiting.
    private static func escaped<Bytes: Collection<UInt8>>(_ bytes: Bytes, into out: inout [UInt8]) {
        out.reserveCapacity(out.count + bytes.count + 2)
        for byte in bytes {
            out.append(byte)
            if byte == 0 { out.append(1) }
        }
        out.append(0)
        out.append(0)
    }

    /// Whether values of this declared type have a fixed-width encoding (so index order is
    /// the evaluator's order).
    static func isFixedWidth(_ type: FieldType) -> Bool {
        switch type {
        case .bool, .int, .date: return true
        default: return false
        }
    }

    /// Whether an equality literal of this kind on a field of this declared type selects
    /// exactly the entries with the literal's encoding.
    static func isExactEquality(_ literal: Value, _ type: FieldType) -> Bool {
        switch (literal, type) {
        case (.bool, .bool), (.int, .int), (.string, .string), (.date, .date): return true
        default: return false
        }
    }
}
