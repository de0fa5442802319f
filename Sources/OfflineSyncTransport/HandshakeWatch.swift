import OfflineSync
import Synchronization

/// Gives each connection of a change channel a deadline for its handshake (the WebSocket
/// upgrade and the server's `subscribed`).
///
/// WSClient's upgrade does not answer task cancellation: against a server that accepts and
/// never answers, an awaited connect would hold its caller until the socket closes, which may
/// be never. So a connection runs in a task of its own, and one that misses its deadline is
/// cancelled and *left behind* — its socket stays open until the server closes it. At most
/// ``maximumAbandoned`` are left at once; past that an attempt fails at once without opening
/// another socket (a started ``SyncContext`` keeps syncing by polling meanwhile).
final class HandshakeWatch: Sendable {
    /// The most handshakes left unanswered at once.
    static let maximumAbandoned = 3

    private let timeout: Duration
    /// The flags of the connections left behind, set when each ends.
    private let abandoned = Mutex<[ConnectionFlag]>([])

    init(timeout: Duration) {
        self.timeout = timeout
    }

    /// Runs `connect` until the connection ends. Throws ``SyncError/Code/transient`` when
    /// `subscribed` is not set within the deadline, or at once while ``maximumAbandoned``
    /// handshakes are still unanswered; `CancellationError` when the caller is cancelled (the
    /// connection is cancelled with it).
    func run(until subscribed: ConnectionFlag, _ connect: @escaping @Sendable () async throws -> Void) async throws {
        let waiting = abandoned.withLock { list -> Int in
            list.removeAll { $0.isSet }
            return list.count
        }
        guard waiting < Self.maximumAbandoned else {
            throw SyncError(.transient, "the change channel's last \(waiting) handshakes are still unanswered")
        }
        let ended = ConnectionFlag()
        let connection = Task {
            defer { ended.set() }
            try await connect()
        }
        let answer = Answer<Bool>()
        let timeout = timeout
        let inTime = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                answer.wait(continuation)
                Task { answer.finish(await connection.result.map { true }) }
                Task {
                    try? await Task.sleep(for: timeout)
                    if !subscribed.isSet { answer.finish(.success(false)) }
                }
            }
        } onCancel: {
            connection.cancel()
            answer.finish(.failure(CancellationError()))
        }
        guard inTime else {
            connection.cancel()
            abandoned.withLock { $0.append(ended) }
            throw SyncError(.transient, "the change channel did not open within \(timeout)")
        }
    }
}
