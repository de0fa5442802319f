/// Reads a store inside a transaction. Lent to a closure, never stored or returned:
/// using it after the closure returned throws ``SyncError/Code/storeClosed``.
public protocol LocalReadTransaction: AnyObject {
    /// The schema of a defined table. Throws ``SyncError/Code/tableNotDefined``.
    func schema(of table: String) throws -> TableSchema
    /// Every defined table's schema, system tables included, ordered by name.
    func tables() throws -> [TableSchema]
    /// The record with this id, or `nil`.
    func record(in table: String, id: String) throws -> Record?
    /// The records matching the query, in the query's order (the reference evaluator, `QueryEvaluator` in `OfflineSyncStoreKit`, defines the result).
    /// Throws ``SyncError/Code/invalidQuery`` for a query that does not fit the schema.
    func records(in table: String, matching query: Query) throws -> [Record]
    /// The number of records matching the predicate.
    func count(in table: String, matching predicate: QueryPredicate) throws -> Int
    /// The answers to several reads, in order, each what its own call returns (a
    /// ``LocalRead/record(table:id:)`` read answers with zero or one record); throws what a
    /// failing read's own call throws. An adapter whose every call costs a round trip to a
    /// server answers them together; the default runs them one by one. The core reads an item
    /// and its newest queued operation this way on every local write.
    func read(_ reads: [LocalRead]) throws -> [[Record]]
}

/// One read of a batch answered by ``LocalReadTransaction/read(_:)``.
///
/// New cases arrive in minor releases (Docs/Versioning.md): switch over it with an
/// `@unknown default:` case.
public enum LocalRead: Sendable, Hashable {
    /// ``LocalReadTransaction/record(in:id:)``.
    case record(table: String, id: String)
    /// ``LocalReadTransaction/records(in:matching:)``.
    case records(table: String, query: Query)
}

/// Reads and writes a store inside one atomic transaction.
public protocol LocalWriteTransaction: LocalReadTransaction {
    /// Inserts or replaces the record with this id, after validating it against the
    /// table's schema (``TableSchema/validate(_:)``).
    func upsert(_ record: Record, in table: String) throws
    /// Inserts or replaces each record, in order, as one ``upsert(_:in:)-(Record,_)`` call per
    /// record would: a record whose id an earlier one in the array has replaces it, and a
    /// failure part-way may leave the records before the failing one written (throwing out of
    /// the transaction's closure rolls them back with the rest). An adapter that writes many
    /// rows with one statement does so here (SQLite: multi-row `INSERT … ON CONFLICT`); the
    /// default makes the calls. The sync server writes a pushed batch's rows and outcomes
    /// this way.
    func upsert(_ records: [Record], in table: String) throws
    /// Inserts or replaces each row, in order, as ``upsert(_:in:)-([Record],_)`` of
    /// `rows.records` would. When the store's schema of the table has the same layout as the
    /// one the rows were checked against (``TableSchema/hasSameLayout(as:)``), an adapter may
    /// write each declared value straight to its column, with no look-up of a field by name
    /// and no second check (SQLite and PostgreSQL do); otherwise it checks them as records.
    /// The default writes `rows.records`. The sync server writes a pushed batch's rows this
    /// way.
    func upsert(_ rows: ValidatedRows, in table: String) throws
    /// Deletes the record with this id; returns whether it existed.
    @discardableResult
    func delete(id: String, in table: String) throws -> Bool
    /// Deletes the records with these ids, as one ``delete(id:in:)`` call per id would, and
    /// returns how many of them existed (an id listed twice counts once; a missing id is
    /// skipped). An adapter that deletes many rows with one statement does so here (SQLite:
    /// `DELETE … WHERE "id" IN (…)`); the default makes the calls. A push's settle takes its
    /// answered operations off the queue this way.
    @discardableResult
    func delete(ids: [String], in table: String) throws -> Int
    /// Writes the record, validated as ``upsert(_:in:)-(Record,_)`` validates it, unless the
    /// table holds a record with its id; then changes nothing and answers
    /// ``LocalInsertOutcome/idExists``. An adapter whose write finds the id anyway (SQLite's
    /// `INSERT … ON CONFLICT DO NOTHING`, LMDB's `MDB_NOOVERWRITE`) answers here and saves
    /// every local insert its look-up of the item (4–9% of a local insert in `perf`). The
    /// default writes nothing and answers ``LocalInsertOutcome/notChecked``: the caller looks
    /// the id up itself, as a store that pays a round trip per call should have it do (the
    /// core then reads the item with the item's queued operations, in one ``LocalReadTransaction/read(_:)``).
    func insert(_ record: Record, in table: String) throws -> LocalInsertOutcome
}

/// What ``LocalWriteTransaction/insert(_:in:)`` did.
public enum LocalInsertOutcome: Sendable, Hashable {
    /// The record was written: the table held no record with its id.
    case inserted
    /// The table holds a record with the id; nothing changed.
    case idExists
    /// Nothing was written and nothing was checked: look the id up, then upsert.
    case notChecked
}

