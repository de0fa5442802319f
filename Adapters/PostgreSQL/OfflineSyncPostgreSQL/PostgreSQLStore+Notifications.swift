import OfflineSync
import OfflineSyncStoreKit

/// PostgreSQL `LISTEN`/`NOTIFY` between processes sharing a database — how several sync
/// server instances on one PostgreSQL tell each other that data changed.
///
/// ```swift
/// // Instance A: wait for changes made anywhere.
/// let changes = try await store.notifications(channel: "osync_changes")
/// Task { for try await payload in changes { await fanOut(payload) } }
///
/// // Instance B, after a push committed:
/// try await store.notify(channel: "osync_changes", payload: #"{"table":"todo","identity":"u1"}"#)
/// ```
///
/// Channels are database-wide (not per store schema) and exact: `"Todo"` and `"todo"` are
/// two channels. ``schemaChannel(_:)`` names one that belongs to this store alone. Delivery is PostgreSQL's: at most once, to listeners connected when the
/// notifying transaction commits, in commit order per sender; a listener that reconnects
/// must not assume it saw what was sent while it was away.
extension PostgreSQLStore {
    /// The longest channel name PostgreSQL accepts, in UTF-8 bytes (`NAMEDATALEN - 1`).
    public static let maxChannelBytes = 63
    /// The longest payload PostgreSQL accepts, in UTF-8 bytes (its limit is "less than 8000").
    public static let maxNotificationPayloadBytes = 7999

    /// Sends `payload` to every connection listening on `channel`, in this database, from any
    /// process. Runs `SELECT pg_notify($1, $2)` on a pooled connection with both values as
    /// bound parameters, in its own transaction: listeners receive it as soon as it returns.
    ///
    /// Throws ``SyncError/Code/invalidName`` for a channel that is empty, longer than
    /// ``maxChannelBytes`` bytes or contains NUL, ``SyncError/Code/limitExceeded`` for a payload
    /// longer than ``maxNotificationPayloadBytes`` bytes, ``SyncError/Code/invalidValue`` for a
    /// payload containing NUL, ``SyncError/Code/storeClosed`` after ``close()`` and
    /// ``SyncError/Code/transient`` when the server cannot be reached.
    public func notify(channel: String, payload: String) async throws {
        try Self.validateNotification(channel: channel, payload: payload)
        try await notificationHub.pool.run { connection, _ in
            _ = try connection.execute(Self.notifyStatement, [.bytes(Array(channel.utf8)), .bytes(Array(payload.utf8))])
        }
    }

    /// Sends `payload` on `channel` as part of a write transaction of this store: listeners
    /// receive it only if and when the transaction commits, and never if it rolls back. Call it
    /// inside ``write(_:)``'s body with the transaction it was given:
    ///
    /// ```swift
    /// try await store.write { transaction in
    ///     try transaction.upsert(record, in: "todo")
    ///     try store.notify(channel: "osync_changes", payload: "todo", in: transaction)
    /// }
    /// ```
    ///
    /// A body that runs again after a lost connection sends again; only the committed run's
    /// notification is delivered. Throws what ``notify(channel:payload:)`` throws for the
    /// channel and payload, ``SyncError/Code/unsupported`` for a transaction of another store
    /// type and ``SyncError/Code/storeClosed`` when the transaction has ended.
    public func notify(channel: String, payload: String, in transaction: any LocalWriteTransaction) throws {
        try Self.validateNotification(channel: channel, payload: payload)
        guard let transaction = transaction as? PGTransaction else {
            throw SyncError(.unsupported, "a PostgreSQL notification needs a PostgreSQLStore write transaction")
        }
        try transaction.live().execute(Self.notifyStatement, [.bytes(Array(channel.utf8)), .bytes(Array(payload.utf8))])
    }

    /// Starts listening on `channel` on a dedicated connection (not one of the pool's) and
    /// returns the notifications' payloads as they arrive. `LISTEN` is in effect when this
    /// returns, so a notification sent afterwards is delivered.
    ///
    /// The connection is watched by a thread of its own, never Swift's cooperative pool. It is
    /// closed, and the sequence ends, when the consuming task is cancelled, when
    /// ``PostgreSQLNotifications/close()`` is called, when the sequence is dropped, or when the
    /// store is closed. When the connection is lost the sequence throws
    /// ``SyncError/Code/transient`` naming the server's host and port (never the password);
    /// listen again to resume.
    ///
    /// Throws ``SyncError/Code/invalidName`` for a channel that is empty, longer than
    /// ``maxChannelBytes`` bytes or contains NUL, ``SyncError/Code/storeClosed`` after
    /// ``close()``, ``SyncError/Code/transient`` when the server cannot be reached and
    /// ``SyncError/Code/authenticationFailed`` when it refuses the credentials.
    public func notifications(channel: String) async throws -> PostgreSQLNotifications {
        try Self.validateChannel(channel)
        return PostgreSQLNotifications(listener: try await notificationHub.listen(channel: channel))
    }

