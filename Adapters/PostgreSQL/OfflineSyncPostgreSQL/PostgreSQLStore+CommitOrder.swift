import COfflineSyncPostgreSQL
import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// Writers that do not wait for each other, ordered by PostgreSQL's transaction ids.
///
/// A ``concurrentWrite(_:)`` transaction is `SERIALIZABLE`: PostgreSQL's serializable
/// snapshot isolation lets writers of different rows commit at the same time, in one table
/// or many, from any process, and rolls back one of two that conflict (each read what the
/// other wrote), which the store then runs again. It takes the schema's advisory lock shared,
/// so a table definition (which takes it alone) never runs beside it.
///
/// Its change numbers come from its transaction id, assigned as the transaction begins:
/// `2⁴⁰ + xid × 2²⁰`, 2²⁰ numbers per transaction. A read's horizon is the same function of
/// the oldest transaction id among this schema's concurrent writers still running (each
/// holds the schema's lock, and its own id's lock, in `pg_locks`; for one that holds the
/// first and not yet the second, the oldest id running anywhere), or of the next id to be
/// given when none is, read before the snapshot is taken: every writer below it has ended,
/// and every one that gets an id later gets a larger one. (`pg_snapshot_xmin` alone would
/// do, but it is the oldest transaction of the whole cluster, so any long transaction,
/// whatever it does, would hold every pull back.) The offset keeps every number above the counters the store's
/// single-writer sequences hand out (a table's first 2⁴⁰ changes).
///
/// Stamps: a writer first takes a shared advisory lock keyed by the millisecond its clock
/// reads (`clock_timestamp()`), then reads the clock again for ``ChangeOrder/clock``, so
/// every stamp it takes is at least its lock's millisecond. A read first reads the clock,
/// then the smallest millisecond any writer of the database holds (`pg_locks`, which every
/// role may read), and only then takes its snapshot: a writer outside the snapshot either
/// held its lock then (its stamps are at least that millisecond) or locked it later (its
/// stamps are not older than the read's clock), so the smaller of the two is
/// ``ChangeHorizon/stamp``. It can move back for a moment: a writer stalled between reading
/// its clock and taking its lock lowers the horizon of reads that see its lock below what an
/// earlier read used (its own stamps are not below that read's clock); a reader that pages
/// keeps the highest bound it used (the tables API carries it in `$skiptoken`). It assumes
/// the database server's clock does not step back; writers of other schemas in the same
/// database hold it back too.
extension PostgreSQLStore: CommitOrderedStore {
    /// Where commit-ordered numbers begin.
    static let orderOffset: Int64 = 1 << 40
    /// How many numbers each transaction may hand out.
    static let orderSpan: Int64 = 1 << 20
    /// How many times a transaction rolled back by a conflict runs again before
    /// ``SyncError/Code/busy``.
    static let conflictAttempts = 64

    /// Milliseconds since 1970 at 2020-01-01T00:00:00Z: a stamp lock's key is the
    /// milliseconds since then (below 2⁴², until 2159) plus ``stampLockBase``.
    static let stampLockEpoch: Int64 = 1_577_836_800_000

    /// What the stamp locks' keys begin with: `0x4F53` ("OS") in the bits above the 42 of the
    /// milliseconds, so `pg_locks.classid >> 10` tells them from every other 64-bit advisory
    /// lock an application might take (small numbers, hashes), which would otherwise hold
    /// the stamp horizon back for as long as it is held.
    static let stampLockBase: Int64 = 0x4F53 << 42

    /// The change number a transaction id stands for (see the extension's comment).
    static func changeNumber(transaction id: Int64) throws -> Int64 {
        let (product, overflow) = id.multipliedReportingOverflow(by: orderSpan)
        guard id >= 0, !overflow, product <= Int64.max - orderOffset else {
            throw SyncError(.storageFailure, "the PostgreSQL transaction id \(id) is past what a change number can hold")
        }
        return orderOffset + product
    }

