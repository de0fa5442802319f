import OfflineSync
import OfflineSyncConformance
import OfflineSyncStoreKit
import Testing

@Suite("CRC32C: the checksum adapters keep beside records")
struct CRC32CTests {
    /// A bit-at-a-time CRC-32C, the definition the sliced implementation must agree with.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    @Test("the standard check values")
    func checkValues() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
        // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xFF, and ascending.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map(UInt8.init)) == 0x46DD_794E)
    }

    @Test("any split into pieces, and every length and alignment, agree with the bitwise definition")
    func pieces() {
        var random = SplitMix64(seed: 9)
        for length in 0..<80 {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let whole = CRC32C.checksum(bytes)
            #expect(whole == Self.reference(bytes), "length \(length)")
            for cut in 0...length {
                var sum = CRC32C()
                sum.update(Array(bytes[..<cut]))
                bytes[cut...].forEach { sum.update(byte: $0) }
                #expect(sum.value == whole, "length \(length), cut at \(cut)")
            }
        }
        var sum = CRC32C()
        sum.update(int64: 0x0102_0304_0506_0708)
        #expect(sum.value == Self.reference([1, 2, 3, 4, 5, 6, 7, 8]))
    }

    @Test("the CPU's instruction and the software path agree at every length and alignment")
    func bothPaths() {
        var random = SplitMix64(seed: 11)
        let bytes = (0..<300).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        bytes.withUnsafeBytes { all in
            for start in 0..<9 {
                for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 200, 291 - start] {
                    let piece = UnsafeRawBufferPointer(rebasing: all[start..<(start + length)])
                    let expected = Self.reference(Array(piece))
                    var fast = CRC32C()
                    fast.update(piece)
                    var software = CRC32C()
                    software.updateInSoftware(piece)
                    #expect(fast.value == expected, "hardware: \(CRC32C.isHardwareAccelerated), offset \(start), length \(length)")
                    #expect(software.value == expected, "software, offset \(start), length \(length)")
                }
            }
        }
    }

    @Test("every single flipped bit changes the checksum")
    func singleBits() {
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let whole = CRC32C.checksum(bytes)
        for bit in 0..<(bytes.count * 8) {
            var damaged = bytes
            damaged[bit / 8] ^= 1 << (bit % 8)
            #expect(CRC32C.checksum(damaged) != whole)
        }
    }
}
