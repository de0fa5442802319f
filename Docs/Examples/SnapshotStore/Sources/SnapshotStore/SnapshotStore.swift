import Dispatch
import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// A ``LocalStore`` that keeps every table in memory and the whole store in one snapshot
/// file, rewritten atomically on each commit.
///
/// It is the worked example of a third-party adapter: it uses only OfflineSync's public API —
/// ``TableSchema`` validation, ``QueryEvaluator`` for queries, ``ValueCodec`` for records,
/// ``ExactString`` for byte-exact keys — and passes the shared conformance suite. Rewriting the
/// whole file per commit suits small stores (settings, drafts, a few thousand records); the
/// LMDB, SQLite and encrypted-file adapters are the ones to use for more.
///
/// Concurrency: write transactions run one at a time on a serial queue, each on a copy of the
/// tables that replaces them only after the new file is on disk; read transactions run on a
/// concurrent queue, each over the tables as the last commit left them, so readers never wait
/// for a writer and never see half a transaction.
public final class SnapshotStore: LocalStore, @unchecked Sendable {
    // @unchecked Sendable: `tables` and `closed` are only touched while holding `lock`.
    private let lock = NSLock()
    private var tables: [ExactString: Table]
    private var closed = false
    private let writer = DispatchQueue(label: "SnapshotStore.writer")
    private let readers = DispatchQueue(label: "SnapshotStore.readers", attributes: .concurrent)

    /// The snapshot file.
    public let path: String
    /// Attachment files, in the directory `<path>-attachments`: the toolkit's `BlobDirectory`
    /// does all the adapter contract asks (files written whole or not at all, leftovers
    /// removed).
    private let blobs: BlobDirectory

    /// See ``LocalStore/attachmentFiles``.
    public var attachmentFiles: (any AttachmentFileStore)? { blobs }

    /// One table: its schema and its records by id.
    struct Table: Sendable {
        var schema: TableSchema
        var rows: [ExactString: Record] = [:]
    }

    /// Opens the store whose snapshot file is `path`, or prepares a new one there (the file
    /// is created by the first commit).
    ///
    /// - Throws: ``SyncError/Code/notADatabase`` for a file that is not a snapshot,
    ///   ``SyncError/Code/corrupted`` for a damaged one (neither is modified), or
    ///   ``SyncError/Code/storageFailure`` when the file cannot be read.
    public init(path: String) async throws {
        self.path = path
        blobs = BlobDirectory(path: path + "-attachments")
        tables = try await Self.perform(on: DispatchQueue.global()) {
            guard FileManager.default.fileExists(atPath: path) else { return [:] }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw SyncError(.storageFailure, "cannot read \(path)")
            }
            return try SnapshotFile.decode([UInt8](data), path: path)
        }
    }

    /// See ``LocalStore/defineTable(_:)``.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try await Self.perform(on: writer) { [self] in
            var next = try current()
            let key = ExactString(schema.name)
            if let existing = next[key] {
                if existing.schema == schema { return }
                for record in existing.rows.values {
                    for field in schema.fields where !field.type.accepts(record[field.name]) {
                        throw SyncError(.schemaMismatch, "table '\(schema.name)': record '\(record.id)' has a \(record[field.name].kind.rawValue) in field '\(field.name)', which the new schema declares \(field.type.rawValue)")
                    }
                }
                next[key]!.schema = schema
            } else {
                next[key] = Table(schema: schema)
            }
            try commit(next)
        }
    }

    /// See ``LocalStore/read(_:)``.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try await Self.perform(on: readers) { [self] in
            let transaction = Transaction(tables: try current())
            defer { transaction.isOpen = false }
            return try body(transaction)
        }
    }

    /// See ``LocalStore/write(_:)``. The body works on a copy; the copy is written to a new
    /// file and replaces the old one only if the body returns.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await Self.perform(on: writer) { [self] in
            let transaction = Transaction(tables: try current())
            defer { transaction.isOpen = false }
            let result = try body(transaction)
            if transaction.changed { try commit(transaction.contents) }
            return result
        }
    }

    /// See ``LocalStore/close()``. Waits for the write in progress; every commit is already
    /// on disk, so there is nothing to flush.
    public func close() async throws {
        try await Self.perform(on: writer) { [self] in
            lock.withLock { closed = true }
        }
    }

    /// The tables as the last commit left them.
    private func current() throws -> [ExactString: Table] {
        try lock.withLock {
            if closed { throw SyncError(.storeClosed, "the snapshot store \(path) is closed") }
            return tables
        }
    }

    /// Writes `next` to disk, then makes it what readers see. Runs on `writer`.
    private func commit(_ next: [ExactString: Table]) throws {
        try SnapshotFile.replace(path, with: try SnapshotFile.encode(next))
        lock.withLock { tables = next }
    }

    /// Runs blocking work on one of the store's queues, off Swift's cooperative pool.
    private static func perform<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }

    /// A transaction over its own copy of the tables. Lent to one closure; afterwards every
    /// call throws ``SyncError/Code/storeClosed``.
    private final class Transaction: LocalWriteTransaction {
        var contents: [ExactString: Table]
        var isOpen = true
        var changed = false

        init(tables: [ExactString: Table]) { contents = tables }

        private func table(_ name: String) throws -> Table {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            guard let table = contents[ExactString(name)] else {
                throw SyncError(.tableNotDefined, "table '\(name)' is not defined")
            }
            return table
        }

        func schema(of table: String) throws -> TableSchema { try self.table(table).schema }

        func tables() throws -> [TableSchema] {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            return contents.values.map(\.schema).sorted { Value.utf8Less($0.name, $1.name) }
        }

        func record(in table: String, id: String) throws -> Record? {
            try self.table(table).rows[ExactString(id)]
        }

        func records(in table: String, matching query: Query) throws -> [Record] {
            let table = try self.table(table)
            try query.validate(against: table.schema)
            return QueryEvaluator.apply(query, to: table.rows.values)
        }

        func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
            let table = try self.table(table)
            try Query(predicate).validate(against: table.schema)
            return QueryEvaluator.count(predicate, in: table.rows.values)
        }

        func upsert(_ record: Record, in table: String) throws {
            try self.table(table).schema.validate(record)
            contents[ExactString(table)]!.rows[ExactString(record.id)] = record
            changed = true
        }

        func delete(id: String, in table: String) throws -> Bool {
            _ = try self.table(table)
            guard contents[ExactString(table)]!.rows.removeValue(forKey: ExactString(id)) != nil else { return false }
            changed = true
            return true
        }
    }
}
