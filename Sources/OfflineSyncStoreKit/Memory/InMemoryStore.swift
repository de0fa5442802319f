import Foundation
import OfflineSync
import Synchronization

/// The reference `LocalStore`: everything in memory, evaluated by `QueryEvaluator`.
///
/// It is what the conformance suite compares other adapters against, and a fast store for
/// tests and previews. Nothing survives the process. It is ``MemoryTables`` with a commit
/// hook that keeps nothing: writes are serialized, a failed transaction leaves nothing.
public final class InMemoryStore: LocalStore, Sendable {
    private let tables = MemoryTables()
    /// Set once by ``close()``; checked before every operation.
    private let closed = Atomic(false)

    /// Creates an empty store.
    public init() {}

    /// See `LocalStore/defineTable(_:)`.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try checkOpen()
        try tables.define(schema) { _ in }
    }

    /// See `LocalStore/read(_:)`.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try tables.read(body)
    }

    /// See `LocalStore/write(_:)`.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try tables.write(body, commit: { _ in })
    }

    /// See `LocalStore/close()`.
    public func close() async throws {
        closed.store(true, ordering: .releasing)
    }

    private func checkOpen() throws {
        if closed.load(ordering: .acquiring) { throw SyncError(.storeClosed, "the in-memory store is closed") }
    }
}
