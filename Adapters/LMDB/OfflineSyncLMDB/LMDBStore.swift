import COfflineSyncLMDB
import Dispatch
import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// A ``LocalStore`` kept in an LMDB environment directory (`data.mdb` and `lock.mdb`).
///
/// Each table is a named sub-database of records keyed by id and encoded with
/// ``ValueCodec``; a meta sub-database holds the OfflineSync marker, the format version and
/// the table schemas; declared indexes get sub-databases of their own. Reads by id are one
/// `mdb_get`; queries walk a cursor (or an index) and are decided by ``QueryEvaluator``.
///
/// Read transactions run concurrently on a few reader queues (`MDB_RDONLY` with
/// `MDB_NOTLS`, aborted when done so their reader slots are freed); write transactions run
/// one at a time on a writer queue, which makes them serializable. No LMDB call runs on
/// Swift's cooperative pool. Commits are synced to disk (no `MDB_NOSYNC`).
///
/// The map grows by itself: when a write runs out of room (`MDB_MAP_FULL`), the transaction
/// is aborted, the map grown by ``Options/mapGrowthStep`` once no transaction is active, and
/// the transaction's logged writes replayed, up to ``Options/maximumMapSize``.
///
/// An existing directory is checked before LMDB may write to it: a `data.mdb` that is not
/// LMDB's, damaged or truncated, or an environment of another application, is refused with
/// ``SyncError/Code/notADatabase``, ``SyncError/Code/corrupted`` or
/// ``SyncError/Code/foreignDatabase`` and left unchanged.
///
/// ```swift
/// let store = try await LMDBStore(directory: "/path/app-env")
/// try await store.defineTable(TableSchema("todo", fields: [FieldDefinition("title", .string)]))
/// try await store.write { try $0.upsert(Record(id: "1", fields: ["title": "Milk"]), in: "todo") }
/// try await store.close()
/// ```
public final class LMDBStore: LocalStore {
    /// How a store sizes and opens its environment.
    public struct Options: Sendable, Hashable {
        /// The map size a new or reopened environment starts with, in bytes (LMDB keeps a
        /// larger size an existing environment already has). Default 64 MiB.
        public var initialMapSize: Int
        /// How much the map grows each time a write finds it full, in bytes (at least 1 MiB).
        /// Default 64 MiB.
        public var mapGrowthStep: Int
        /// The largest the map may grow to, in bytes; a write that needs more fails with
        /// ``SyncError/Code/limitExceeded``. Default 64 GiB.
        public var maximumMapSize: Int
        /// LMDB's reader table size (`mdb_env_set_maxreaders`), shared by every process using
        /// the environment. Default 126.
        public var maxReaders: Int
        /// How many read transactions this store runs at once (each on its own queue);
        /// capped below ``maxReaders``. Default 4.
        public var readerConcurrency: Int
        /// The most sub-databases (tables, indexes and the meta database). Default 1024.
        public var maxDatabases: Int
        /// Whether opening an existing environment first checks every page LMDB would follow
        /// (bounds, page numbers, kinds, nodes, overflow runs, the free list) and refuses a
        /// damaged file with ``SyncError/Code/corrupted``. LMDB trusts its pages and aborts the
        /// process on some damaged ones, so turn it off only for files you trust. Reads the
        /// whole file once, like SQLite's `quick_check`. Default `true`.
        public var verifyPagesOnOpen: Bool

        /// Creates options; every parameter has the documented default.
        public init(initialMapSize: Int = 64 << 20, mapGrowthStep: Int = 64 << 20, maximumMapSize: Int = 64 << 30,
                    maxReaders: Int = 126, readerConcurrency: Int = 4, maxDatabases: Int = 1024, verifyPagesOnOpen: Bool = true) {
            self.initialMapSize = initialMapSize
            self.mapGrowthStep = mapGrowthStep
            self.maximumMapSize = maximumMapSize
            self.maxReaders = maxReaders
            self.readerConcurrency = readerConcurrency
            self.maxDatabases = maxDatabases
            self.verifyPagesOnOpen = verifyPagesOnOpen
        }
    }

