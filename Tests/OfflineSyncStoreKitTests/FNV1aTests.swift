import OfflineSyncStoreKit
import Testing

@Suite("FNV-1a: the published 64-bit test vectors")
struct FNV1aTests {
    // Values from the FNV reference test suite (Fowler, Noll and Vo, "FNV hash test vectors").
    @Test(arguments: [("", 0xCBF2_9CE4_8422_2325 as UInt64), ("a", 0xAF63_DC4C_8601_EC8C), ("foobar", 0x8594_4171_F739_67E8)])
    func vectors(text: String, expected: UInt64) {
        #expect(FNV1a.hash64(text.utf8) == expected)
    }

    @Test func hexIsSixteenDigits() {
        #expect(FNV1a.hex64("a".utf8) == "af63dc4c8601ec8c")
        #expect(FNV1a.hex64("".utf8).count == 16)
    }
}
