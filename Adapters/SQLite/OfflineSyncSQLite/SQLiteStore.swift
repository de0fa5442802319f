import COfflineSyncSQLite3
import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// A ``LocalStore`` kept in a SQLite database file (or in memory).
///
/// On a file the store uses WAL journaling, one writer connection and a small pool of
/// read-only connections, so reads run concurrently with a write and each sees one consistent
/// snapshot. Every connection lives on its own serial dispatch queue: blocking SQLite calls
/// never run on Swift's cooperative thread pool. Write transactions run one at a time
/// (`BEGIN IMMEDIATE` on the single writer), which makes them serializable.
///
/// Each table is a SQL table with a real column per declared field (see ``TableSchema``);
/// undeclared fields live in an encoded column. Queries become parameterised SQL where they
/// name only declared fields and system properties, and are finished by ``QueryEvaluator``
/// otherwise, so results always equal the evaluator's.
///
/// An existing file is checked before SQLite may write to it: a truncated, damaged, non-SQLite
/// or foreign file is refused with ``SyncError/Code/corrupted``,
/// ``SyncError/Code/notADatabase`` or ``SyncError/Code/foreignDatabase`` and left unchanged.
///
/// ```swift
/// let store = try await SQLiteStore(path: "/path/app.db")
/// try await store.defineTable(TableSchema("todo", fields: [FieldDefinition("title", .string)]))
/// try await store.write { try $0.upsert(Record(id: "1", fields: ["title": "Milk"]), in: "todo") }
/// try await store.close()
/// ```
public final class SQLiteStore: LocalStore {
    /// How a store opens and runs its connections.
    public struct Options: Sendable, Hashable {
        /// SQLite's `synchronous` setting: how hard a commit waits for the disk.
        public enum Synchronous: String, Sendable, Hashable, CaseIterable {
            /// `FULL`: every commit is synced; a returned commit survives power loss. The default.
            case full
            /// `NORMAL`: in WAL mode a commit survives a crash of the process but may be lost
            /// on power loss; faster.
            case normal

            /// The keyword of `PRAGMA synchronous`.
            var sqlKeyword: String {
                switch self {
                case .full: return "FULL"
                case .normal: return "NORMAL"
                }
            }
        }

        /// How long a transaction waits for a lock another process holds before failing with
        /// ``SyncError/Code/busy``. Default 5 seconds.
        public var busyTimeout: Duration
        /// The `synchronous` mode. Default ``Synchronous/full``.
        public var synchronous: Synchronous
        /// The number of read-only connections of a file store (reads beyond it wait for one).
        /// `0` runs reads on the writer connection. Ignored in memory. Default 2.
        public var readerCount: Int
        /// Whether opening an existing file runs `PRAGMA quick_check` and refuses a damaged one
        /// with ``SyncError/Code/corrupted``. Default `true`.
        public var quickCheckOnOpen: Bool

        /// Creates options; every parameter has the documented default.
        public init(busyTimeout: Duration = .seconds(5), synchronous: Synchronous = .full,
                    readerCount: Int = 2, quickCheckOnOpen: Bool = true) {
            self.busyTimeout = busyTimeout
            self.synchronous = synchronous
            self.readerCount = readerCount
            self.quickCheckOnOpen = quickCheckOnOpen
        }

        /// The busy timeout in whole milliseconds, clamped to what SQLite accepts.
        var busyTimeoutMilliseconds: Int32 {
            let (seconds, attoseconds) = busyTimeout.components
            if seconds < 0 { return 0 }
            let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
            if milliseconds.overflow { return Int32.max }
            let total = milliseconds.partialValue + attoseconds / 1_000_000_000_000_000
            return Int32(clamping: total)
        }
    }

    /// The `PRAGMA application_id` that marks a SQLite file as an OfflineSync store ("OSYN").
    public static let applicationID: Int32 = 0x4F53_594E
    /// The storage format version, kept in `PRAGMA user_version`. A file of a newer format
    /// opens with ``SyncError/Code/unsupported``; a file of format 1 (rows without
    /// checksums) is upgraded when opened, in one transaction.
    public static let formatVersion: Int32 = 2

    /// The database file, or `:memory:`.
    public let path: String
    /// The options the store was opened with.
    public let options: Options

    private let writer: SQLiteConnectionWorker
    private let readers: CheckoutPool<SQLiteConnectionWorker>?
    private let isInMemory: Bool
    private let blobs: any AttachmentFileStore

    private init(path: String, options: Options, writer: SQLiteConnectionWorker, readers: CheckoutPool<SQLiteConnectionWorker>?, isInMemory: Bool) {
        self.path = path
        self.options = options
        self.writer = writer
        self.readers = readers
        self.isInMemory = isInMemory
        blobs = isInMemory ? MemoryAttachmentFiles() : BlobDirectory(path: path + "-attachments")
    }

    /// See ``LocalStore/attachmentFiles``: files in the directory `<path>-attachments` beside
    /// the database (in memory for an in-memory store).
    public var attachmentFiles: (any AttachmentFileStore)? { blobs }

