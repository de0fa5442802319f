import COfflineSyncLMDB
import Foundation
import OfflineSync

/// Checks a directory before LMDB may write to it, so a damaged, truncated, foreign or
/// non-LMDB `data.mdb` is refused with a typed error and left byte for byte unchanged.
///
/// The checks read the two meta pages LMDB keeps at the start of `data.mdb` (page header,
/// `P_META` flag, page number, magic `0xBEEFC0DE`, data version, page size, last page and
/// root pages) without opening it, then open a valid file read-only and lock-free
/// (`MDB_RDONLY | MDB_NOLOCK`, so neither `data.mdb` nor `lock.mdb` is touched) to find the
/// OfflineSync marker.
enum LMDBEnvironmentFile {
    static let dataFile = "data.mdb"
    static let lockFile = "lock.mdb"

    static let magic: UInt32 = 0xBEEF_C0DE
    static let dataVersion: UInt32 = 1
    static let pageHeaderSize = 16
    static let metaFlag: UInt16 = 0x08
    /// Offsets inside a meta page (LMDB on a 64-bit platform: 16-byte page header, then
    /// `MDB_meta`; fields in the platform's byte order, as LMDB writes them).
    static let magicOffset = 16, versionOffset = 20, mapSizeOffset = 32, pageSizeOffset = 40
    static let freeRootOffset = 16 + 24 + 40, mainRootOffset = 16 + 72 + 40
    static let lastPageOffset = 16 + 120, txnIDOffset = 16 + 128
    static let metaEnd = 16 + 136
    /// The largest map size a meta page may record: 2^47 bytes, the user address space of
    /// x86-64 and arm64 Linux, so no process can ever have mapped more. A larger value is a
    /// damaged field, and LMDB would fail to map it with a bare `ENOMEM`.
    static let largestMapSize: UInt64 = 1 << 47

    /// What the directory holds.
    enum State {
        /// No environment yet (missing or empty `data.mdb`): one will be created.
        case new
        /// A `data.mdb` whose meta pages are sound.
        case existing
    }