    /// `base`, `_` and 16 hex digits of an FNV-1a hash of this store's schema: a channel
    /// of its own for each store in a database. Channels are database-wide, so processes
    /// serving stores on other schemas of the same database do not hear what is sent on it.
    /// Throws ``SyncError/Code/invalidName`` when the result is not a valid channel (`base`
    /// longer than 46 bytes, or containing NUL).
    public func schemaChannel(_ base: String) throws -> String {
        let channel = base + "_" + FNV1a.hex64(options.schema.utf8)
        try Self.validateChannel(channel)
        return channel
    }

    /// Checks that a `LISTEN` session hears a `NOTIFY` sent through the pool, within
    /// `timeout`: what a connection pooler in transaction or statement mode in front of
    /// PostgreSQL (PgBouncer's `pool_mode = transaction`) breaks, along with the other session
    /// state the store relies on (`SET statement_timeout`, prepared statements). A sync server
    /// calls it before it serves. Throws ``SyncError/Code/unsupported`` with a message naming
    /// the likely cause when the notification does not arrive, and what listening and sending
    /// throw.
    public func checkSessionState(timeout: Duration = .seconds(5)) async throws {
        var random = SystemRandomNumberGenerator()
        let channel = "offline_sync_probe_" + String(random.next(), radix: 16)
        let token = String(random.next(), radix: 16)
        let listener = try await notifications(channel: channel)
        let heard: Bool
        do {
            heard = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    for try await payload in listener where payload == token { return true }
                    return false
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return false
                }
                defer { group.cancelAll() }
                try await notify(channel: channel, payload: token)
                return try await group.next() ?? false
            }
        } catch {
            await listener.close()
            throw error
        }
        await listener.close()
        guard heard else {
            throw SyncError(.unsupported, "\(endpoint): a LISTEN session did not hear a NOTIFY within \(timeout): a connection pooler in transaction or statement mode (PgBouncer's pool_mode = transaction or statement) is likely in front of PostgreSQL. The store needs one server session per connection (LISTEN, SET, prepared statements): connect to PostgreSQL directly or through a pooler in session mode")
        }
    }

    static let notifyStatement = "SELECT pg_notify(convert_from($1, 'UTF8'), convert_from($2, 'UTF8'))"

    static func validateChannel(_ channel: String) throws {
        let bytes = channel.utf8.count
        guard bytes >= 1, bytes <= maxChannelBytes, !channel.utf8.contains(0) else {
            throw SyncError(.invalidName, "a PostgreSQL notification channel has 1 to \(maxChannelBytes) bytes and no NUL (got \(bytes) bytes)")
        }
    }

    static func validateNotification(channel: String, payload: String) throws {
        try validateChannel(channel)
        let bytes = payload.utf8.count
        guard bytes <= maxNotificationPayloadBytes else {
            throw SyncError(.limitExceeded, "a PostgreSQL notification payload has at most \(maxNotificationPayloadBytes) bytes (got \(bytes))")
        }
        guard !payload.utf8.contains(0) else {
            throw SyncError(.invalidValue, "a PostgreSQL notification payload cannot contain NUL")
        }
    }
}

/// The payloads sent to one PostgreSQL channel, as an `AsyncSequence`, from
/// ``PostgreSQLStore/notifications(channel:)``.
///
/// It owns a dedicated connection. Iterate it from one task: the sequence ends (`nil`) after
/// ``close()``, when the store is closed, or when the iterating task is cancelled — each of
/// which closes the connection — and throws ``SyncError/Code/transient`` when the connection
/// is lost. Payloads are buffered without bound until consumed. Dropping the sequence and
/// every iterator also closes the connection.
public final class PostgreSQLNotifications: AsyncSequence, Sendable {
    /// A notification's payload.
    public typealias Element = String

    /// The channel listened to.
    public var channel: String { listener.channel }

    let listener: PGListener

    init(listener: PGListener) {
        self.listener = listener
    }

    deinit { listener.cancel() }

    /// Stops listening: closes the connection and ends the sequence; returns once the
    /// connection is closed. Closing twice is harmless.
    public func close() async {
        listener.cancel()
        await listener.waitUntilEnded()
    }

    /// Returns the iterator (one per sequence: iterate from a single task).
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(owner: self, base: listener.stream.makeAsyncIterator())
    }

    /// Iterates the payloads; keeps the listener open while in use.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let owner: PostgreSQLNotifications
        var base: AsyncThrowingStream<String, any Error>.Iterator

        /// The next payload, `nil` once closed or cancelled. Throws
        /// ``SyncError/Code/transient`` when the connection was lost.
        public mutating func next() async throws -> String? {
            try await base.next()
        }
    }
}