    /// Every concurrent write's transaction holds rows (``PGTransaction/heldRecord(in:id:exclusive:)``).
    public var holdsRows: Bool { true }

    /// Runs `body` in a `SERIALIZABLE` transaction beside other writers (see
    /// ``CommitOrderedStore/concurrentWrite(_:)``). A serialization failure or a deadlock,
    /// whether a statement of the body or the `COMMIT` met it, rolls the transaction back and
    /// runs the body again after a short random pause, up to 64 runs in all, then throws
    /// ``SyncError/Code/busy``. Otherwise throws as ``write(_:)`` does.
    public func concurrentWrite<T: Sendable>(
        _ body: @escaping @Sendable (any LocalWriteTransaction, ChangeOrder) throws -> T) async throws -> T {
        try await ordered(alone: false, body)
    }

    /// Runs `body` alone, holding the schema's lock as ``write(_:)`` does, with change numbers
    /// (see ``CommitOrderedStore/orderedWrite(_:)``). Throws as ``write(_:)`` does.
    public func orderedWrite<T: Sendable>(
        _ body: @escaping @Sendable (any LocalWriteTransaction, ChangeOrder) throws -> T) async throws -> T {
        try await ordered(alone: true, body)
    }

    /// A write transaction with change numbers: beside other such writers (`SERIALIZABLE`,
    /// the schema's lock shared) or alone (`READ COMMITTED`, the schema's lock exclusive).
    private func ordered<T: Sendable>(
        alone: Bool, _ body: @escaping @Sendable (any LocalWriteTransaction, ChangeOrder) throws -> T) async throws -> T {
        let quoted = quotedSchema, options = self.options
        let opening = [PGStatement(alone ? "BEGIN ISOLATION LEVEL READ COMMITTED" : "BEGIN ISOLATION LEVEL SERIALIZABLE", prepare: false),
                       PGStatement(alone ? PostgreSQLStore.lockStatement : PostgreSQLStore.sharedLockStatement, [.text(options.schema)]),
                       // The stamp lock's millisecond first, then the clock the stamps come from.
                       PGStatement("SELECT pg_advisory_xact_lock_shared(\(PostgreSQLStore.stampLockBase) + floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - \(PostgreSQLStore.stampLockEpoch))"),
                       PGStatement("SELECT pg_current_xact_id()::text::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")]
        var conflicts = 0, reconnects = 0
        while true {
            let outcome: Attempt<T>
            do {
                outcome = try await pool.run { connection, worker -> Attempt<T> in
                    connection.clearConflict()
                    func settle(_ error: any Error) -> Attempt<T> {
                        if connection.isAlive, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
                        if connection.sawConflict { return .conflict }
                        return connection.isAlive ? .failed(error) : .lost(error)
                    }
                    let order: ChangeOrder
                    do {
                        let started = try connection.execute(opening)
                        guard let id = started.int64(0, 0), let clock = started.int64(0, 1) else {
                            throw SyncError(.storageFailure, "\(connection.endpoint): no transaction id for a concurrent writer")
                        }
                        order = ChangeOrder(first: try PostgreSQLStore.changeNumber(transaction: id), count: PostgreSQLStore.orderSpan,
                                            clock: Timestamp(millisecondsSince1970: clock))
                    } catch {
                        return settle(error)
                    }
                    let transaction = PGTransaction(connection: connection, queueKey: worker.queueKey, schema: quoted, writable: true)
                    let value: T
                    do {
                        value = try body(transaction, order)
                        try transaction.flush()
                        transaction.end()
                    } catch {
                        transaction.end()
                        return settle(error)
                    }
                    // A body that caught a conflict's error itself still ran in a rolled-back
                    // transaction: its work is not done.
                    if connection.sawConflict { return settle(SyncError(.busy, "serialization failure")) }
                    do {
                        try connection.execute(PostgreSQLStore.commitStatements)
                    } catch {
                        // At COMMIT a serialization failure means the server rolled back. A
                        // statement before it that failed left the transaction open (and its
                        // locks held): end it.
                        let open = connection.isAlive && connection.inTransaction
                        if open { _ = try? connection.execute("ROLLBACK") }
                        if connection.sawConflict { return .conflict }
                        if open { return .failed(error) }
                        return .failed(SyncError(.transient, "\(connection.endpoint): the connection failed during COMMIT; the transaction may or may not have been applied"))
                    }
                    return .committed(value)
                }
            }
            switch outcome {
            case .committed(let value):
                return value
            case .failed(let error):
                throw error
            case .lost(let error):
                reconnects += 1
                if reconnects > max(0, options.reconnectAttempts) { throw error }
            case .conflict:
                conflicts += 1
                if conflicts >= PostgreSQLStore.conflictAttempts {
                    throw SyncError(.busy, "\(endpoint): the transaction met a conflicting writer \(conflicts) times; try again")
                }
                // A pause that grows with the conflicts and differs between writers, so two
                // that conflicted do not meet again at once.
                let ceiling = min(50_000, 500 * conflicts)
                try await Task.sleep(for: .microseconds(Int.random(in: ceiling / 2...ceiling)))
            }
        }
    }

