/// 64-bit FNV-1a, for names derived from other names (a schema from a directory, a
/// notification channel from a schema, a key bucket from a long id). Unlike `Hasher`,
/// which is seeded per process, its value never changes between runs or versions, so a
/// name derived once can be derived again. Not a cryptographic hash.
///
/// `FNV1a.hash64("a".utf8)` is `0xAF63_DC4C_8601_EC8C`.
public enum FNV1a {
    /// The hash of `bytes`.
    public static func hash64<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }

    /// The hash of `bytes` as 16 lower-case hex digits.
    public static func hex64<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        let digits = String(hash64(bytes), radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
