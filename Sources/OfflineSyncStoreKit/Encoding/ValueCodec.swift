import OfflineSync
/// A compact, versioned binary encoding of values and records, shared by every adapter that
/// stores encoded values (undeclared fields in SQL stores, whole records in key/value stores).
///
/// Layout: a tag byte, then the payload. Integers and dates are zig-zag varints, doubles
/// their 8 IEEE bytes (little-endian, so `-0.0` and every bit pattern survive), strings and
/// bytes a varint length and the raw bytes, arrays and objects a varint count and their
/// elements. Decoding checks every length against the input and fails with
/// `SyncError/Code/corrupted` rather than trapping.
public enum ValueCodec {
    private enum Tag: UInt8 {
        case null = 0, `false` = 1, `true` = 2, int = 3, double = 4, string = 5, bytes = 6, date = 7, array = 8, object = 9
    }

    /// The deepest nesting of arrays and objects the decoder accepts.
    public static let maxDepth = 256
    private static let recordFormat: UInt8 = 1

    /// Encodes a value.
    public static func encode(_ value: Value) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        write(value, into: &out)
        return out
    }

    /// The bytes of `encode(.object(…))` for an object given as its entries, whose keys the
    /// caller guarantees are distinct (byte for byte): no dictionary is built to encode them.
    public static func encodeObject(distinct entries: [(key: String, value: Value)]) -> [UInt8] {
        encodeObject(entries)
    }

    /// The same bytes for entries given as a slice (a row of `ValidatedRows`). Two concrete
    /// overloads rather than one generic function: a generic one called from an adapter's
    /// module ran unspecialised, at twice the cost (`perf`, push-10k-server).
    public static func encodeObject(distinct entries: ArraySlice<(key: String, value: Value)>) -> [UInt8] {
        encodeObject(entries)
    }

    private static func encodeObject(_ entries: some Collection<(key: String, value: Value)>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        out.append(Tag.object.rawValue)
        writeEntries(entries, count: entries.count, into: &out)
        return out
    }

    /// Decodes a value produced by `encode(_:)`. Throws `SyncError/Code/corrupted`.
    public static func decode(_ bytes: [UInt8]) throws -> Value {
        try bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(buffer: UnsafeRawBufferPointer(buffer))
            let value = try reader.value(depth: 0)
            guard reader.atEnd else { throw SyncError(.corrupted, "trailing bytes after an encoded value") }
            return value
        }
    }

    /// Decodes a value from raw memory (for adapters that hand out borrowed buffers).
    public static func decode(_ buffer: UnsafeRawBufferPointer) throws -> Value {
        var reader = Reader(buffer: buffer)
        let value = try reader.value(depth: 0)
        guard reader.atEnd else { throw SyncError(.corrupted, "trailing bytes after an encoded value") }
        return value
    }

    /// Decodes an object produced by `encode(.object(…))` as its entries, with room for
    /// `extra` more: a store that adds a row's column values to its undeclared fields sets
    /// them without growing the dictionary (growing it rehashed every entry: 7% of the
    /// server's side of a pull, `perf`, pull-1m). `nil` when the bytes hold another kind of
    /// value; throws `SyncError/Code/corrupted` as ``decode(_:)-(UnsafeRawBufferPointer)`` does.
    package static func decodeObject(_ buffer: UnsafeRawBufferPointer, reservingExtra extra: Int) throws -> [String: Value]? {
        var reader = Reader(buffer: buffer)
        guard try reader.byte() == Tag.object.rawValue else { return nil }
        let object = try reader.entries(depth: 0, extra: extra)
        guard reader.atEnd else { throw SyncError(.corrupted, "trailing bytes after an encoded value") }
        return object
    }

    /// Encodes a whole record, system properties included.
    public static func encode(_ record: Record) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(record, into: &out)
        return out
    }

    /// Appends the bytes of ``encode(_:)-(Record)`` to `out` (no intermediate array).
    public static func write(_ record: Record, into out: inout [UInt8]) {
        out.append(recordFormat)
        writeString(record.id, into: &out)
        if let version = record.version { out.append(1); writeString(version, into: &out) } else { out.append(0) }
        if let updatedAt = record.updatedAt {
            out.append(1); writeVarint(zigzag(updatedAt.millisecondsSince1970), into: &out)
        } else { out.append(0) }
        out.append(record.deleted ? 1 : 0)
        out.append(Tag.object.rawValue)
        writeEntries(record.fields, count: record.fields.count, into: &out)
    }

    /// Decodes a record produced by ``encode(_:)-(Record)``. Throws `SyncError/Code/corrupted`.
    public static func decodeRecord(_ bytes: [UInt8]) throws -> Record {
        try bytes.withUnsafeBufferPointer { try decodeRecord(UnsafeRawBufferPointer($0)) }
    }

    /// Decodes a record from raw memory.
    public static func decodeRecord(_ buffer: UnsafeRawBufferPointer) throws -> Record {
        try decodeRecord(buffer, reservingExtra: 0)
    }

    /// ``decodeRecord(_:)-(UnsafeRawBufferPointer)`` with room for `extra` more fields, for a
    /// reader that adds its own to the record's (the service adds three to each pushed item's:
    /// growing the dictionary rehashed every field, 8% of applying a push, `perf`).
    package static func decodeRecord(_ buffer: UnsafeRawBufferPointer, reservingExtra extra: Int) throws -> Record {
        var reader = Reader(buffer: buffer)
        guard try reader.byte() == recordFormat else { throw SyncError(.corrupted, "unknown record format") }
        let id = try reader.string()
        let version: String? = try reader.flag() ? try reader.string() : nil
        let updatedAt: Timestamp? = try reader.flag() ? Timestamp(millisecondsSince1970: unzigzag(try reader.varint())) : nil
        let deleted = try reader.flag()
        guard try reader.byte() == Tag.object.rawValue else { throw SyncError(.corrupted, "record fields are not an object") }
        let fields = try reader.entries(depth: 0, extra: extra)
        guard reader.atEnd else { throw SyncError(.corrupted, "trailing bytes after an encoded record") }
        return Record(id: id, fields: fields, version: version, updatedAt: updatedAt, deleted: deleted)
    }

    /// Appends the bytes of ``encode(_:)-(Value)`` to `out` (no intermediate array).
    public static func write(_ value: Value, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(Tag.null.rawValue)
        case .bool(let b): out.append(b ? Tag.true.rawValue : Tag.false.rawValue)
        case .int(let i): out.append(Tag.int.rawValue); writeVarint(zigzag(i), into: &out)
        case .double(let d):
            out.append(Tag.double.rawValue)
            var bits = d.bitPattern.littleEndian
            withUnsafeBytes(of: &bits) { out.append(contentsOf: $0) }
        case .string(let s): out.append(Tag.string.rawValue); writeString(s, into: &out)
        case .bytes(let b):
            out.append(Tag.bytes.rawValue); writeVarint(UInt64(b.count), into: &out); out.append(contentsOf: b)
        case .date(let t): out.append(Tag.date.rawValue); writeVarint(zigzag(t.millisecondsSince1970), into: &out)
        case .array(let items):
            out.append(Tag.array.rawValue); writeVarint(UInt64(items.count), into: &out)
            for item in items { write(item, into: &out) }
        case .object(let object):
            out.append(Tag.object.rawValue)
            writeEntries(object, count: object.count, into: &out)
        }
    }

    /// An object's count and entries, keys sorted by UTF-8 bytes so equal objects encode to
    /// equal bytes. The entries themselves are sorted, so no key is looked up again; small
    /// objects (every record's fields) are sorted on the stack by their keys' first 8 bytes.
    private static func writeEntries<Entries: Sequence<(key: String, value: Value)>>(
        _ object: Entries, count: Int, into out: inout [UInt8]
    ) {
        writeVarint(UInt64(count), into: &out)
        switch count {
        case 0: return
        case 1:
            var entries = object.makeIterator()
            let (key, value) = entries.next()!
            writeString(key, into: &out)
            write(value, into: &out)
        case 2...32:
            withUnsafeTemporaryAllocation(of: (prefix: UInt64, key: String, value: Value).self,
                                          capacity: count) { buffer in
                // Insertion sort: each entry is placed at the end, then moved before the
                // entries whose keys order after it.
                var count = 0
                for (key, value) in object {
                    buffer.initializeElement(at: count, to: (utf8Prefix(key), key, value))
                    var position = count
                    while position > 0, keyLess(buffer, position, position - 1) {
                        buffer.swapAt(position, position - 1)
                        position -= 1
                    }
                    count += 1
                }
                for position in 0..<count {
                    writeString(buffer[position].key, into: &out)
                    write(buffer[position].value, into: &out)
                }
                buffer.baseAddress!.deinitialize(count: count)
            }
        default:
            var entries = Array(object)
            entries.sort { Value.utf8Less($0.key, $1.key) }
            for (key, value) in entries {
                writeString(key, into: &out)
                write(value, into: &out)
            }
        }
    }

    /// The first 8 UTF-8 bytes of `s`, big-endian, zero-padded: when two prefixes differ they
    /// order as the strings' bytes do; when equal the strings must be compared in full.
    private static func utf8Prefix(_ s: String) -> UInt64 {
        var prefix: UInt64 = 0
        var shift: UInt64 = 56
        for byte in s.utf8 {
            prefix |= UInt64(byte) << shift
            if shift == 0 { break }
            shift -= 8
        }
        return prefix
    }

    private static func keyLess(_ buffer: UnsafeMutableBufferPointer<(prefix: UInt64, key: String, value: Value)>,
                                _ a: Int, _ b: Int) -> Bool {
        let pa = buffer[a].prefix, pb = buffer[b].prefix
        return pa != pb ? pa < pb : Value.utf8Less(buffer[a].key, buffer[b].key)
    }

    private static func writeString(_ s: String, into out: inout [UInt8]) {
        let utf8 = s.utf8
        writeVarint(UInt64(utf8.count), into: &out)
        out.append(contentsOf: utf8)
    }

    /// Appends an unsigned LEB128 varint (shared with ``ChangeSet``).
    static func writeVarint(_ value: UInt64, into out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    private static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }
    private static func unzigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1) }

    private struct Reader {
        let buffer: UnsafeRawBufferPointer
        var offset = 0

        var atEnd: Bool { offset == buffer.count }

        mutating func byte() throws -> UInt8 {
            guard offset < buffer.count else { throw SyncError(.corrupted, "encoded value ends early") }
            defer { offset += 1 }
            return buffer[offset]
        }

        mutating func flag() throws -> Bool {
            switch try byte() {
            case 0: return false
            case 1: return true
            default: throw SyncError(.corrupted, "invalid flag byte")
            }
        }

        mutating func varint() throws -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let b = try byte()
                if shift == 63 && b > 1 { throw SyncError(.corrupted, "varint overflows 64 bits") }
                result |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return result }
                shift += 7
                if shift > 63 { throw SyncError(.corrupted, "varint overflows 64 bits") }
            }
        }

        mutating func length() throws -> Int {
            let n = try varint()
            guard n <= UInt64(buffer.count - offset) else { throw SyncError(.corrupted, "length exceeds the encoded data") }
            return Int(n)
        }

        mutating func bytes() throws -> [UInt8] {
            let n = try length()
            defer { offset += n }
            return Array(buffer[offset..<(offset + n)])
        }

        mutating func string() throws -> String {
            let n = try length()
            defer { offset += n }
            guard let s = UTF8Text.string(UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + n)])) else {
                throw SyncError(.corrupted, "string is not valid UTF-8")
            }
            return s
        }

        mutating func value(depth: Int) throws -> Value {
            guard depth <= ValueCodec.maxDepth else { throw SyncError(.corrupted, "nesting deeper than \(ValueCodec.maxDepth)") }
            guard let tag = Tag(rawValue: try byte()) else { throw SyncError(.corrupted, "unknown value tag") }
            switch tag {
            case .null: return .null
            case .false: return .bool(false)
            case .true: return .bool(true)
            case .int: return .int(unzigzag(try varint()))
            case .double:
                guard buffer.count - offset >= 8 else { throw SyncError(.corrupted, "double ends early") }
                var bits: UInt64 = 0
                for i in 0..<8 { bits |= UInt64(buffer[offset + i]) << (8 * UInt64(i)) }
                offset += 8
                return .double(Double(bitPattern: bits))
            case .string: return .string(try string())
            case .bytes: return .bytes(try bytes())
            case .date: return .date(Timestamp(millisecondsSince1970: unzigzag(try varint())))
            case .array:
                let n = try length() // each element takes at least one byte
                var items: [Value] = []
                items.reserveCapacity(n)
                for _ in 0..<n { items.append(try value(depth: depth + 1)) }
                return .array(items)
            case .object:
                return .object(try entries(depth: depth, extra: 0))
            }
        }

        /// An object's entries, its tag read, with room for `extra` more.
        mutating func entries(depth: Int, extra: Int) throws -> [String: Value] {
            let n = try length()
            var object: [String: Value] = [:]
            object.reserveCapacity(n + extra)
            for _ in 0..<n {
                let key = try string()
                let item = try value(depth: depth + 1)
                guard object.updateValue(item, forKey: key) == nil else {
                    throw SyncError(.corrupted, "object repeats a key")
                }
            }
            return object
        }
    }
}
