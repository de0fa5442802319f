import Foundation
import OfflineSync
import OfflineSyncStoreKit
import Synchronization

/// Which cluster and which of its databases a connection reads: a replica must read the
/// primary's.
struct DatabaseIdentity: Sendable, Equatable {
    /// `pg_control_system()`'s `system_identifier`, the same on every standby of a cluster.
    var cluster: Int64
    /// The connected database's oid, the same on a physical standby.
    var database: Int64

    /// Reads `connection`'s; throws when it cannot be read.
    init(_ connection: PGConnection) throws {
        let row = try connection.execute("""
            SELECT (SELECT system_identifier FROM pg_control_system()), (SELECT oid FROM pg_database WHERE datname = current_database())::bigint
            """)
        guard let cluster = row.int64(0, 0), let database = row.int64(0, 1) else {
            throw SyncError(.storageFailure, "\(connection.endpoint) did not tell its cluster's identifier")
        }
        self.cluster = cluster
        self.database = database
    }
}

/// Where the primary's WAL stood when a read began: what a replica must have replayed.
struct WALPosition: Sendable {
    /// The flush position, in bytes.
    var bytes: Int64
    /// The primary's timeline.
    var timeline: Int64
}

/// Hot standbys that serve the store's reads (``PostgreSQLStore/Options/replicas``).
///
/// A read that may go to a replica first reads the primary's WAL flush position and timeline
/// (for an ordered read, in the same round trip as its horizon): every transaction visible by
/// then — every write a client was told is applied before it asked — lies below it, because
/// the store's sessions never commit with `synchronous_commit` off, so a commit is flushed
/// before it is visible. A replica serves the read only while it is in recovery, on the
/// primary's timeline (its last restartpoint's, so for a while after a failover even a
/// standby that followed it is passed over) and has replayed that far
/// (`pg_last_wal_replay_lsn()`, checked before its snapshot is taken, so the snapshot holds
/// every such commit). Connections are checked once to be standbys of the same cluster
/// (`system_identifier`). Otherwise the read goes to the next replica, and at last to the
/// primary: one not caught up within ``PostgreSQLStore/Options/replicaWait`` is passed over
/// for a second, one that failed for 5 s.
final class PGReplicas: Sendable {
    /// One standby: its connections, and until when it is passed over.
    final class Member: Sendable {
        let pool: CheckoutPool<PGWorker>
        /// Uptime nanoseconds before which reads pass it over (0: never).
        let skipUntil = Atomic<UInt64>(0)

        init(pool: CheckoutPool<PGWorker>) { self.pool = pool }

        var isSkipped: Bool { skipUntil.load(ordering: .relaxed) > DispatchTime.now().uptimeNanoseconds }

        /// Passes it over for `nanoseconds` from now, or longer if it already was.
        func skip(for nanoseconds: UInt64) {
            let until = DispatchTime.now().uptimeNanoseconds + nanoseconds
            var seen = skipUntil.load(ordering: .relaxed)
            while seen < until {
                let (exchanged, original) = skipUntil.compareExchange(expected: seen, desired: until, ordering: .relaxed)
                if exchanged { break }
                seen = original
            }
        }
    }

    let members: [Member]
    let wait: Duration
    private let next = Atomic<Int>(0)
    /// Reads served by a replica, and reads left to the primary (for any reason).
    let served = Atomic<Int>(0)
    let leftToPrimary = Atomic<Int>(0)

    /// How long a replica that failed is passed over.
    static let failedPause: UInt64 = 5_000_000_000
    /// How long one that did not catch up within the wait is passed over.
    static let behindPause: UInt64 = 1_000_000_000
    /// The longest a try after the first waits for one of a standby's connections.
    static let busyPatience: Duration = .milliseconds(5)

    /// Libpq settings a replica connection gets unless its string names them: a standby that
    /// vanished costs seconds, not the operating system's minutes.
    static let connectionDefaults = [("connect_timeout", "2"), ("keepalives", "1"), ("keepalives_idle", "5"),
                                     ("keepalives_interval", "2"), ("keepalives_count", "3"), ("tcp_user_timeout", "10000")]

