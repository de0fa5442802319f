/// A store whose writers do not wait for each other, and that says which of its changes are
/// final.
///
/// A store with one writer (SQLite, LMDB, the encrypted file) hands out a change sequence in
/// commit order simply by counting under its write lock. A store whose writers commit at the
/// same time cannot: a transaction that started first may commit last, so a reader that
/// followed numbers handed out at write time would pass over a number whose transaction had
/// not committed yet, and never come back for it. A commit-ordered store solves it with a
/// *horizon*: every write transaction is given a range of change numbers (``ChangeOrder``)
/// before it writes, and every read is told a number (``ChangeHorizon``) below which no
/// transaction is still running. Numbers below the horizon are final: each belongs to a
/// transaction that committed (its rows are in the read's snapshot) or rolled back (they
/// never will be), and no transaction that is still running, or has not started, will ever
/// write one. A reader that reads only below the horizon never skips a change.
///
/// The contract, which `OfflineSyncConformance`'s `CommitOrderConformance` checks:
/// - **serializable**: ``concurrentWrite(_:)`` transactions run at the same time as each
///   other, yet behave as if run one after another; a conflict between two of them (both
///   read and wrote one row) is settled by the store, which runs one's body again (bodies are
///   pure functions of their transaction). ``LocalStore/write(_:)`` and ``orderedWrite(_:)``
///   run alone.
/// - **ordered**: two transactions' ranges never overlap, and a transaction's range lies
///   above every range of every transaction that had committed before it began.
/// - **horizon**: a read's ``ChangeHorizon/final`` is at most the first number of every
///   ``concurrentWrite(_:)`` or ``orderedWrite(_:)`` transaction of the store running when
///   the read's snapshot was taken, and every number below it that a committed transaction
///   wrote is in the snapshot. It may read lower than an earlier read's (a later read on a
///   replica that has replayed less, or a writer that registered late), so a reader that
///   pages keeps the highest bound it used: whatever lay below it had committed. Other
///   transactions (other stores', reports) do not hold it back.
/// - **clock**: ``ChangeOrder/clock`` is one clock for every writer of the store (not each
///   caller's own), and a read's ``ChangeHorizon/stamp`` is at most the clock of every
///   transaction its snapshot does not hold: a stamp taken from the clock (`updatedAt`) is
///   final below it, as a change number is below ``ChangeHorizon/final``. A reader that
///   follows stamps (a Datasync client's `updatedAt gt` delta) reads below it and skips
///   nothing.
///
/// - **held rows** (when ``holdsRows``): the transaction a ``concurrentWrite(_:)`` body is
///   given is a ``HoldingWriteTransaction``. The sync server runs pushes into shared tables
///   beside each other only on such a store; on one without it they run alone
///   (``orderedWrite(_:)``).
///
/// `PostgreSQLStore` provides it from transaction ids (`pg_current_xact_id()`, and the ids of
/// the store's running writers in `pg_locks`).
public protocol CommitOrderedStore: LocalStore {
    /// Runs `body` in a serializable write transaction beside other writers, with the change
    /// numbers it may hand out; committed when it returns, rolled back when it throws. When
    /// the store rolled it back over a conflict with another writer, the body runs again (in a
    /// new transaction, with a new range), a bounded number of times; past that the call
    /// throws ``SyncError/Code/busy``.
    func concurrentWrite<T: Sendable>(
        _ body: @escaping @Sendable (any LocalWriteTransaction, ChangeOrder) throws -> T) async throws -> T

    /// Runs `body` alone among the store's writers, as ``LocalStore/write(_:)`` does, with the
    /// change numbers it may hand out: for a transaction that must not run beside others but
    /// writes rows that readers follow by number. Committed when it returns, rolled back when
    /// it throws.
    func orderedWrite<T: Sendable>(
        _ body: @escaping @Sendable (any LocalWriteTransaction, ChangeOrder) throws -> T) async throws -> T

