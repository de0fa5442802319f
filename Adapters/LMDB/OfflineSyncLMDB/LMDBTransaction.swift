import COfflineSyncLMDB
import Foundation
import OfflineSync

/// A read transaction: one `MDB_RDONLY` snapshot, lent to a closure on a reader queue and
/// ended (``end()``) when the closure returns; afterwards every call throws
/// ``SyncError/Code/storeClosed``. Not `Sendable`: used on one queue only.
class LMDBReadTransaction: LocalReadTransaction {
    let environment: LMDBEnvironment
    let meta: MDB_dbi
    /// The LMDB transaction; `nil` once ended.
    var txn: OpaquePointer?
    /// Table entries already looked up in this transaction.
    var entries: [ExactString: LMDBTable] = [:]
    /// Why the transaction can no longer be used, when it failed rather than ended.
    var failure: SyncError?

    init(environment: LMDBEnvironment, meta: MDB_dbi, txn: OpaquePointer) {
        self.environment = environment
        self.meta = meta
        self.txn = txn
    }

    /// Stops the transaction from being used (the owner aborts or commits the LMDB txn).
    func end() { txn = nil }

    func handle() throws -> OpaquePointer {
        guard let txn else { throw failure ?? SyncError(.storeClosed, "the transaction has ended") }
        return txn
    }

    // MARK: Low-level access

    /// Sub-databases this snapshot asked for that the process has no handle for: another
    /// process created them. ``LMDBStore`` opens them and runs the read again.
    var unopened: Set<String> = []

    /// The handle of a sub-database the meta database lists. Throws ``LMDBUnopenedDatabase``
    /// for one this process has no handle for (another process created it; a read transaction
    /// may not open handles while others run), after noting it in ``unopened``.
    func database(_ name: String) throws -> MDB_dbi? {
        if let dbi = environment.committedDatabase(name) { return dbi }
        // A table committed by the writer just before this snapshot began: its handle is
        // published under the commit lock.
        if let dbi = environment.withCommitLock({ environment.committedDatabase(name) }) { return dbi }
        unopened.insert(name)
        throw LMDBUnopenedDatabase(name: name)
    }

