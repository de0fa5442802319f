import COfflineSyncCRC32C
import OfflineSync

/// Whether the CPU's CRC-32C instruction computes the checksums (asked once per process).
private let hardwareCRC32C = osync_crc32c_hardware() != 0

/// CRC-32C (Castagnoli, the polynomial iSCSI, ext4 and LevelDB use), for adapters that keep a
/// checksum beside each record so a damaged byte is reported as
/// `SyncError/Code/corrupted` instead of being read back as data.
///
/// Feed bytes in any number of pieces, then read ``value``:
///
/// ```swift
/// var sum = CRC32C()
/// sum.update(encodedRecord)
/// let stored = sum.value
/// ```
///
/// `CRC32C.checksum(Array("123456789".utf8))` is `0xE306_9283`, the standard check value.
/// The CPU's CRC-32C instruction where it has one (SSE 4.2 on x86-64, checked at run time;
/// ARM64's CRC32 extension when the compiler targets it), software slicing-by-8 elsewhere:
/// both give the same values. It detects every flipped bit and every burst of damage up to 32
/// bits long; any other damage goes unnoticed with a probability of about 2⁻³².
public struct CRC32C: Sendable, Hashable {
    private var state: UInt32 = 0xFFFF_FFFF

    /// Creates a checksum of no bytes.
    public init() {}

    /// The checksum of the bytes fed so far.
    public var value: UInt32 { ~state }

    /// The checksum of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var sum = CRC32C()
        sum.update(bytes)
        return sum.value
    }

    /// Feeds `bytes`.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Feeds one byte.
    public mutating func update(byte: UInt8) {
        state = Self.table[Int((state ^ UInt32(byte)) & 0xFF)] ^ (state >> 8)
    }

    /// Feeds an integer as its 8 big-endian bytes.
    public mutating func update(int64 value: Int64) {
        withUnsafeBytes(of: UInt64(bitPattern: value).bigEndian) { update($0) }
    }

    /// Whether this process computes checksums with the CPU's instruction rather than in software.
    public static var isHardwareAccelerated: Bool { hardwareCRC32C }

    /// Feeds the bytes `buffer` points at.
    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        if hardwareCRC32C {
            state = osync_crc32c_update(state, base, buffer.count)
        } else {
            updateInSoftware(buffer)
        }
    }

    /// ``update(_:)-(UnsafeRawBufferPointer)`` with slicing-by-8, whatever the CPU (the tests
    /// check both paths on one machine).
    package mutating func updateInSoftware(_ buffer: UnsafeRawBufferPointer) {
        guard var pointer = buffer.baseAddress else { return }
        var remaining = buffer.count
        var crc = state
        Self.table.withUnsafeBufferPointer { table in
            while remaining >= 8 {
                let low = crc ^ (UInt32(pointer.load(fromByteOffset: 0, as: UInt8.self))
                    | UInt32(pointer.load(fromByteOffset: 1, as: UInt8.self)) << 8
                    | UInt32(pointer.load(fromByteOffset: 2, as: UInt8.self)) << 16
                    | UInt32(pointer.load(fromByteOffset: 3, as: UInt8.self)) << 24)
                let high = UInt32(pointer.load(fromByteOffset: 4, as: UInt8.self))
                    | UInt32(pointer.load(fromByteOffset: 5, as: UInt8.self)) << 8
                    | UInt32(pointer.load(fromByteOffset: 6, as: UInt8.self)) << 16
                    | UInt32(pointer.load(fromByteOffset: 7, as: UInt8.self)) << 24
                crc = table[7 * 256 + Int(low & 0xFF)] ^ table[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ table[5 * 256 + Int((low >> 16) & 0xFF)] ^ table[4 * 256 + Int(low >> 24)]
                    ^ table[3 * 256 + Int(high & 0xFF)] ^ table[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ table[1 * 256 + Int((high >> 16) & 0xFF)] ^ table[Int(high >> 24)]
                pointer += 8
                remaining -= 8
            }
            while remaining > 0 {
                crc = table[Int((crc ^ UInt32(pointer.load(as: UInt8.self))) & 0xFF)] ^ (crc >> 8)
                pointer += 1
                remaining -= 1
            }
        }
        state = crc
    }

    /// Eight 256-entry tables: entry `k * 256 + b` is the CRC of byte `b` followed by `k` zero bytes.
    private static let table: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            table[byte] = crc
        }
        for slice in 1..<8 {
            for byte in 0..<256 {
                let previous = table[(slice - 1) * 256 + byte]
                table[slice * 256 + byte] = table[Int(previous & 0xFF)] ^ (previous >> 8)
            }
        }
        return table
    }()
}
