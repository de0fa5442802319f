import Foundation

/// A string key compared by its exact UTF-8 bytes.
///
/// Swift's `String` equality is Unicode canonical equivalence, so `"é"` and `"e\u{301}"` are
/// the same dictionary key — but they are different ids, names and SQL texts to every store.
/// Stores key their dictionaries with this instead. Hashing and comparison work on the
/// contiguous UTF-8 buffer in bulk.
public struct ExactString: Hashable, Sendable, CustomStringConvertible {
    /// The string.
    public let value: String
    /// Wraps a string.
    public init(_ value: String) {
        var value = value
        value.makeContiguousUTF8()
        self.value = value
    }

    /// Byte-for-byte equality.
    public static func == (lhs: ExactString, rhs: ExactString) -> Bool {
        sameBytes(lhs.value, rhs.value)
    }

    /// Whether two strings have the same UTF-8 bytes, compared in bulk where both are
    /// contiguous (walking `utf8.elementsEqual` byte by byte was most of comparing two records'
    /// fields: `perf`, the server's echo check on a push's answer).
    package static func sameBytes(_ lhs: String, _ rhs: String) -> Bool {
        let a = lhs.utf8, b = rhs.utf8
        guard a.count == b.count else { return false }
        let fast: Bool?? = a.withContiguousStorageIfAvailable { x in
            b.withContiguousStorageIfAvailable { y in
                // Two copies of one string share their buffer (a cache key and the key it
                // was made from): nothing to compare.
                x.count == 0 || x.baseAddress == y.baseAddress || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0
            }
        }
        if let fast = fast ?? nil { return fast }
        return a.elementsEqual(b)
    }

    /// Hashes the UTF-8 bytes in one call.
    public func hash(into hasher: inout Hasher) {
        let done: Void? = value.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil { for byte in value.utf8 { hasher.combine(byte) } }
        hasher.combine(value.utf8.count)
    }

    /// The string itself.
    public var description: String { value }
}
