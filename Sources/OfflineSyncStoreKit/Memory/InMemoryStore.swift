import Foundation
import OfflineSync
import Synchronization

/// The reference `LocalStore`: everything in memory, evaluated by `QueryEvaluator`.
///
/// It is what the conformance suite compares other adapters against, and a fast store for
/// tests and previews. Nothing survives the process. It is ``MemoryTables`` with a commit
/// hook that keeps nothing: writes are serialized, a failed transaction leaves nothing.
///
/// Transactions run on the store's own serial dispatch queue, never on Swift's cooperative
/// pool: a closure that scans a large table holds a thread for as long as it runs, and the
/// engine's lock makes another transaction wait for it — on a machine with two cores, two
/// such waits on the pool would stall every task of the process.
public final class InMemoryStore: LocalStore, Sendable {
    private let tables = MemoryTables()
    private let queue = DispatchQueue(label: "OfflineSyncStoreKit.InMemoryStore")
    /// Set once by ``close()``; checked before every operation.
    private let closed = Atomic(false)
    private let blobs = MemoryAttachmentFiles()

    /// Creates an empty store.
    public init() {}

    /// See `LocalStore/attachmentFiles`: in memory, gone with the store.
    public var attachmentFiles: (any AttachmentFileStore)? { blobs }

    /// See `LocalStore/defineTable(_:)`.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try checkOpen()
        try await onQueue { try self.tables.define(schema) { _ in } }
    }

    /// See `LocalStore/read(_:)`.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try await onQueue { try self.tables.read(body) }
    }

    /// See `LocalStore/write(_:)`.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try await onQueue { try self.tables.write(body, commit: { _ in }) }
    }

    /// See `LocalStore/close()`.
    public func close() async throws {
        closed.store(true, ordering: .releasing)
    }

    /// Runs `work` on the store's queue.
    private func onQueue<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }

    private func checkOpen() throws {
        if closed.load(ordering: .acquiring) { throw SyncError(.storeClosed, "the in-memory store is closed") }
    }
}