    /// Opens the store in the SQLite file at `path`, creating it if it is missing.
    ///
    /// An existing file is first checked without writing to it: its header (else
    /// ``SyncError/Code/notADatabase``, or ``SyncError/Code/corrupted`` when truncated), then,
    /// read-only, that it is an OfflineSync store or an empty database (else
    /// ``SyncError/Code/foreignDatabase``), that its schema holds exactly the tables and
    /// indexes its catalog accounts for, with exactly the definitions this adapter writes, and
    /// that the catalog passes SQLite's full `integrity_check` (else ``SyncError/Code/corrupted``),
    /// and — unless ``Options/quickCheckOnOpen`` is off — that `PRAGMA quick_check` passes
    /// (else ``SyncError/Code/corrupted``). Only then is it
    /// opened for writing and switched to WAL. Throws ``SyncError/Code/unsupported`` for a
    /// store of a newer format, ``SyncError/Code/busy`` when another process keeps it locked
    /// and ``SyncError/Code/storageFailure`` when SQLite cannot open it.
    public convenience init(path: String, options: Options = .init()) async throws {
        let writer = SQLiteConnectionWorker(label: "OfflineSyncSQLite.writer")
        try await writer.perform {
            try SQLiteStoreFile.checkHeader(atPath: path)
            if FileManager.default.fileExists(atPath: path) {
                try SQLiteStoreFile.probe(path: path, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
                                    quickCheck: options.quickCheckOnOpen)
            }
        }
        try await writer.open { try SQLiteStoreFile.openWriter(path: path, inMemory: false, options: options) }
        var workers: [SQLiteConnectionWorker] = []
        do {
            for number in 0..<max(0, options.readerCount) {
                let worker = SQLiteConnectionWorker(label: "OfflineSyncSQLite.reader\(number)")
                try await worker.open {
                    try SQLiteConnection.open(path: path, flags: SQLITE_OPEN_READONLY,
                                        busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
                }
                workers.append(worker)
            }
        } catch {
            for worker in workers { await worker.close(checkpoint: false) }
            await writer.close(checkpoint: true)
            throw error
        }
        self.init(path: path, options: options, writer: writer,
                  readers: workers.isEmpty ? nil : CheckoutPool(workers, storeName: "SQLite"), isInMemory: false)
    }

    /// Opens a new, empty store in memory: one connection serves reads and writes, and
    /// everything is gone once the store is closed. ``Options/readerCount`` and
    /// ``Options/quickCheckOnOpen`` do not apply. Throws ``SyncError/Code/storageFailure``
    /// when SQLite cannot open it.
    public static func inMemory(options: Options = .init()) async throws -> SQLiteStore {
        let writer = SQLiteConnectionWorker(label: "OfflineSyncSQLite.memory")
        try await writer.open { try SQLiteStoreFile.openWriter(path: ":memory:", inMemory: true, options: options) }
        return SQLiteStore(path: ":memory:", options: options, writer: writer, readers: nil, isInMemory: true)
    }

    /// Creates the table, or migrates it to the changed schema in one transaction: a newly
    /// declared field takes the values rows kept as undeclared fields, a field no longer
    /// declared keeps its values as an undeclared field, indexes are added and dropped.
    ///
    /// Throws ``SyncError/Code/invalidName`` for a bad name, a name starting with `sqlite_` or
    /// `__osync_` (any case), or one differing only in letter case from an existing table;
    /// ``SyncError/Code/schemaMismatch`` when a stored value does not fit a newly declared
    /// type; ``SyncError/Code/storeClosed`` after ``close()``. A failure changes nothing.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try SQLiteName.validateTableName(schema.name)
        try await writer.run { connection in
            try SQLiteSchemaDefinition.define(schema, on: connection)
        }
    }

    /// Runs `body` in a read transaction on a reader connection (or the only connection of an
    /// in-memory store); it sees one consistent snapshot, even while a write commits.
    /// Rethrows what `body` throws; throws ``SyncError/Code/storeClosed`` after ``close()``.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        let work: @Sendable (SQLiteConnection) throws -> T = { connection in
            try connection.transaction(immediate: false) {
                let transaction = SQLiteReadTransaction(connection: connection)
                defer { transaction.end() }
                return try body(transaction)
            }
        }
        guard let readers else { return try await writer.run(work) }
        let reader = try await readers.acquire()
        defer { readers.release(reader) }
        return try await reader.run(work)
    }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE` on the single writer): committed
    /// when it returns, rolled back when it throws. Rethrows what `body` throws; throws
    /// ``SyncError/Code/busy`` when another process holds the write lock longer than the busy
    /// timeout and ``SyncError/Code/storeClosed`` after ``close()``.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await writer.run { connection in
            try connection.transaction(immediate: true) {
                let transaction = SQLiteWriteTransaction(connection: connection)
                defer { transaction.end() }
                return try body(transaction)
            }
        }
    }

    /// `PRAGMA data_version` of the writer connection: SQLite changes it when another
    /// connection — another process, or another store object on the same file — commits,
    /// and never for the writer's own commits, which are all of this store's. `nil` in
    /// memory, where no other connection exists.
    public func externalChangeToken() async throws -> UInt64? {
        if isInMemory { return nil }
        return try await writer.run { connection in
            guard case .int(let version) = try connection.scalar("PRAGMA data_version") else {
                throw SyncError(.storageFailure, "SQLite: PRAGMA data_version returned no integer")
            }
            return UInt64(bitPattern: version)
        }
    }

    /// Waits for the transactions already started, checkpoints the WAL into the database file,
    /// and closes every connection. Later calls throw ``SyncError/Code/storeClosed``; closing
    /// twice is harmless.
    public func close() async throws {
        if let readers { for worker in readers.close() { await worker.close(checkpoint: false) } }
        await writer.close(checkpoint: !isInMemory)
    }
}
