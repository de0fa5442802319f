import OfflineSync
import Synchronization

/// `__srv_console_revoked`: the console sessions signed out before they ended, keyed by the
/// session's id. A row outlives its session by nothing: once the session would have ended,
/// its cookie is refused anyway, and the next sign-out removes the row.
struct RevokedSessionRow: StoredRow {
    static let table = "__srv_console_revoked"
    enum CodingKeys: String, CodingKey { case id, expires }

    var id: String
    /// When the session would have ended.
    var expires: Timestamp

    static let schema = TableSchema(table, fields: [column(.expires, .date, indexed: true)], undeclaredFields: .reject)
}

/// The signed-out console sessions, kept in the service's store: they survive a restart, and
/// every instance over one store (one PostgreSQL database) refuses a cookie any of them
/// signed out. The table is defined on first use, so a server whose console is never used
/// never creates it.
final class ConsoleRevocations: Sendable {
    private let defined = Atomic<Bool>(false)

    /// Records `session` as signed out, and forgets a few sessions that have ended.
    func revoke(_ session: ConsoleSession, in store: any LocalStore, now: Timestamp = .now()) async throws {
        try await define(in: store)
        let row = RevokedSessionRow(id: session.id, expires: Timestamp(millisecondsSince1970: session.expiry * 1000))
        try await store.write { txn in
            try row.save(txn)
            let ended = Query(RevokedSessionRow.field(.expires) < .date(now), limit: 16)
            for old in try txn.records(in: RevokedSessionRow.table, matching: ended) {
                try RevokedSessionRow.delete(txn, id: old.id)
            }
        }
    }

    /// Whether `session` was signed out.
    func isRevoked(_ session: ConsoleSession, in store: any LocalStore) async throws -> Bool {
        try await define(in: store)
        let id = session.id
        return try await store.read { txn in try RevokedSessionRow.find(txn, id: id) != nil }
    }

    private func define(in store: any LocalStore) async throws {
        guard !defined.load(ordering: .acquiring) else { return }
        try await store.defineTable(RevokedSessionRow.schema)
        defined.store(true, ordering: .releasing)
    }
}
