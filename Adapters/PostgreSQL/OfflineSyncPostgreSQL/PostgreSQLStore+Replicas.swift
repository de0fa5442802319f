import Foundation
import OfflineSync
import OfflineSyncStoreKit
import Synchronization

/// Hot standbys that serve the store's reads (``PostgreSQLStore/Options/replicas``).
///
/// A read that may go to a replica first reads the primary's WAL flush position (for an
/// ordered read, in the same round trip as its horizon): every transaction that had committed
/// by then — every write a client was told is applied before it asked — lies below it, since
/// with `synchronous_commit` on (or `local`, or a remote level) a commit is flushed before it
/// is visible; the store refuses replicas when its writes would commit with it `off`. A
/// replica serves the read only once it has replayed that far (`pg_last_wal_replay_lsn()`,
/// checked before its snapshot is taken, so the snapshot holds every such commit); one that
/// has not after ``PostgreSQLStore/Options/replicaWait`` leaves the read to the primary, as
/// does one that fails, is not in recovery (a promoted standby: another timeline) or cancels
/// the read for a conflict with its recovery. So a device always reads its own acknowledged
/// writes, a cursor's horizon is never ahead of the snapshot that serves it, and a lagging
/// or dead replica costs time, never a wrong page.
final class PGReplicas: Sendable {
    /// One standby: its connections, and until when it is left out after a failure.
    final class Member: Sendable {
        let pool: CheckoutPool<PGWorker>
        /// Uptime nanoseconds before which reads skip it (0: never failed).
        let skipUntil = Atomic<UInt64>(0)

        init(pool: CheckoutPool<PGWorker>) { self.pool = pool }
    }

    let members: [Member]
    let wait: Duration
    private let next = Atomic<Int>(0)
    /// Reads served by a replica, and reads a replica could not serve.
    let served = Atomic<Int>(0)
    let leftToPrimary = Atomic<Int>(0)

    /// How long a replica that failed is left out.
    static let pause: UInt64 = 5_000_000_000

    init(_ strings: [String], poolSize: Int, wait: Duration, setup: [String]) throws {
        self.wait = wait
        members = try strings.enumerated().map { index, string in
            let password = try PostgreSQLStore.password(in: string)
            let connect: @Sendable () throws -> PGConnection = {
                let connection = try PGConnection.connect(string, password: password)
                do {
                    try connection.execute("SET client_min_messages = warning")
                    for statement in setup { try connection.execute(statement) }
                } catch {
                    connection.close()
                    throw error
                }
                return connection
            }
            let workers = (0..<poolSize).map { PGWorker(label: "OfflineSyncPostgreSQL.replica\(index).connection\($0)", connect: connect) }
            return Member(pool: CheckoutPool(workers, storeName: "PostgreSQL replica"))
        }
    }

    /// The next replica in turn that is not left out, if any.
    func pick() -> Member? {
        let now = DispatchTime.now().uptimeNanoseconds
        let start = next.wrappingAdd(1, ordering: .relaxed).oldValue
        for offset in 0..<members.count {
            let member = members[Int((UInt(bitPattern: start) &+ UInt(offset)) % UInt(members.count))]
            if member.skipUntil.load(ordering: .relaxed) <= now { return member }
        }
        return nil
    }

    func shutDown() async {
        for member in members { await member.pool.shutDown() }
    }

    /// The statement that reads the primary's WAL flush position, in bytes. (The insert
    /// position would do too, but it runs ahead of what a standby can have by what the WAL
    /// writer has yet to flush: up to `wal_writer_delay`, 200 ms, for nothing a read needs.)
    static let positionStatement = PGStatement("SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint")

    /// Runs `body` in a `REPEATABLE READ READ ONLY` snapshot of a replica that has replayed
    /// the primary's WAL to `position`, giving it the snapshot's xmin; `nil` when no replica
    /// could (none, none caught up within ``wait``, or the one tried failed). Rethrows what
    /// `body` throws on a healthy connection.
    func read<T: Sendable>(reaching position: Int64, schema quoted: String,
                           _ body: @escaping @Sendable (PGTransaction, Int64) throws -> T) async throws -> T? {
        let deadline = ContinuousClock.now + wait
        guard let member = pick() else { return nil }
        while true {
            let outcome: ReplicaRead<T>
            do {
                outcome = try await member.pool.run { connection, worker -> ReplicaRead<T> in
                    connection.clearConflict()
                    // Two round trips: how far it replayed, then the snapshot. (In one
                    // pipeline the check would open the transaction `BEGIN` must start, and
                    // checked inside it, the replay could pass the position after the
                    // snapshot was taken.)
                    let xmin: Int64
                    do {
                        guard let replayed = try connection.execute([PGStatement("SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint")]).int64(0, 0) else {
                            return .notReplica
                        }
                        guard replayed >= position else { return .behind }
                        guard let snapshot = try connection.execute([
                            PGStatement("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", prepare: false),
                            PGStatement("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")]).int64(0, 0) else {
                            throw SyncError(.storageFailure, "\(connection.endpoint): no snapshot horizon")
                        }
                        xmin = snapshot
                    } catch {
                        if connection.isAlive, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
                        return .failed
                    }
                    let transaction = PGTransaction(connection: connection, queueKey: worker.queueKey, schema: quoted, writable: false)
                    do {
                        let value = try body(transaction, xmin)
                        transaction.end()
                        try connection.execute("COMMIT")
                        return .served(value)
                    } catch {
                        transaction.end()
                        if connection.isAlive, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
                        // A read its recovery cancelled (40001), or a lost connection: the
                        // primary serves it instead.
                        if !connection.isAlive || connection.sawConflict { return .failed }
                        return .thrown(error)
                    }
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as SyncError where error.code == .storeClosed {
                throw error
            } catch {
                // It cannot be reached: left out for a while.
                member.skipUntil.store(DispatchTime.now().uptimeNanoseconds + Self.pause, ordering: .relaxed)
                leftToPrimary.add(1, ordering: .relaxed)
                return nil
            }
            switch outcome {
            case .served(let value):
                served.add(1, ordering: .relaxed)
                return value
            case .thrown(let error):
                throw error
            case .notReplica, .failed:
                member.skipUntil.store(DispatchTime.now().uptimeNanoseconds + Self.pause, ordering: .relaxed)
                leftToPrimary.add(1, ordering: .relaxed)
                return nil
            case .behind:
                if ContinuousClock.now >= deadline {
                    leftToPrimary.add(1, ordering: .relaxed)
                    return nil
                }
                try await Task.sleep(for: .milliseconds(2))
            }
        }
    }
}

/// How one try of a read on a replica ended.
private enum ReplicaRead<T: Sendable>: Sendable {
    case served(T)
    /// Not replayed that far yet.
    case behind
    /// Not in recovery: no longer a standby.
    case notReplica
    /// Its recovery cancelled the read, or the connection was lost.
    case failed
    /// The body threw on a healthy connection.
    case thrown(any Error)
}
