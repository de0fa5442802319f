import Foundation
@testable import OfflineSync
import Testing

@Suite("UUID.random")
struct UUIDRandomTests {
    @Test("version 4, variant 1, and no UUID twice across many refills of the byte pool")
    func formatAndUniqueness() {
        // 256 UUIDs per 4 KiB refill: 20,000 cross the refill 78 times.
        var seen = Set<UUID>()
        var bitsSet = [Int](repeating: 0, count: 128)
        for _ in 0..<20_000 {
            let uuid = UUID.random()
            #expect(seen.insert(uuid).inserted)
            withUnsafeBytes(of: uuid.uuid) { bytes in
                #expect(bytes[6] >> 4 == 4)
                #expect(bytes[8] >> 6 == 0b10)
                for bit in 0..<128 where bytes[bit / 8] & (1 << (bit % 8)) != 0 { bitsSet[bit] += 1 }
            }
            #expect(uuid.uuidString == UUID(uuidString: uuid.uuidString)?.uuidString)
            #expect(uuid.hexString == uuid.uuidString)
        }
        // Every random bit is set in about half of them (a pool handing out zeros or one
        // repeated word would fail here); the six fixed bits are always or never set.
        let fixed: Set<Int> = [52, 53, 54, 55, 70, 71]
        for bit in 0..<128 where !fixed.contains(bit) {
            #expect((9_000...11_000).contains(bitsSet[bit]), "bit \(bit) set in \(bitsSet[bit]) of 20,000")
        }
    }

    @Test("hexString is uuidString, for fixed bytes at the ends of the range too")
    func hexString() throws {
        for text in ["00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
                     "0123ABCD-4567-89EF-FEDC-BA9876543210"] {
            let uuid = try #require(UUID(uuidString: text))
            #expect(uuid.hexString == text)
            #expect(uuid.hexString == uuid.uuidString)
        }
        #expect(UUID.randomString().count == 36)
    }
}