    /// The value of `key`, valid until the transaction changes or ends.
    func get(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> MDB_val? {
        let txn = try handle()
        var data = MDB_val()
        let rc = withVal(key) { mdb_get(txn, dbi, &$0, &data) }
        if rc == MDB_NOTFOUND { return nil }
        try LMDBFailure.check(rc, "reading a key")
        return data
    }

    /// Walks `dbi` from the first key ≥ `start` (or the first / last key), forwards or
    /// backwards, while `body` returns `true`.
    func scan(_ dbi: MDB_dbi, from start: [UInt8]? = nil, reverse: Bool = false,
              _ body: (MDB_val, MDB_val) throws -> Bool) throws {
        let txn = try handle()
        var cursor: OpaquePointer?
        try LMDBFailure.check(mdb_cursor_open(txn, dbi, &cursor), "opening a cursor")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), data = MDB_val()
        var rc: Int32
        if let start {
            rc = withVal(start) { startVal in
                key = startVal
                return mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE)
            }
        } else {
            rc = mdb_cursor_get(cursor, &key, &data, reverse ? MDB_LAST : MDB_FIRST)
        }
        let step = reverse ? MDB_PREV : MDB_NEXT
        while rc == MDB_SUCCESS {
            guard try body(key, data) else { return }
            rc = mdb_cursor_get(cursor, &key, &data, step)
        }
        if rc != MDB_NOTFOUND { try LMDBFailure.check(rc, "walking a cursor") }
    }

    /// The number of entries of a sub-database.
    func entryCount(_ dbi: MDB_dbi) throws -> Int {
        var stat = MDB_stat()
        try LMDBFailure.check(mdb_stat(try handle(), dbi, &stat), "reading statistics")
        return stat.ms_entries
    }

    // MARK: Tables

    /// The entry of a defined table. Throws ``SyncError/Code/tableNotDefined``.
    func entry(_ table: String) throws -> LMDBTable {
        _ = try handle()
        let key = ExactString(table)
        if let cached = entries[key] { return cached }
        guard let value = try get(meta, LMDBLayout.tableKey(table)) else {
            _ = try handle()
            throw SyncError(.tableNotDefined, "table '\(table)' is not defined")
        }
        let entry = try environment.entry(named: table, bytes: value.buffer)
        entries[key] = entry
        return entry
    }

    /// The records sub-database of a table.
    func recordsDatabase(_ entry: LMDBTable) throws -> MDB_dbi {
        guard let dbi = try database(entry.database) else {
            throw SyncError(.corrupted, "the LMDB store lacks the records database of table '\(entry.schema.name)'")
        }
        return dbi
    }

    func indexDatabase(_ entry: LMDBTable, _ position: Int) throws -> MDB_dbi {
        guard let dbi = try database(entry.indexDatabase(position)) else {
            throw SyncError(.corrupted, "the LMDB store lacks an index database of table '\(entry.schema.name)'")
        }
        return dbi
    }

    /// Decodes a stored record, checking its checksum (``LMDBLayout/decodeRecord(_:)``).
    static func decode(_ value: MDB_val) throws -> Record {
        try LMDBLayout.decodeRecord(value.buffer)
    }

    /// The key and record of an id, or `nil`.
    func find(_ dbi: MDB_dbi, id: String) throws -> (key: [UInt8], record: Record)? {
        // No record has an empty id (a write refuses it), and LMDB refuses a zero-length key
        // (MDB_BAD_VALSIZE): a look-up of "" finds nothing, as in every other store.
        if id.isEmpty { return nil }
        if !LMDBLayout.isLong(id) {
            let key = LMDBLayout.recordKey(id)
            guard let value = try get(dbi, key) else { return nil }
            return (key, try Self.decode(value))
        }
        let base = LMDBLayout.longKeyBase(Array(id.utf8))
        var found: (key: [UInt8], record: Record)?
        try scan(dbi, from: base) { key, value in
            guard key.buffer.starts(with: base) else { return false }
            let record = try Self.decode(value)
            if record.id.utf8.elementsEqual(id.utf8) { found = (key.bytes, record); return false }
            return true
        }
        return found
    }

    /// Fetches a record by its key (from an index).
    func fetch(_ dbi: MDB_dbi, key: [UInt8]) throws -> Record? {
        try get(dbi, key).map(Self.decode)
    }

    // MARK: LocalReadTransaction

    func schema(of table: String) throws -> TableSchema { try entry(table).schema }

    func tables() throws -> [TableSchema] {
        var result: [TableSchema] = []
        try scan(meta, from: LMDBLayout.tablePrefix) { key, value in
            guard key.buffer.starts(with: LMDBLayout.tablePrefix) else { return false }
            guard let name = String(validating: key.buffer[LMDBLayout.tablePrefix.count...], as: UTF8.self) else {
                throw SyncError(.corrupted, "the LMDB store's meta database holds a table name that is not UTF-8")
            }
            result.append(try environment.entry(named: name, bytes: value.buffer).schema)
            return true
        }
        return result.sorted { Value.utf8Less($0.name, $1.name) }
    }

    func record(in table: String, id: String) throws -> Record? {
        let entry = try entry(table)
        return try find(try recordsDatabase(entry), id: id)?.record
    }

    func records(in table: String, matching query: Query) throws -> [Record] {
        let entry = try entry(table)
        try query.validate(against: entry.schema)
        return try LMDBQueryPlanner(transaction: self, entry: entry).records(query)
    }

    func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
        let entry = try entry(table)
        try Query(predicate).validate(against: entry.schema)
        return try LMDBQueryPlanner(transaction: self, entry: entry).count(predicate)
    }
}

/// A write transaction on the writer queue. Every change is also appended to a log, so when
/// LMDB reports `MDB_MAP_FULL` the transaction can be aborted, the map grown, and the log
/// replayed into a new transaction without the body noticing.
final class LMDBWriteTransaction: LMDBReadTransaction, LocalWriteTransaction {
    enum LogEntry {
        case open(String, UInt32)
        case put(String, [UInt8], [UInt8])
        case delete(String, [UInt8], [UInt8]?)
        case empty(String)
    }

    private var log: [LogEntry] = []
    /// Handles opened (created) in this transaction; valid only once it commits.
    private var opened: [String: MDB_dbi] = [:]

    /// The handle of a sub-database, or `nil` when it does not exist. One another process
    /// created is opened in this transaction (writes run one at a time, so no other
    /// transaction of the process opens a handle meanwhile); it is kept once this commits.
    override func database(_ name: String) throws -> MDB_dbi? {
        if let dbi = opened[name] { return dbi }
        if let dbi = environment.committedDatabase(name) { return dbi }
        var dbi = MDB_dbi()
        let rc = mdb_dbi_open(try handle(), name, 0, &dbi)
        if rc == MDB_NOTFOUND { return nil }
        try LMDBFailure.check(rc, "opening the sub-database '\(name)'")
        opened[name] = dbi
        return dbi
    }