    /// What ``statistics()`` reports about the environment.
    public struct Statistics: Sendable, Hashable {
        /// The current map size in bytes.
        public var mapSize: Int
        /// How many times the map grew since the store was opened.
        public var mapGrowths: Int
        /// The page size in bytes.
        public var pageSize: Int
        /// The bytes of the map in use (pages up to the last one used).
        public var usedBytes: Int
        /// The reader table size.
        public var maxReaders: Int
        /// The reader slots ever used in the reader table (LMDB's high-water mark).
        public var readerSlotsUsed: Int
    }

    /// The environment directory.
    public let directory: String
    private let blobs: BlobDirectory

    /// See ``LocalStore/attachmentFiles``: files in the environment directory's `attachments`
    /// subdirectory.
    public var attachmentFiles: (any AttachmentFileStore)? { blobs }
    /// The options the store was opened with.
    public let options: Options

    private let environment: LMDBEnvironment
    private let meta: MDB_dbi
    private let writer: DispatchQueue
    private let closer = DispatchQueue(label: "OfflineSyncLMDB.close")
    private let readers: CheckoutPool<DispatchQueue>
    private let activity = LMDBActivity()

    /// Opens the store in the environment directory `directory`, creating the directory and
    /// the environment if they are missing.
    ///
    /// An existing directory is checked without writing to it: a directory holding other
    /// files but no `data.mdb`, or a `data.mdb` without LMDB's meta pages, throws
    /// ``SyncError/Code/notADatabase``; damaged or truncated meta pages throw
    /// ``SyncError/Code/corrupted``; an LMDB environment of another application (data but no
    /// OfflineSync marker) throws ``SyncError/Code/foreignDatabase``; a newer OfflineSync
    /// format throws ``SyncError/Code/unsupported``. An environment this process already has
    /// open throws ``SyncError/Code/busy`` (LMDB forbids opening it twice). LMDB failures throw
    /// ``SyncError/Code/storageFailure`` (or ``SyncError/Code/busy``).
    public init(directory: String, options: Options = .init()) async throws {
        let writer = DispatchQueue(label: "OfflineSyncLMDB.writer")
        let (environment, meta) = try await perform(on: writer) { () throws -> (LMDBEnvironment, MDB_dbi) in
            let claim = try LMDBOpenDirectories.shared.claim(directory)
            do {
                if try LMDBEnvironmentFile.prepare(directory) == .existing {
                    try LMDBEnvironmentFile.probe(directory, verifyPages: options.verifyPagesOnOpen)
                }
            } catch {
                LMDBOpenDirectories.shared.release(claim)
                throw error
            }
            let environment = try LMDBEnvironment(directory: directory, options: options, claim: claim, writer: writer)
            do {
                let meta = try Self.bootstrap(environment)
                try Self.upgrade(environment, meta)
                environment.resetKnownTransaction()
                return (environment, meta)
            } catch {
                environment.close()
                throw error
            }
        }
        self.directory = directory
        blobs = BlobDirectory(path: directory + "/attachments")
        self.options = options
        self.environment = environment
        self.meta = meta
        self.writer = writer
        self.readers = CheckoutPool((0..<min(options.readerConcurrency, max(1, options.maxReaders - 2))).map {
            DispatchQueue(label: "OfflineSyncLMDB.reader\($0)")
        }, storeName: "LMDB")
    }

    /// Opens the store in the environment directory at `directory` (a file URL). See
    /// ``init(directory:options:)-(String,_)`` for what it checks and throws.
    public convenience init(directory: URL, options: Options = .init()) async throws {
        try await self.init(directory: directory.path, options: options)
    }

