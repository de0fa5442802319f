import Foundation

extension UUID {
    /// A new random UUID (RFC 4122 version 4, variant 1: the format `UUID()` makes), its 122
    /// random bits drawn from `SystemRandomNumberGenerator` (`getrandom(2)` on Linux).
    ///
    /// The core makes one per queued operation; on Linux `UUID()` opens, reads and closes
    /// `/dev/urandom` for every call, which costs several times more.
    public static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        var bytes = (generator.next() as UInt64, generator.next() as UInt64)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = raw[6] & 0x0F | 0x40 // version 4
            raw[8] = raw[8] & 0x3F | 0x80 // variant 1 (RFC 4122)
            return UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                               raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }
}