    /// Creates the directory if it is missing and checks what it holds. Throws
    /// ``SyncError/Code/notADatabase`` (not a directory, other files and no `data.mdb`, or a
    /// `data.mdb` that is not LMDB's) or ``SyncError/Code/corrupted`` (damaged or truncated).
    static func prepare(_ directory: String) throws -> State {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw SyncError(.notADatabase, "'\(directory)' is a file, not an LMDB environment directory")
            }
        } else {
            do {
                try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw SyncError(.storageFailure, "cannot create the directory '\(directory)': \(error.localizedDescription)")
            }
            return .new
        }
        let data = (directory as NSString).appendingPathComponent(dataFile)
        guard manager.fileExists(atPath: data, isDirectory: &isDirectory) else {
            let others = ((try? manager.contentsOfDirectory(atPath: directory)) ?? []).filter { $0 != lockFile }
            if !others.isEmpty {
                throw SyncError(.notADatabase, "'\(directory)' is not an LMDB environment: it holds other files and no \(dataFile)")
            }
            return .new
        }
        if isDirectory.boolValue { throw SyncError(.notADatabase, "'\(data)' is a directory, not an LMDB data file") }
        guard let handle = FileHandle(forReadingAtPath: data) else {
            throw SyncError(.storageFailure, "cannot read '\(data)'")
        }
        defer { try? handle.close() }
        let size: UInt64
        let head: [UInt8]
        do {
            size = try handle.seekToEnd()
            if size == 0 { return .new }
            try handle.seek(toOffset: 0)
            head = [UInt8](try handle.read(upToCount: 65_536 + metaEnd) ?? Data())
        } catch {
            throw SyncError(.storageFailure, "cannot read '\(data)': \(error.localizedDescription)")
        }
        try check(head, fileSize: size, path: data)
        return .existing
    }

    /// The meta page checks on the first bytes of a `data.mdb` of `fileSize` bytes.
    static func check(_ head: [UInt8], fileSize: UInt64, path: String) throws {
        guard let first = meta(head, at: 0, pageNumber: 0) else {
            if head.count >= magicOffset + 4, load32(head, magicOffset) == magic {
                throw SyncError(.corrupted, "'\(path)' is a damaged LMDB data file (its first meta page is invalid)")
            }
            // The first page is not LMDB's: a damaged file still has its second meta page.
            if [4096, 8192, 16_384, 32_768, 65_536].contains(where: { meta(head, at: $0, pageNumber: 1) != nil }) {
                throw SyncError(.corrupted, "'\(path)' is a damaged LMDB data file (its first meta page is overwritten)")
            }
            throw SyncError(.notADatabase, "'\(path)' is not an LMDB data file (\(fileSize) bytes, no LMDB meta page)")
        }
        let pageSize = Int(load32(head, pageSizeOffset))
        guard pageSize >= 512, pageSize <= 65_536, pageSize & (pageSize - 1) == 0 else {
            throw SyncError(.corrupted, "'\(path)' has an invalid page size in its LMDB meta page")
        }
        guard fileSize >= UInt64(2 * pageSize), head.count >= pageSize + metaEnd else {
            throw SyncError(.corrupted, "'\(path)' is a truncated LMDB data file (\(fileSize) bytes, shorter than its two meta pages)")
        }
        guard let second = meta(head, at: pageSize, pageNumber: 1) else {
            throw SyncError(.corrupted, "'\(path)' is a damaged LMDB data file (its second meta page is invalid)")
        }
        // LMDB writes a commit's meta page into slot `txnid % 2` (mdb_env_write_meta), and a
        // new file gets both slots with id 0 (mdb_env_init_meta): so slot 0 holds an even id,
        // slot 1 an odd one, one apart — or both are 0. LMDB reads through the slot with the
        // higher id, and the other slot's tree is the previous commit, still intact: a damaged
        // id there would silently roll the store back one commit (to an empty store, right
        // after the schema was written), so any other pair is damage.
        guard (first.transaction == 0 && second.transaction == 0)
            || (first.transaction % 2 == 0 && second.transaction % 2 == 1
                && max(first.transaction, second.transaction) - min(first.transaction, second.transaction) == 1) else {
            throw SyncError(.corrupted, "'\(path)' is a damaged LMDB data file (its meta pages record transactions \(first.transaction) and \(second.transaction), which no commit sequence leaves)")
        }
        for meta in [first, second] {
            let pages = fileSize / UInt64(pageSize)
            guard meta.lastPage < pages else {
                throw SyncError(.corrupted, "'\(path)' is truncated: \(fileSize) bytes, but its LMDB meta page uses \(meta.lastPage + 1) pages of \(pageSize) bytes")
            }
            for root in meta.roots where root != UInt64.max && (root > meta.lastPage || root < 2) {
                throw SyncError(.corrupted, "'\(path)' is a damaged LMDB data file (a root page lies outside the file)")
            }
            guard meta.mapSize <= largestMapSize else {
                throw SyncError(.corrupted, "'\(path)' is a damaged LMDB data file (its meta page records a map larger than any address space)")
            }
        }
    }

    struct Meta {
        var lastPage: UInt64
        var roots: [UInt64]
        var mapSize: UInt64
        /// The id of the commit that wrote this meta page (`mm_txnid`).
        var transaction: UInt64
    }

    /// The meta page at `offset` if it is one (meta flag, page number, magic, version).
    private static func meta(_ head: [UInt8], at offset: Int, pageNumber: UInt64) -> Meta? {
        guard head.count >= offset + metaEnd else { return nil }
        guard load64(head, offset) == pageNumber,
              load16(head, offset + 10) & metaFlag != 0,
              load32(head, offset + magicOffset) == magic,
              load32(head, offset + versionOffset) == dataVersion else { return nil }
        return Meta(lastPage: load64(head, offset + lastPageOffset),
                    roots: [load64(head, offset + freeRootOffset), load64(head, offset + mainRootOffset)],
                    mapSize: load64(head, offset + mapSizeOffset),
                    transaction: load64(head, offset + txnIDOffset))
    }

    static func load16(_ bytes: [UInt8], _ offset: Int) -> UInt16 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt16.self) }
    }

    static func load32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }

    static func load64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
    }

    /// Opens an existing environment read-only without its lock file and checks the marker:
    /// an OfflineSync store or an empty environment passes; anything else throws
    /// ``SyncError/Code/foreignDatabase``, ``SyncError/Code/corrupted`` or
    /// ``SyncError/Code/unsupported`` (a newer format).
    ///
    /// A lock-free read could see pages another process is rewriting at that moment, so a
    /// `corrupted` verdict is checked again with LMDB's reader lock when `lock.mdb` exists
    /// (another process may be using the environment).
    ///
    /// With `verifyPages`, every page LMDB would follow is checked first (``LMDBPageVerifier``),
    /// inside the read transaction, so no page of that snapshot can be reused meanwhile.
    static func probe(_ directory: String, verifyPages: Bool) throws {
        do {
            try probe(directory, locking: false, verifyPages: verifyPages)
        } catch let error as SyncError where error.code == .corrupted {
            let lock = (directory as NSString).appendingPathComponent(lockFile)
            guard FileManager.default.fileExists(atPath: lock) else { throw error }
            try probe(directory, locking: true, verifyPages: verifyPages)
        }
    }

    private static func probe(_ directory: String, locking: Bool, verifyPages: Bool) throws {
        var env: OpaquePointer?
        try LMDBFailure.check(mdb_env_create(&env), "creating an environment")
        defer { mdb_env_close(env) }
        try LMDBFailure.check(mdb_env_set_maxdbs(env, 4), "setting maxdbs")
        // A map of the file's own size (LMDB rounds it up to what the meta page's last page
        // needs), so the probe never depends on the map size the meta page records.
        let data = (directory as NSString).appendingPathComponent(dataFile)
        let fileSize = ((try? FileManager.default.attributesOfItem(atPath: data))?[.size] as? NSNumber)?.intValue ?? 0
        try LMDBFailure.check(mdb_env_set_mapsize(env, max(fileSize, 1 << 20)), "setting the map size")
        let flags = UInt32(MDB_RDONLY | MDB_NOTLS) | (locking ? 0 : UInt32(MDB_NOLOCK))
        try LMDBFailure.check(mdb_env_open(env, directory, flags, 0o644), "opening '\(directory)' read-only")
        var txn: OpaquePointer?
        try LMDBFailure.check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "reading '\(directory)'")
        defer { mdb_txn_abort(txn) }
        if verifyPages { try LMDBPageVerifier.verify((directory as NSString).appendingPathComponent(dataFile)) }
        try checkMarker(txn!, directory: directory, create: false)
    }

    /// Checks the meta sub-database in `txn`; returns its handle, or `nil` for an empty
    /// environment (where, with `create`, it is created and marked).
    @discardableResult
    static func checkMarker(_ txn: OpaquePointer, directory: String, create: Bool) throws -> MDB_dbi? {
        var meta = MDB_dbi()
        let rc = mdb_dbi_open(txn, LMDBLayout.metaDatabase, 0, &meta)
        if rc == MDB_NOTFOUND {
            var main = MDB_dbi()
            try LMDBFailure.check(mdb_dbi_open(txn, nil, 0, &main), "opening the main database of '\(directory)'")
            var stat = MDB_stat()
            try LMDBFailure.check(mdb_stat(txn, main, &stat), "reading '\(directory)'")
            guard stat.ms_entries == 0 else {
                throw SyncError(.foreignDatabase, "'\(directory)' is an LMDB environment of another application (no OfflineSync marker)")
            }
            guard create else { return nil }
            try LMDBFailure.check(mdb_dbi_open(txn, LMDBLayout.metaDatabase, UInt32(MDB_CREATE), &meta), "creating the meta database")
            try put(txn, meta, LMDBLayout.formatKey, LMDBLayout.marker)
            try put(txn, meta, LMDBLayout.versionKey, BigEndian.bytes(LMDBLayout.formatVersion))
            try put(txn, meta, LMDBLayout.nextTableKey, BigEndian.bytes(1))
            return meta
        }
        if rc == MDB_INCOMPATIBLE {
            throw SyncError(.foreignDatabase, "'\(directory)' is an LMDB environment of another application")
        }
        try LMDBFailure.check(rc, "opening the meta database of '\(directory)'")
        guard try get(txn, meta, LMDBLayout.formatKey) == LMDBLayout.marker else {
            throw SyncError(.foreignDatabase, "'\(directory)' is an LMDB environment of another application (no OfflineSync marker)")
        }
        guard let versionBytes = try get(txn, meta, LMDBLayout.versionKey), let version = BigEndian.uint64(versionBytes) else {
            throw SyncError(.corrupted, "'\(directory)' lacks the OfflineSync format version")
        }
        if version > LMDBLayout.formatVersion {
            throw SyncError(.unsupported, "'\(directory)' is an OfflineSync LMDB store of a newer format (version \(version))")
        }
        return meta
    }

    static func get(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: [UInt8]) throws -> [UInt8]? {
        var data = MDB_val()
        let rc = withVal(key) { mdb_get(txn, dbi, &$0, &data) }
        if rc == MDB_NOTFOUND { return nil }
        try LMDBFailure.check(rc, "reading the meta database")
        return data.bytes
    }

    static func put(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws {
        let rc = withVal(key) { keyVal in withVal(value) { mdb_put(txn, dbi, &keyVal, &$0, 0) } }
        try LMDBFailure.check(rc, "writing the meta database")
    }
}