    /// Creates (or opens) a sub-database in this transaction.
    func create(_ name: String, flags: UInt32) throws -> MDB_dbi {
        if let dbi = try database(name) { return dbi }
        try perform(.open(name, flags))
        guard let dbi = opened[name] else { throw SyncError(.storageFailure, "LMDB: opening a sub-database failed") }
        return dbi
    }

    func put(_ database: String, _ key: [UInt8], _ value: [UInt8]) throws {
        try perform(.put(database, key, value))
    }

    /// Writes `value` under `key` unless the key holds a value already, and returns `nil`;
    /// otherwise writes nothing and returns the value held, as `decode` reads it (LMDB's
    /// pointer into its page is valid only until the next write). One descent of the tree
    /// where a look-up and then a write took two: the look-up was 4.5% of a local write
    /// (`perf`, local-writes-lmdb), and a new row, a queued operation's above all, finds nothing.
    func insertIfAbsent<T>(_ database: String, _ key: [UInt8], _ value: [UInt8],
                           existing decode: (MDB_val) throws -> T) throws -> T? {
        let dbi = try resolve(database)
        let txn = try handle()
        var held = MDB_val()
        let rc = withVal(key) { keyVal in
            withVal(value) { valueVal in
                let rc = mdb_put(txn, dbi, &keyVal, &valueVal, UInt32(MDB_NOOVERWRITE))
                held = valueVal // with MDB_KEYEXIST, the value the key holds
                return rc
            }
        }
        if rc == MDB_KEYEXIST { return try decode(held) }
        // LMDB reports a key it holds before it allocates a page, so a full map means the key
        // was absent: the log replays this as the plain write it is.
        log.append(.put(database, key, value))
        if rc == MDB_MAP_FULL {
            try recover()
            return nil
        }
        do {
            try LMDBFailure.check(rc, "writing")
        } catch {
            log.removeLast()
            throw error
        }
        return nil
    }

    @discardableResult
    func remove(_ database: String, _ key: [UInt8], _ value: [UInt8]? = nil) throws -> Bool {
        let dbi = try resolve(database)
        let txn = try handle()
        let rc = withVal(key) { keyVal in
            if let value { return withVal(value) { mdb_del(txn, dbi, &keyVal, &$0) } }
            return mdb_del(txn, dbi, &keyVal, nil)
        }
        if rc == MDB_NOTFOUND { return false }
        if rc == MDB_MAP_FULL {
            log.append(.delete(database, key, value))
            try recover()
            return true
        }
        try LMDBFailure.check(rc, "deleting a key")
        log.append(.delete(database, key, value))
        return true
    }

    func empty(_ database: String) throws { try perform(.empty(database)) }

    private func resolve(_ name: String) throws -> MDB_dbi {
        guard let dbi = try database(name) else { throw SyncError(.corrupted, "the LMDB store lacks the sub-database '\(name)'") }
        return dbi
    }

    /// Logs and applies an entry; on `MDB_MAP_FULL` grows the map and replays the log.
    private func perform(_ entry: LogEntry) throws {
        log.append(entry)
        do {
            try apply(entry)
        } catch is LMDBMapFull {
            try recover()
        }
    }

    private func apply(_ entry: LogEntry) throws {
        let txn = try handle()
        let rc: Int32
        switch entry {
        case let .open(name, flags):
            var dbi = MDB_dbi()
            rc = mdb_dbi_open(txn, name, flags | UInt32(MDB_CREATE), &dbi)
            if rc == MDB_SUCCESS { opened[name] = dbi }
        case let .put(name, key, value):
            let dbi = try resolve(name)
            rc = withVal(key) { keyVal in withVal(value) { mdb_put(txn, dbi, &keyVal, &$0, 0) } }
        case let .delete(name, key, value):
            let dbi = try resolve(name)
            rc = withVal(key) { keyVal in
                if let value { return withVal(value) { mdb_del(txn, dbi, &keyVal, &$0) } }
                return mdb_del(txn, dbi, &keyVal, nil)
            }
            if rc == MDB_NOTFOUND { return }
        case let .empty(name):
            rc = mdb_drop(txn, try resolve(name), 0)
        }
        if rc == MDB_MAP_FULL { throw LMDBMapFull() }
        try LMDBFailure.check(rc, "writing")
    }

    /// Aborts the full transaction, grows the map and replays the log into a new one, as
    /// often as it takes (up to ``LMDBStore/Options/maximumMapSize``).
    private func recover() throws {
        let old = try handle()
        let id = mdb_txn_id(old)
        mdb_txn_abort(old)
        txn = nil
        try regrow(expecting: id)
    }

    private func regrow(expecting id: Int) throws {
        do {
            try regrowOnce(expecting: id)
        } catch let error as SyncError {
            // Later calls of a body that swallowed the error see it again, and so does the commit.
            failure = error
            throw error
        }
    }

