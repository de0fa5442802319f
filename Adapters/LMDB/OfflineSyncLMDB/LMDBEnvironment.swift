import COfflineSyncLMDB
import Foundation
import OfflineSync
import Synchronization

/// Owns the `MDB_env` of an open store, the handles of its sub-databases, and the gate that
/// lets the map grow while no transaction is active.
///
/// LMDB's `mdb_env_set_mapsize` may only be called when the process has no transaction
/// open. Read transactions pass through ``enterRead()`` / ``leaveRead()``; ``grow(to:)``
/// closes the gate to new readers, waits for the active ones to finish, resizes, and opens it
/// again. Write transactions run one at a time on the writer queue, which is what calls
/// ``grow(to:)``, after aborting its own transaction.
final class LMDBEnvironment: @unchecked Sendable {
    // @unchecked Sendable: `env` is set once in `init` and only freed by `close()`, which runs
    // once every transaction has ended (the store's activity count is zero); LMDB's env is
    // thread-safe for that use. `databases`, `entries`, `activeReaders`, `growing` and
    // `mapSize` are only touched while holding `condition` (an NSCondition rather than a
    // Mutex, because resizing blocks the writer's thread until the readers have left).
    private(set) var env: OpaquePointer?
    let directory: String
    let options: LMDBStore.Options
    /// The writer queue: resizing must also wait for the write transaction, so readers
    /// resize there.
    let writer: DispatchQueue
    private let condition = NSCondition()
    /// Held around a write commit and the publication of the handles it opened.
    private let commitLock = NSLock()
    private var activeReaders = 0
    /// How many callers of ``grow(adoptOnly:)`` are waiting or resizing.
    private var growing = 0
    private var databases: [String: MDB_dbi] = [:]
    private var entries: [ExactString: LMDBTable] = [:]
    private var mapSizeValue: Int
    private var growthCount = 0
    /// The last transaction id this store knows committed: its own, or one it found.
    private var knownTransaction = 0
    /// How many times commits by another process were found (``externalCommits()``).
    private var externalEpoch: UInt64 = 0

    /// The canonical directory this environment holds in ``LMDBOpenDirectories``.
    private let claim: String

    /// Opens the environment of a directory already claimed in ``LMDBOpenDirectories``; the claim
    /// is released when opening fails or the environment closes.
    init(directory: String, options: LMDBStore.Options, claim: String, writer: DispatchQueue) throws {
        self.writer = writer
        self.directory = directory
        self.options = options
        self.claim = claim
        var handle: OpaquePointer?
        do {
            try LMDBFailure.check(mdb_env_create(&handle), "creating an environment")
        } catch {
            LMDBOpenDirectories.shared.release(claim)
            throw error
        }
        guard let handle else { throw SyncError(.storageFailure, "LMDB returned no environment") }
        do {
            try LMDBFailure.check(mdb_env_set_maxreaders(handle, UInt32(clamping: options.maxReaders)), "setting maxReaders")
            try LMDBFailure.check(mdb_env_set_maxdbs(handle, MDB_dbi(clamping: options.maxDatabases)), "setting maxDatabases")
            try LMDBFailure.check(mdb_env_set_mapsize(handle, options.initialMapSize), "setting the map size")
            try LMDBFailure.check(mdb_env_open(handle, directory, UInt32(MDB_NOTLS), 0o644), "opening '\(directory)'")
            // Frees the reader slots of processes that died with a read transaction open.
            var dead: Int32 = 0
            try LMDBFailure.check(mdb_reader_check(handle, &dead), "clearing stale reader slots")
        } catch {
            mdb_env_close(handle)
            LMDBOpenDirectories.shared.release(claim)
            throw error
        }
        env = handle
        var info = MDB_envinfo()
        mdb_env_info(handle, &info)
        mapSizeValue = info.me_mapsize
    }

    /// The current map size in bytes.
    var mapSize: Int { condition.withLock { mapSizeValue } }
    /// How many times the map grew since the store opened.
    var growths: Int { condition.withLock { growthCount } }

    /// Waits while the map is growing, then counts a reader in.
    func enterRead() {
        condition.lock()
        while growing > 0 { condition.wait() }
        activeReaders += 1
        condition.unlock()
    }

    /// Counts a reader out.
    func leaveRead() {
        condition.lock()
        activeReaders -= 1
        if activeReaders == 0 { condition.broadcast() }
        condition.unlock()
    }

    /// Grows the map by ``LMDBStore/Options/mapGrowthStep`` (at least 1 MiB), up to
    /// ``LMDBStore/Options/maximumMapSize``. Called by the writer with no write transaction
    /// open. With `adoptOnly`, takes the size another process set instead. Throws
    /// ``SyncError/Code/limitExceeded`` when the map is already at its maximum.
    func grow(adoptOnly: Bool = false) throws {
        condition.lock()
        growing += 1
        while activeReaders > 0 { condition.wait() }
        defer {
            growing -= 1
            condition.broadcast()
            condition.unlock()
        }
        guard let env else { throw SyncError(.storeClosed, "the LMDB store is closed") }
        if adoptOnly {
            try LMDBFailure.check(mdb_env_set_mapsize(env, 0), "adopting the map size")
        } else {
            let current = mapSizeValue
            guard current < options.maximumMapSize else {
                throw SyncError(.limitExceeded, "the LMDB map is full at its maximum size of \(options.maximumMapSize) bytes (Options.maximumMapSize)")
            }
            let step = max(options.mapGrowthStep, 1 << 20)
            let target = min(options.maximumMapSize, current + step)
            try LMDBFailure.check(mdb_env_set_mapsize(env, target), "growing the map")
            growthCount += 1
        }
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        mapSizeValue = info.me_mapsize
    }