    /// Runs `body` in a read transaction that sees one consistent snapshot, with the horizon
    /// of that snapshot; its ``ChangeHorizon/stamp`` only when asked for with `stamps` (it
    /// may cost the store more).
    func orderedRead<T: Sendable>(
        stamps: Bool, _ body: @escaping @Sendable (any LocalReadTransaction, ChangeHorizon) throws -> T) async throws -> T

    /// Whether every ``concurrentWrite(_:)`` transaction is a ``HoldingWriteTransaction``.
    var holdsRows: Bool { get }
}

extension CommitOrderedStore {
    /// `false`: a store says it holds rows by implementing this.
    public var holdsRows: Bool { false }
}

/// The change numbers one ``CommitOrderedStore/concurrentWrite(_:)`` transaction may hand
/// out: ``first`` up to but not including `first + count`.
public struct ChangeOrder: Sendable, Hashable {
    /// The first number of the range; greater than zero.
    public var first: Int64
    /// How many numbers the range holds; at least 1,024.
    public var count: Int64
    /// The store's clock, in milliseconds since 1970, read as the transaction began: every
    /// read whose snapshot does not hold this transaction has a ``ChangeHorizon/stamp`` at
    /// most this, so a stamp not older than it is never final before the transaction is.
    public var clock: Timestamp

    /// A range of `count` numbers from `first`, given at `clock`.
    public init(first: Int64, count: Int64, clock: Timestamp) {
        self.first = first
        self.count = count
        self.clock = clock
    }
}

/// What a ``CommitOrderedStore/orderedRead(stamps:_:)`` snapshot may rely on.
public struct ChangeHorizon: Sendable, Hashable {
    /// Every change number below it is final (see ``CommitOrderedStore``). Numbers at or
    /// above it may belong to transactions still running, even where the snapshot holds rows
    /// that carry them.
    public var final: Int64
    /// Every stamp below it (milliseconds since 1970) taken from a transaction's
    /// ``ChangeOrder/clock`` is final: the transaction is in the snapshot, and no transaction
    /// outside it will take one. `nil` unless the read asked for it.
    public var stamp: Timestamp?

    /// A horizon below which every change number (and every stamp, when given) is final.
    public init(final: Int64, stamp: Timestamp? = nil) {
        self.final = final
        self.stamp = stamp
    }
}

/// A write transaction that can hold a row it reads until it ends, so that a writer who
/// decided something from the row (whom to tell of a change, from a group's row) commits
/// before the row can change, or sees the change.
///
/// Serializable transactions alone do not give that: a transaction that read a row may be
/// ordered before one that changed it and still commit after it, so its change numbers,
/// handed out as it began, can lie above the other's while what it wrote was decided without
/// it. The sync server holds the rows its shared-table writes decide from (a group's row, an
/// `owner_of` target); a change to a held row waits for every holder to end, and a holder
/// that comes after the change committed runs again.
public protocol HoldingWriteTransaction: LocalWriteTransaction {
    /// The record `id` of `table` as ``LocalReadTransaction/record(in:id:)`` reads it,
    /// held until the transaction ends: a concurrent transaction that changes or deletes it
    /// waits until then; other holders do not wait unless this hold is `exclusive` (one that
    /// is about to change the row takes it so). When a transaction that committed after this
    /// one's snapshot was taken has changed it, the call throws, and the store runs the
    /// transaction again as for any conflict. Holds are granted fairly: a hold asked for
    /// after an exclusive one that is waiting waits behind it, so a stream of holders never
    /// starves a change. A missing row has nothing to hold in it; a store may still hold its
    /// id (PostgreSQL's advisory lock does), which only makes holders of the id wait.
    func heldRecord(in table: String, id: String, exclusive: Bool) throws -> Record?
}

extension HoldingWriteTransaction {
    /// ``heldRecord(in:id:exclusive:)``, not exclusive.
    public func heldRecord(in table: String, id: String) throws -> Record? {
        try heldRecord(in: table, id: id, exclusive: false)
    }
}