    /// Runs `body` in a `REPEATABLE READ READ ONLY` transaction with the horizon of its
    /// snapshot (see ``CommitOrderedStore/orderedRead(stamps:_:)``): two round trips (the
    /// clock and the locks are read before the snapshot is taken, and a pipeline's statements
    /// before `BEGIN` would share its transaction). Throws as ``read(_:)`` does.
    public func orderedRead<T: Sendable>(
        stamps: Bool, _ body: @escaping @Sendable (any LocalReadTransaction, ChangeHorizon) throws -> T) async throws -> T {
        let quoted = quotedSchema
        // Before the snapshot: the clock, then the locks, read once (`pg_locks` takes every
        // partition of the lock table each time; see the extension's comment). The
        // writers of this schema hold its lock; each holds its own transaction id's lock once
        // it has one, whose 32 bits are widened against the current snapshot's xmin (every
        // running id lies within 2³¹ above it). A writer without that lock yet may already
        // have its id (PostgreSQL assigns it a moment before it locks it): the snapshot's
        // xmin, at most every running id, stands in for it.
        let before = [PGStatement("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"),
                      PGStatement("""
                          WITH locks AS MATERIALIZED (
                                 SELECT locktype, database, classid, objid, objsubid, pid, transactionid, mode, granted FROM pg_locks),
                               now AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS low,
                                              pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS x),
                               db AS (SELECT oid FROM pg_database WHERE datname = current_database())
                          SELECT
                            (SELECT min(((classid::bigint & 1023) << 32) | objid::bigint) + \(PostgreSQLStore.stampLockEpoch) FROM locks
                             WHERE locktype = 'advisory' AND objsubid = 1 AND classid::bigint >> 10 = \(PostgreSQLStore.stampLockBase >> 42)
                               AND database = (SELECT oid FROM db)),
                            least(now.x, (SELECT min(coalesce(now.low + ((t.transactionid::text::bigint - now.low % 4294967296 + 4294967296) % 4294967296), now.low))
                             FROM locks a LEFT JOIN locks t ON t.pid = a.pid AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock' AND t.granted
                             WHERE a.locktype = 'advisory' AND a.objsubid = 2 AND a.classid = 1330862414
                               AND a.objid = (hashtext($1)::bigint & 4294967295)::oid AND a.database = (SELECT oid FROM db)))
                          FROM now
                          """, [.text(options.schema)])]
        if let replicas, let value = try await readOnReplica(replicas, before: before, stamps: stamps, body) { return value }
        // The transaction's first statement takes its snapshot; its xmin is a horizon too.
        let opening = [PGStatement("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", prepare: false),
                       PGStatement("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")]
        var reconnects = 0
        while true {
            let outcome: Attempt<T> = try await pool.run { connection, worker -> Attempt<T> in
                func settle(_ error: any Error) -> Attempt<T> {
                    if connection.isAlive, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
                    return connection.isAlive ? .failed(error) : .lost(error)
                }
                let horizon: ChangeHorizon
                do {
                    let read = try connection.executeAll(before)
                    guard read.count == 2, let clock = read[0].int64(0, 0), let writers = read[1].int64(0, 1) else {
                        throw SyncError(.storageFailure, "\(connection.endpoint): no horizon")
                    }
                    // No writer holds a stamp lock: the clock alone.
                    let stamp = stamps ? Timestamp(millisecondsSince1970: min(clock, read[1].int64(0, 0) ?? .max)) : nil
                    guard let xmin = try connection.execute(opening).int64(0, 0) else {
                        throw SyncError(.storageFailure, "\(connection.endpoint): no snapshot horizon")
                    }
                    horizon = ChangeHorizon(final: try PostgreSQLStore.changeNumber(transaction: max(writers, xmin)), stamp: stamp)
                } catch {
                    return settle(error)
                }
                let transaction = PGTransaction(connection: connection, queueKey: worker.queueKey, schema: quoted, writable: false)
                let value: T
                do {
                    value = try body(transaction, horizon)
                    transaction.end()
                } catch {
                    transaction.end()
                    return settle(error)
                }
                do { try connection.execute("COMMIT") } catch { return settle(error) }
                return .committed(value)
            }
            switch outcome {
            case .committed(let value): return value
            case .failed(let error): throw error
            case .lost(let error):
                reconnects += 1
                if reconnects > max(0, options.reconnectAttempts) { throw error }
            case .conflict:
                throw SyncError(.busy, "\(endpoint): a read met a conflict")
            }
        }
    }
}