    /// Runs `body` holding the commit lock.
    func withCommitLock<T>(_ body: () throws -> T) rethrows -> T {
        try commitLock.withLock(body)
    }

    /// The handle of a sub-database opened and committed earlier, or `nil`.
    func committedDatabase(_ name: String) -> MDB_dbi? {
        condition.withLock { databases[name] }
    }

    /// Opens handles for sub-databases another process created, in a write transaction of
    /// their own (run on the writer queue: no other transaction of the process opens a handle
    /// meanwhile). A name the environment lacks throws ``SyncError/Code/corrupted``.
    func openExisting(_ names: Set<String>) throws {
        let txn = try begin(readOnly: false)
        var committed = false
        defer { if !committed { mdb_txn_abort(txn) } }
        var opened: [String: MDB_dbi] = [:]
        for name in names where committedDatabase(name) == nil {
            var dbi = MDB_dbi()
            let rc = mdb_dbi_open(txn, name, 0, &dbi)
            if rc == MDB_NOTFOUND { throw SyncError(.corrupted, "'\(directory)' lacks the sub-database '\(name)' its meta database lists") }
            try LMDBFailure.check(rc, "opening the sub-database '\(name)'")
            opened[name] = dbi
        }
        committed = true
        let rc = withCommitLock { () -> Int32 in
            let rc = mdb_txn_commit(txn)
            if rc == MDB_SUCCESS { adopt(opened) }
            return rc
        }
        try LMDBFailure.check(rc, "committing the sub-database handles")
    }

    /// Records handles opened by a transaction that committed.
    func adopt(_ opened: [String: MDB_dbi]) {
        guard !opened.isEmpty else { return }
        condition.withLock { databases.merge(opened) { _, new in new } }
    }

    /// A decoded table entry equal to `bytes`, or decodes and remembers it.
    func entry(named name: String, bytes: UnsafeRawBufferPointer) throws -> LMDBTable {
        let key = ExactString(name)
        if let cached = condition.withLock({ entries[key] }), cached.bytes.elementsEqual(bytes) { return cached }
        let entry = try LMDBTable(decoding: Array(bytes))
        condition.withLock { entries[key] = entry }
        return entry
    }

    // MARK: Commits by other processes
    //
    // LMDB numbers write transactions: a write transaction gets the last committed id plus
    // one. The writer queue notes each id it begins and commits, so an id it did not make
    // means another process committed. All three run on the writer queue.

    /// Takes the environment's last committed transaction as known (after opening).
    func resetKnownTransaction() {
        guard let env else { return }
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        condition.withLock { knownTransaction = info.me_last_txnid }
    }

    /// A write transaction `id` began: unless the one before it was known, another process
    /// committed in between.
    func writeBegan(_ id: Int) {
        condition.withLock {
            if knownTransaction != id - 1 { externalEpoch &+= 1 }
            knownTransaction = id - 1
        }
    }

    /// The write transaction `id` committed.
    func writeCommitted(_ id: Int) {
        condition.withLock { knownTransaction = id }
    }

    /// A count that grows each time a commit by another process was found.
    func externalCommits() throws -> UInt64 {
        guard let env else { throw SyncError(.storeClosed, "the LMDB store is closed") }
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return condition.withLock {
            if info.me_last_txnid != knownTransaction {
                externalEpoch &+= 1
                knownTransaction = info.me_last_txnid
            }
            return externalEpoch
        }
    }

    /// Closes the environment. The caller guarantees no transaction is active.
    func close() {
        condition.withLock {
            if let env {
                mdb_env_close(env)
                LMDBOpenDirectories.shared.release(claim)
            }
            env = nil
            databases = [:]
            entries = [:]
        }
    }

    /// Begins a transaction. `MDB_MAP_RESIZED` (another process grew the map) is handled by
    /// adopting the new size and retrying: on the writer queue for a read transaction (whose
    /// caller holds the read gate and runs on a reader queue), at once for a write
    /// transaction (whose caller is the writer queue).
    func begin(readOnly: Bool) throws -> OpaquePointer {
        guard let env else { throw SyncError(.storeClosed, "the LMDB store is closed") }
        for _ in 0..<3 {
            var txn: OpaquePointer?
            let rc = mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
            if rc == MDB_SUCCESS, let txn { return txn }
            if rc == MDB_MAP_RESIZED {
                if readOnly {
                    // No transaction may be open while resizing: not even the writer's.
                    leaveRead()
                    defer { enterRead() }
                    try writer.sync { try grow(adoptOnly: true) }
                } else {
                    try grow(adoptOnly: true)
                }
                continue
            }
            throw LMDBFailure.error(rc, readOnly ? "beginning a read transaction" : "beginning a write transaction")
        }
        throw SyncError(.busy, "LMDB: the map kept being resized by another process")
    }
}

/// The environment directories open in this process. LMDB forbids opening one environment
/// twice in a process (closing the second handle would drop the first one's locks), so a
/// second open is refused with ``SyncError/Code/busy``.
final class LMDBOpenDirectories: Sendable {
    static let shared = LMDBOpenDirectories()
    /// The canonical paths of the environments open now.
    private let paths = Mutex(Set<String>())

    /// Claims a directory; returns its canonical path.
    func claim(_ directory: String) throws -> String {
        let path = URL(fileURLWithPath: directory).resolvingSymlinksInPath().standardizedFileURL.path
        try paths.withLock { paths in
            guard paths.insert(path).inserted else {
                throw SyncError(.busy, "the LMDB environment '\(directory)' is already open in this process; share one LMDBStore")
            }
        }
        return path
    }

    func release(_ path: String) {
        _ = paths.withLock { $0.remove(path) }
    }
}
