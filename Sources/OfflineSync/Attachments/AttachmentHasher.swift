import Crypto

/// SHA-256 over bytes that arrive in pieces, as an attachment's lowercase hex name.
package struct AttachmentHasher {
    private var hasher = SHA256()
    /// The bytes hashed so far.
    package private(set) var count: Int64 = 0

    package init() {}

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        hasher.update(bufferPointer: bytes)
        count += Int64(bytes.count)
    }

    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The hash as 64 lowercase hexadecimal digits.
    package func finish() -> String { Self.hex(hasher.finalize()) }

    /// Bytes as lowercase hexadecimal digits (a hash's name, a keyed file name).
    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The hash of `bytes`.
    package static func hash(_ bytes: [UInt8]) -> String {
        var hasher = AttachmentHasher()
        hasher.update(bytes)
        return hasher.finish()
    }
}