    /// `strings` with ``connectionDefaults``; each connection is checked to be a standby of
    /// `primary`'s cluster, connected to its database.
    init(_ strings: [String], poolSize: Int, wait: Duration, setup: [String], primary: DatabaseIdentity) throws {
        self.wait = wait
        members = try strings.enumerated().map { index, given in
            let password = try PostgreSQLStore.password(in: given)
            let string = Self.withDefaults(given)
            let connect: @Sendable () throws -> PGConnection = {
                let connection = try PGConnection.connect(string, password: password)
                do {
                    try connection.execute("SET client_min_messages = warning")
                    for statement in setup { try connection.execute(statement) }
                    let identity = try DatabaseIdentity(connection)
                    guard identity.cluster == primary.cluster else {
                        throw SyncError(.unsupported, "\(connection.endpoint) is not a standby of the store's database (another cluster)")
                    }
                    guard identity.database == primary.database else {
                        throw SyncError(.unsupported, "\(connection.endpoint) is connected to another database of the store's cluster")
                    }
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

    /// `conninfo` (a URL or `key=value` pairs) with each of ``connectionDefaults`` it does not name.
    static func withDefaults(_ conninfo: String) -> String {
        let isURL = conninfo.hasPrefix("postgres://") || conninfo.hasPrefix("postgresql://")
        var result = conninfo
        for (key, value) in connectionDefaults where !names(key, in: conninfo, isURL: isURL) {
            if isURL {
                let separator = !result.contains("?") ? "?" : result.hasSuffix("?") || result.hasSuffix("&") ? "" : "&"
                result += separator + key + "=" + value
            } else {
                result += " " + key + "=" + value
            }
        }
        return result
    }

    private static func names(_ key: String, in conninfo: String, isURL: Bool) -> Bool {
        if isURL {
            guard let mark = conninfo.firstIndex(of: "?") else { return false }
            return conninfo[conninfo.index(after: mark)...].split(separator: "&").contains { $0.hasPrefix(key + "=") }
        }
        return conninfo.split(whereSeparator: \.isWhitespace).contains { $0.hasPrefix(key + "=") || $0 == Substring(key) }
    }

    /// The replicas not passed over now, starting with the next in turn.
    func candidates() -> [Member] {
        let start = Int(UInt(bitPattern: next.wrappingAdd(1, ordering: .relaxed).oldValue) % UInt(members.count))
        return (0..<members.count).map { members[(start + $0) % members.count] }.filter { !$0.isSkipped }
    }

    func shutDown() async {
        for member in members { await member.pool.shutDown() }
    }

    /// Counts a read the primary serves without asking a replica (none to ask, or the
    /// primary's position could not be read).
    func leftToPrimaryWithoutTrying() { leftToPrimary.add(1, ordering: .relaxed) }

    /// The statement that reads the primary's WAL flush position, in bytes, and its timeline.
    /// (The insert position would do too, but it runs ahead of what a standby can have by
    /// what the WAL writer has yet to flush: up to `wal_writer_delay`, 200 ms, for nothing a
    /// read needs.)
    static let positionStatement = PGStatement("""
        SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint,
               ('x' || substr(pg_walfile_name(pg_current_wal_flush_lsn()), 1, 8))::bit(32)::bigint
        """)

    /// Reads ``positionStatement``'s row.
    static func position(_ result: PGResult) -> WALPosition? {
        guard let bytes = result.int64(0, 0), let timeline = result.int64(0, 1) else { return nil }
        return WALPosition(bytes: bytes, timeline: timeline)
    }

    /// Runs `body` in a `REPEATABLE READ READ ONLY` snapshot of a replica that has replayed
    /// the primary's WAL to `position` on its timeline, giving it the snapshot's xmin; `nil`
    /// (counted) when none could. Every candidate is tried once without waiting (for its
    /// replay or for a free connection), then those behind or busy again, every 2 ms, until
    /// ``wait`` has passed, each try waiting at most ``busyPatience`` for a connection (so one
    /// standby whose connections are all held does not keep the read from the others); one
    /// still behind then is passed over for ``behindPause``, one passed over meanwhile is not
    /// tried again. Rethrows what `body` throws on a healthy connection, and cancellation.
    func read<T: Sendable>(reaching position: WALPosition, schema quoted: String,
                           _ body: @escaping @Sendable (PGTransaction, Int64) throws -> T) async throws -> T? {
        let deadline = ContinuousClock.now + wait
        // The members to try again, each with whether its last try found it behind (else busy).
        var again: [(member: Member, behind: Bool)] = []
        for member in candidates() {
            try Task.checkCancellation()
            switch try await attempt(member, position, quoted, body, patience: nil) {
            case .served(let value): return value
            case .behind: again.append((member, true))
            case .busy: again.append((member, false))
            case .next: break
            }
        }
        while !again.isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
            var still: [(member: Member, behind: Bool)] = []
            for (member, behind) in again where !member.isSkipped {
                try Task.checkCancellation()
                let patience = min(deadline - ContinuousClock.now, Self.busyPatience)
                guard patience > .zero else {
                    still.append((member, behind))
                    continue
                }
                switch try await attempt(member, position, quoted, body, patience: patience) {
                case .served(let value): return value
                case .behind: still.append((member, true))
                case .busy: still.append((member, behind))
                case .next: break
                }
            }
            again = still
        }
        try Task.checkCancellation()
        for (member, behind) in again where behind && !member.isSkipped { member.skip(for: Self.behindPause) }
        leftToPrimary.add(1, ordering: .relaxed)
        return nil
    }

    /// One try on `member`, with a connection idle now (`patience` nil) or free within
    /// `patience`: a replica whose connections are all held (by reads stuck on a host that
    /// stopped answering, say) is passed by, not waited for. Counts a read served; pauses a
    /// member that failed, is no longer a standby or is on another timeline.
    private func attempt<T: Sendable>(_ member: Member, _ position: WALPosition, _ quoted: String,
                                      _ body: @escaping @Sendable (PGTransaction, Int64) throws -> T,
                                      patience: Duration?) async throws -> Pass<T> {
        let outcome: ReplicaRead<T>
        do {
            let borrowed = if let patience { try await member.pool.acquire(within: patience) } else { member.pool.tryAcquire() }
            guard let worker = borrowed else { return .busy }
            defer { member.pool.release(worker) }
            outcome = try await worker.run { connection in
                // Passed over (by another read) while this one waited for a connection.
                if member.isSkipped { return .passedOver }
                return Self.attempt(on: connection, worker: worker, position, quoted, body)
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as SyncError where error.code == .storeClosed {
            throw error
        } catch {
            // It cannot be reached, or it is not a standby of this cluster's database.
            outcome = .failed
        }
        switch outcome {
        case .served(let value):
            served.add(1, ordering: .relaxed)
            return .served(value)
        case .thrown(let error):
            throw error
        case .behind:
            return .behind
        case .cancelled, .passedOver:
            // Its recovery cancelled the read (the replica is fine), or another read paused
            // it: the read goes on to the next.
            return .next
        case .notReplica, .otherTimeline, .failed:
            member.skip(for: Self.failedPause)
            return .next
        }
    }

    /// One try on a replica's `connection` (on its worker's queue).
    private static func attempt<T: Sendable>(on connection: PGConnection, worker: PGWorker, _ position: WALPosition, _ quoted: String,
                                             _ body: @escaping @Sendable (PGTransaction, Int64) throws -> T) -> ReplicaRead<T> {
        connection.clearConflict()
        func rollBack() {
            if connection.isAlive, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
        }
        // Two round trips: where it stands, then the snapshot. (In one pipeline the check
        // would open the transaction `BEGIN` must start, and checked inside it, the replay
        // could pass the position after the snapshot was taken.)
        let xmin: Int64
        do {
            // The timeline of its last restartpoint, and of the WAL it receives (while it
            // streams, and where the role may see it): a standby that already follows a
            // promoted primary while the store still writes to the old one has restartpoints
            // of the old timeline only.
            let state = try connection.execute([PGStatement("""
                SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint,
                       (SELECT timeline_id FROM pg_control_checkpoint())::bigint,
                       (SELECT received_tli FROM pg_stat_wal_receiver)::bigint
                """)])
            guard state.bool(0, 0) == true, let replayed = state.int64(0, 1), let timeline = state.int64(0, 2) else { return .notReplica }
            guard timeline == position.timeline, state.int64(0, 3).map({ $0 == position.timeline }) ?? true else { return .otherTimeline }
            guard replayed >= position.bytes else { return .behind }
            guard let snapshot = try connection.execute([
                PGStatement("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", prepare: false),
                PGStatement("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")]).int64(0, 0) else {
                throw SyncError(.storageFailure, "\(connection.endpoint): no snapshot horizon")
            }
            xmin = snapshot
        } catch {
            rollBack()
            return connection.sawConflict ? .cancelled : .failed
        }
        let transaction = PGTransaction(connection: connection, queueKey: worker.queueKey, schema: quoted, writable: false)
        let value: T
        do {
            value = try body(transaction, xmin)
            transaction.end()
        } catch {
            transaction.end()
            rollBack()
            // A read its recovery cancelled (`max_standby_streaming_delay`), even when that
            // ended the session too.
            if connection.sawConflict { return .cancelled }
            return connection.isAlive ? .thrown(error) : .failed
        }
        // A body that caught the cancellation itself read a transaction that had ended.
        if connection.sawConflict {
            rollBack()
            return .cancelled
        }
        do { try connection.execute("COMMIT") } catch { return connection.sawConflict || connection.isAlive ? .cancelled : .failed }
        return .served(value)
    }
}

/// What one try on a replica means for the read: served, or try the next (and this one
/// again later, if it is only behind).
private enum Pass<T: Sendable>: Sendable {
    case served(T)
    case behind
    /// Nothing to wait for on this one now: its recovery cancelled the read, it failed (and
    /// is paused), or another read paused it.
    case next
    /// Every connection was held.
    case busy
}

/// How one try of a read on a replica ended.
private enum ReplicaRead<T: Sendable>: Sendable {
    case served(T)
    /// Not replayed that far yet.
    case behind
    /// Not on the primary's timeline (a standby of the old timeline after a failover, or one
    /// whose last restartpoint is still on it).
    case otherTimeline
    /// Not in recovery: no longer a standby.
    case notReplica
    /// The connection was lost, or could not be opened.
    case failed
    /// Its recovery cancelled the read.
    case cancelled
    /// The body threw on a healthy connection.
    case thrown(any Error)
    /// Paused by another read while this one waited for the connection.
    case passedOver
}