    /// Marks a new environment, checks an existing one's marker under the write lock, and
    /// opens every sub-database so transactions can use their handles.
    private static func bootstrap(_ environment: LMDBEnvironment) throws -> MDB_dbi {
        let txn = try environment.begin(readOnly: false)
        var committed = false
        defer { if !committed { mdb_txn_abort(txn) } }
        guard let meta = try LMDBEnvironmentFile.checkMarker(txn, directory: environment.directory, create: true) else {
            throw SyncError(.storageFailure, "LMDB: the meta database could not be created")
        }
        var opened: [String: MDB_dbi] = [LMDBLayout.metaDatabase: meta]
        var names: [(String, UInt32)] = []
        let reader = LMDBReadTransaction(environment: environment, meta: meta, txn: txn)
        defer { reader.end() }
        try reader.scan(meta, from: LMDBLayout.tablePrefix) { key, value in
            guard key.buffer.starts(with: LMDBLayout.tablePrefix) else { return false }
            let entry = try LMDBTable(decoding: value.bytes)
            names.append((entry.database, 0))
            for position in entry.indexes.indices { names.append((entry.indexDatabase(position), UInt32(MDB_DUPSORT))) }
            return true
        }
        for (name, flags) in names {
            var dbi = MDB_dbi()
            let rc = mdb_dbi_open(txn, name, flags, &dbi)
            if rc == MDB_NOTFOUND {
                throw SyncError(.corrupted, "'\(environment.directory)' lacks the sub-database '\(name)' its meta database lists")
            }
            try LMDBFailure.check(rc, "opening the sub-database '\(name)'")
            opened[name] = dbi
        }
        committed = true
        try LMDBFailure.check(mdb_txn_commit(txn), "committing the store's meta database")
        environment.adopt(opened)
        return meta
    }

    /// Upgrades a format-1 store, whose records had no checksum, in one write transaction:
    /// each record must decode, then is rewritten with its checksum, a batch at a time; last
    /// the format version becomes 2. A record that does not decode throws
    /// ``SyncError/Code/corrupted`` and nothing is changed, so a damaged old store is never
    /// sealed with checksums that would vouch for its damage.
    private static func upgrade(_ environment: LMDBEnvironment, _ meta: MDB_dbi) throws {
        let txn = try environment.begin(readOnly: false)
        let transaction = LMDBWriteTransaction(environment: environment, meta: meta, txn: txn)
        defer { transaction.end() }
        do {
            guard let stored = try transaction.get(meta, LMDBLayout.versionKey),
                  BigEndian.uint64(stored.buffer) == LMDBLayout.uncheckedFormatVersion else {
                transaction.abort()
                return
            }
            var entries: [LMDBTable] = []
            try transaction.scan(meta, from: LMDBLayout.tablePrefix) { key, value in
                guard key.buffer.starts(with: LMDBLayout.tablePrefix) else { return false }
                entries.append(try LMDBTable(decoding: value.bytes))
                return true
            }
            for entry in entries {
                let dbi = try transaction.recordsDatabase(entry)
                var after: [UInt8]?
                while true {
                    var batch: [(key: [UInt8], value: [UInt8])] = []
                    try transaction.scan(dbi, from: after) { key, value in
                        let bytes = key.bytes
                        if let after, bytes == after { return true }
                        batch.append((bytes, value.bytes))
                        return batch.count < 256
                    }
                    guard let last = batch.last else { break }
                    for row in batch {
                        _ = try ValueCodec.decodeRecord(row.value)
                        try transaction.put(entry.database, row.key, LMDBLayout.sealed(row.value))
                    }
                    after = last.key
                }
            }
            try transaction.put(LMDBLayout.metaDatabase, LMDBLayout.versionKey, BigEndian.bytes(LMDBLayout.formatVersion))
            try transaction.commit()
        } catch {
            transaction.abort()
            throw error
        }
    }