    private func regrowOnce(expecting id: Int) throws {
        while true {
            opened = [:]
            try environment.grow()
            let fresh = try environment.begin(readOnly: false)
            guard mdb_txn_id(fresh) == id else {
                mdb_txn_abort(fresh)
                throw SyncError(.busy, "another process wrote to the LMDB store while its map grew; retry the transaction")
            }
            txn = fresh
            do {
                for entry in log { try apply(entry) }
                return
            } catch is LMDBMapFull {
                mdb_txn_abort(fresh)
                txn = nil
            }
        }
    }

    /// Commits, growing the map and replaying when the commit itself runs out of room, and
    /// publishes the sub-database handles opened by the transaction.
    func commit() throws {
        while true {
            let txn = try handle()
            let id = mdb_txn_id(txn)
            let rc = environment.withCommitLock { () -> Int32 in
                let rc = mdb_txn_commit(txn)
                if rc == MDB_SUCCESS { environment.adopt(opened) }
                return rc
            }
            self.txn = nil
            if rc == MDB_SUCCESS { return }
            guard rc == MDB_MAP_FULL else { throw LMDBFailure.error(rc, "committing") }
            try regrow(expecting: id)
        }
    }

    /// Aborts the transaction if it is still open.
    func abort() {
        if let txn { mdb_txn_abort(txn) }
        txn = nil
    }

    override func end() {
        super.end()
        failure = nil
    }

    // MARK: LocalWriteTransaction

    func upsert(_ record: Record, in table: String) throws {
        _ = try write(record, in: table, replacing: true)
    }

    func insert(_ record: Record, in table: String) throws -> LocalInsertOutcome {
        try write(record, in: table, replacing: false) ? .inserted : .idExists
    }

    /// Writes the record and its index entries, or — unless `replacing` — nothing when a
    /// record has its id; returns whether it wrote. A short id's key is found by the write
    /// itself (`MDB_NOOVERWRITE`), so an insert searches the tree once, not twice.
    private func write(_ record: Record, in table: String, replacing: Bool) throws -> Bool {
        let entry = try entry(table)
        try entry.schema.validate(record)
        let dbi = try recordsDatabase(entry)
        let indexes = entry.indexes
        let key: [UInt8]
        let value = LMDBLayout.recordValue(record)
        var previous: Record?
        var written = false
        if LMDBLayout.isLong(record.id) {
            if let existing = try find(dbi, id: record.id) {
                guard replacing else { return false }
                key = existing.key
                previous = existing.record
            } else {
                key = try freeLongKey(dbi, id: record.id)
            }
        } else {
            key = LMDBLayout.recordKey(record.id)
            if !replacing {
                guard try insertIfAbsent(entry.database, key, value, existing: { _ in true }) == nil else { return false }
                written = true
            } else if !indexes.isEmpty {
                // The row it replaces, whose index entries go: read by the write itself.
                previous = try insertIfAbsent(entry.database, key, value, existing: Self.decode)
                written = previous == nil
            }
        }
        if !written { try put(entry.database, key, value) }
        for (position, fields) in indexes.enumerated() {
            let newKey = LMDBIndexKey.key(record, fields)
            if let previous {
                let oldKey = LMDBIndexKey.key(previous, fields)
                if oldKey == newKey { continue }
                try remove(entry.indexDatabase(position), oldKey, key)
            }
            try put(entry.indexDatabase(position), newKey, key)
        }
        return true
    }

    func delete(id: String, in table: String) throws -> Bool {
        let entry = try entry(table)
        let dbi = try recordsDatabase(entry)
        guard let existing = try find(dbi, id: id) else { return false }
        try remove(entry.database, existing.key)
        for (position, fields) in entry.indexes.enumerated() {
            try remove(entry.indexDatabase(position), LMDBIndexKey.key(existing.record, fields), existing.key)
        }
        return true
    }

    /// The first unused probe of a long id's key.
    private func freeLongKey(_ dbi: MDB_dbi, id: String) throws -> [UInt8] {
        let base = LMDBLayout.longKeyBase(Array(id.utf8))
        var used = Set<UInt8>()
        try scan(dbi, from: base) { key, _ in
            guard key.buffer.starts(with: base), key.mv_size == base.count + 1 else { return false }
            used.insert(key.buffer[base.count])
            return true
        }
        guard let probe = (0...UInt8.max).first(where: { !used.contains($0) }) else {
            throw SyncError(.limitExceeded, "too many long record ids share a hash in table")
        }
        return base + [probe]
    }
}