extension PostgreSQLStore {
    /// ``orderedRead(stamps:_:)`` on a replica: the clock, the writers and the WAL position
    /// read on the primary in one round trip, then the snapshot on a replica that replayed
    /// that far (``PGReplicas``), whose xmin bounds the horizon as the primary's would (every
    /// id below it has ended in what the replica replayed). `nil` when no replica served it.
    func readOnReplica<T: Sendable>(_ replicas: PGReplicas, before: [PGStatement], stamps: Bool,
                                    _ body: @escaping @Sendable (any LocalReadTransaction, ChangeHorizon) throws -> T) async throws -> T? {
        // A primary that cannot answer (a lost connection) is left to the path that reconnects.
        let primary = try? await pool.run { connection, _ -> (Int64, Timestamp?, WALPosition)? in
            let read = try connection.executeAll(before + [PGReplicas.positionStatement])
            guard read.count == 3, let clock = read[0].int64(0, 0), let writers = read[1].int64(0, 1), let position = PGReplicas.position(read[2]) else {
                return nil
            }
            return (writers, stamps ? Timestamp(millisecondsSince1970: min(clock, read[1].int64(0, 0) ?? .max)) : nil, position)
        }
        guard let (writers, stamp, position) = primary ?? nil else {
            try Task.checkCancellation()
            replicas.leftToPrimaryWithoutTrying()
            return nil
        }
        return try await replicas.read(reaching: position, schema: quotedSchema) { transaction, xmin in
            try body(transaction, ChangeHorizon(final: try PostgreSQLStore.changeNumber(transaction: max(writers, xmin)), stamp: stamp))
        }
    }
}

/// How one run of a transaction ended.
private enum Attempt<T: Sendable>: Sendable {
    case committed(T)
    /// Rolled back because of another writer: run it again.
    case conflict
    /// The connection was lost before `COMMIT`: the server rolled it back; run it again on a
    /// fresh connection.
    case lost(any Error)
    case failed(any Error)
}