/// What a storage adapter implements: tables of records, queries, and atomic transactions.
///
/// The contract, which the `OfflineSyncConformance` suite checks for every adapter:
/// - **atomic**: a transaction whose closure throws, or whose process dies, leaves nothing;
/// - **durable**: once `write` returns, the change survives a crash of the process;
/// - **serializable**: concurrent write transactions behave as if run one after another,
///   so read-modify-write loses no update;
/// - **exact**: every ``Value`` round-trips unchanged, strings byte for byte;
/// - **safe names**: odd table and field names are stored or refused with
///   ``SyncError/Code/invalidName``, never spliced into SQL;
/// - **no damage**: a corrupt, truncated or foreign file opens with a typed error
///   (``SyncError/Code/corrupted``, ``SyncError/Code/notADatabase`` or
///   ``SyncError/Code/foreignDatabase``) and is left byte for byte as it was.
///
/// Closures run on the adapter's own threads (never Swift's cooperative pool), so they are
/// synchronous and must not block on other async work.
public protocol LocalStore: AnyObject, Sendable {
    /// Creates the table, or migrates it to a changed schema without losing data
    /// (see ``TableSchema``). Throws ``SyncError/Code/invalidName`` or
    /// ``SyncError/Code/schemaMismatch``; a failed definition changes nothing.
    func defineTable(_ schema: TableSchema) async throws

    /// Runs `body` in a read transaction that sees one consistent snapshot.
    func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T

    /// Runs `body` in a write transaction: committed when it returns, rolled back when it throws.
    func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T

    /// Runs `body` in a write transaction whose caller promises that no row it writes is
    /// written by a transaction confined to a set of names disjoint from `tables`
    /// (unconfined ones may write it). The names are the caller's partition of its data,
    /// not a check: the store refuses no write outside them.
    ///
    /// A store that runs writers in parallel may then run two confined transactions whose
    /// sets share no name at the same time, each committing whether or not the other has:
    /// what one reads of rows the other writes may be from before or after it, and the
    /// caller must be content with either. It still runs them one after another when their
    /// sets share a name, and runs an unconfined ``write(_:)`` alone. The default runs
    /// ``write(_:)``, as a store with one writer does anyway. PostgreSQL takes the schema's
    /// lock shared and a lock per name exclusive.
    func write<T: Sendable>(confinedTo tables: Set<String>,
                            _ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T

    /// Closes the store. Later calls throw ``SyncError/Code/storeClosed``.
    func close() async throws

    /// A number that changes when a commit this store object did not make lands in the
    /// store — another process on the same file (an app extension, a widget) — and stays the
    /// same across this object's own commits; `nil` when the adapter cannot tell, which is
    /// the default. While observations are live, the context polls it and, when it
    /// changes, has every observation read again (the other process's rows are unknown).
    ///
    /// Must be cheap (it runs every ``SyncOptions/externalChangeInterval``) and must not wait
    /// for a write lock another process holds. SQLite answers `PRAGMA data_version` of its
    /// writer connection; LMDB compares the environment's last transaction id with its own.
    func externalChangeToken() async throws -> UInt64?

    /// Where the store keeps attachment bytes (``AttachmentFileStore``): beside its file, or
    /// sealed under its key for an encrypting store. `nil`, the default, for a store that
    /// keeps none: a context on it refuses attachments with ``SyncError/Code/unsupported``.
    var attachmentFiles: (any AttachmentFileStore)? { get }
}

extension LocalStore {
    /// One writer at a time: the transaction runs as ``write(_:)`` does.
    public func write<T: Sendable>(confinedTo tables: Set<String>,
                                   _ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await write(body)
    }

    /// `nil`: this adapter does not see commits made elsewhere; observations see only the
    /// commits of their own process.
    public func externalChangeToken() async throws -> UInt64? { nil }

    /// `nil`: this adapter keeps no attachment bytes.
    public var attachmentFiles: (any AttachmentFileStore)? { nil }
}

extension LocalWriteTransaction {
    /// One ``upsert(_:in:)-(Record,_)`` per record, in order (adapters written before this
    /// requirement keep compiling).
    public func upsert(_ records: [Record], in table: String) throws {
        for record in records { try upsert(record, in: table) }
    }

    /// ``upsert(_:in:)-([Record],_)`` of the rows as records, checked again (adapters written
    /// before this requirement keep compiling).
    public func upsert(_ rows: ValidatedRows, in table: String) throws {
        try upsert(rows.records, in: table)
    }

    /// One ``delete(id:in:)`` per id, in order, counting those that existed (adapters written
    /// before this requirement keep compiling).
    @discardableResult
    public func delete(ids: [String], in table: String) throws -> Int {
        var existed = 0
        for id in ids where try delete(id: id, in: table) { existed += 1 }
        return existed
    }

    /// Writes nothing and leaves the look-up to the caller (adapters written before this
    /// requirement keep compiling, and keep their look-up batched with the caller's reads).
    public func insert(_ record: Record, in table: String) throws -> LocalInsertOutcome { .notChecked }
}

extension LocalReadTransaction {
    /// Runs the reads one by one (adapters written before this requirement keep compiling).
    public func read(_ reads: [LocalRead]) throws -> [[Record]] {
        try readOneByOne(reads)
    }

    /// The default ``read(_:)``, for an adapter whose own answers some batches together and
    /// others (a short one) one call at a time.
    package func readOneByOne(_ reads: [LocalRead]) throws -> [[Record]] {
        try reads.map { read in
            switch read {
            case let .record(table, id): return try record(in: table, id: id).map { [$0] } ?? []
            case let .records(table, query): return try records(in: table, matching: query)
            }
        }
    }

    /// The first record matching the query, or `nil`.
    public func first(in table: String, matching query: Query) throws -> Record? {
        try records(in: table, matching: query.limit(1)).first
    }
}
