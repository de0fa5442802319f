import Foundation

/// The reference ``LocalStore``: everything in memory, evaluated by ``QueryEvaluator``.
///
/// It is what the conformance suite compares other adapters against, and a fast store for
/// tests and previews. Nothing survives the process. It is ``MemoryTables`` with a commit
/// hook that keeps nothing: writes are serialized, a failed transaction leaves nothing.
public final class InMemoryStore: LocalStore, @unchecked Sendable {
    // @unchecked Sendable: `tables` is thread-safe itself; `closed` is only accessed
    // holding `lock`.
    private let tables = MemoryTables()
    private let lock = NSLock()
    private var closed = false

    /// Creates an empty store.
    public init() {}

    /// See ``LocalStore/defineTable(_:)``.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try checkOpen()
        try tables.define(schema) { _ in }
    }

    /// See ``LocalStore/read(_:)``.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try tables.read(body)
    }

    /// See ``LocalStore/write(_:)``.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try tables.write(body, commit: { _ in })
    }

    /// See ``LocalStore/close()``.
    public func close() async throws {
        lock.withLock { closed = true }
    }

    private func checkOpen() throws {
        if lock.withLock({ closed }) { throw SyncError(.storeClosed, "the in-memory store is closed") }
    }
}

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
        let a = lhs.value.utf8, b = rhs.value.utf8
        guard a.count == b.count else { return false }
        let fast: Bool?? = a.withContiguousStorageIfAvailable { x in
            b.withContiguousStorageIfAvailable { y in
                x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0
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