    /// Creates the table, or migrates it to the changed schema in one write transaction:
    /// records are kept whole, so a newly declared field takes the values records kept as
    /// undeclared fields and a field no longer declared keeps its values; indexes are rebuilt
    /// when they change. Throws ``SyncError/Code/invalidName``,
    /// ``SyncError/Code/schemaMismatch`` (a stored value does not fit a newly declared type)
    /// or ``SyncError/Code/storeClosed``. A failure changes nothing.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try await write(internal: { transaction in try transaction.define(schema) })
    }

    /// Runs `body` in a read transaction on one of the reader queues; it sees one consistent
    /// snapshot, even while a write commits. Rethrows what `body` throws; throws
    /// ``SyncError/Code/storeClosed`` after ``close()``.
    ///
    /// When `body` meets a table another process defined, which this process has no LMDB
    /// handle for yet, the handle is opened on the writer queue and `body` runs again in a new
    /// snapshot (so a body may run twice).
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try activity.enter()
        defer { activity.leave() }
        let environment = self.environment
        for _ in 0..<3 {
            let queue = try await readers.acquire()
            let attempt: (result: Result<T, any Error>, unopened: Set<String>)
            do {
                attempt = try await readOnce(on: queue, body)
            } catch {
                readers.release(queue)
                throw error
            }
            readers.release(queue)
            if attempt.unopened.isEmpty { return try attempt.result.get() }
            try await perform(on: writer) { try environment.openExisting(attempt.unopened) }
        }
        throw SyncError(.busy, "LMDB: tables kept being defined by another process during a read; retry")
    }

    /// Runs `body` in one snapshot on `queue`: what it returned or threw, and the sub-databases
    /// it met that this process has no handle for.
    private func readOnce<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable (any LocalReadTransaction) throws -> T)
        async throws -> (result: Result<T, any Error>, unopened: Set<String>) {
        let environment = self.environment, meta = self.meta
        return try await perform(on: queue) {
            environment.enterRead()
            defer { environment.leaveRead() }
            let txn = try environment.begin(readOnly: true)
            // Aborting a read transaction frees its reader slot (MDB_NOTLS).
            defer { mdb_txn_abort(txn) }
            let transaction = LMDBReadTransaction(environment: environment, meta: meta, txn: txn)
            defer { transaction.end() }
            return (Result { try body(transaction) }, transaction.unopened)
        }
    }

    /// Runs `body` in a write transaction on the writer queue: committed (and synced) when it
    /// returns, rolled back when it throws. A full map is grown transparently. Rethrows what
    /// `body` throws; throws ``SyncError/Code/limitExceeded`` when the map would outgrow
    /// ``Options/maximumMapSize``, ``SyncError/Code/storeClosed`` after ``close()``.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await write(internal: body)
    }

    private func write<T: Sendable>(internal body: @escaping @Sendable (LMDBWriteTransaction) throws -> T) async throws -> T {
        try activity.enter()
        defer { activity.leave() }
        let environment = self.environment, meta = self.meta
        return try await perform(on: writer) {
            let txn = try environment.begin(readOnly: false)
            let id = mdb_txn_id(txn)
            environment.writeBegan(id)
            let transaction = LMDBWriteTransaction(environment: environment, meta: meta, txn: txn)
            defer { transaction.end() }
            do {
                let result = try body(transaction)
                try transaction.commit()
                environment.writeCommitted(id)
                return result
            } catch {
                transaction.abort()
                throw error
            }
        }
    }

    /// Grows each time a commit by another process is found: LMDB numbers write transactions
    /// one after another, and this store notes the numbers of its own, so a number it did not
    /// make is another process's (app and extension may share an environment). Runs on the
    /// writer queue; reads LMDB's shared lock region, never waits for another process.
    public func externalChangeToken() async throws -> UInt64? {
        try activity.enter()
        defer { activity.leave() }
        let environment = self.environment
        return try await perform(on: writer) { try environment.externalCommits() }
    }

    /// The environment's map size, growth count, page size, bytes in use and reader table.
    /// Throws ``SyncError/Code/storeClosed`` after ``close()``.
    public func statistics() async throws -> Statistics {
        try activity.enter()
        defer { activity.leave() }
        let environment = self.environment
        return try await perform(on: writer) {
            guard let env = environment.env else { throw SyncError(.storeClosed, "the LMDB store is closed") }
            var info = MDB_envinfo()
            var stat = MDB_stat()
            mdb_env_info(env, &info)
            mdb_env_stat(env, &stat)
            return Statistics(mapSize: info.me_mapsize, mapGrowths: environment.growths, pageSize: Int(stat.ms_psize),
                              usedBytes: (info.me_last_pgno + 1) * Int(stat.ms_psize),
                              maxReaders: Int(info.me_maxreaders), readerSlotsUsed: Int(info.me_numreaders))
        }
    }

    /// Waits for the transactions already started, then closes the environment. Later calls
    /// throw ``SyncError/Code/storeClosed``; closing twice is harmless.
    public func close() async throws {
        guard activity.beginClosing() else { return }
        readers.close()
        let activity = self.activity, environment = self.environment
        try await perform(on: closer) {
            activity.waitUntilIdle()
            environment.close()
        }
    }
}
