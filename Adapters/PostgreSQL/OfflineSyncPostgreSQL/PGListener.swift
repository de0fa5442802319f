import COfflineSyncPostgreSQL
import Foundation
import Synchronization
import OfflineSync
import OfflineSyncStoreKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One `LISTEN` connection, owned by a thread of its own: the thread opens the connection,
/// runs `LISTEN`, then blocks in `poll()` on the connection's socket and on a self-pipe, and
/// yields every notification's payload to ``stream``. Nothing here runs on Swift's cooperative
/// pool.
///
/// ``cancel()`` writes a byte to the self-pipe, so the thread wakes at once, closes the
/// connection and finishes the stream without an error. A lost connection finishes the stream
/// with ``SyncError/Code/transient``.
final class PGListener: Sendable {
    // The PGConnection never leaves the listener's thread. The wake-up pipe is written only
    // while holding `state` and closed (holding `state`) by the thread once it no longer polls
    // it, so a cancel never writes to a closed (or reused) descriptor.
    /// The channel, exactly as given (case-sensitive).
    let channel: String
    /// The payloads, in the order the server delivered them.
    let stream: AsyncThrowingStream<String, any Error>
    private let continuation: AsyncThrowingStream<String, any Error>.Continuation
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private struct State {
        var cancelled = false
        var finished = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    private let ended: @Sendable (PGListener) -> Void

    /// Creates a listener (not started). `ended` runs on the listener's thread once it has
    /// closed its connection. Throws ``SyncError/Code/storageFailure`` when no pipe can be made.
    init(channel: String, ended: @escaping @Sendable (PGListener) -> Void) throws {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw SyncError(.storageFailure, "cannot create the wake-up pipe of a PostgreSQL listener (errno \(errno))")
        }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        // A full pipe already holds a wake-up: the write end never needs to block.
        _ = fcntl(descriptors[1], F_SETFL, fcntl(descriptors[1], F_GETFL) | O_NONBLOCK)
        wakeRead = descriptors[0]
        wakeWrite = descriptors[1]
        self.channel = channel
        self.ended = ended
        (stream, continuation) = AsyncThrowingStream.makeStream(of: String.self, throwing: (any Error).self,
                                                                bufferingPolicy: .unbounded)
        continuation.onTermination = { [weak self] _ in self?.cancel() }
    }

    /// Starts the thread and returns once `LISTEN` is in effect, so a notification sent after
    /// this returns is delivered. Throws what connecting or `LISTEN` threw (the thread has then
    /// ended), or ``SyncError/Code/storeClosed`` when cancelled meanwhile.
    func start(connect: @escaping @Sendable () throws -> PGConnection, password: String?) async throws {
        try await withCheckedThrowingContinuation { (ready: CheckedContinuation<Void, any Error>) in
            let thread = Thread { self.run(connect: connect, password: password, ready: ready) }
            thread.name = "OfflineSyncPostgreSQL.listen"
            thread.start()
        }
    }

    /// Wakes the thread, which closes the connection and finishes the stream. Harmless when
    /// already cancelled or ended; never blocks.
    func cancel() {
        state.withLock { state in
            guard !state.cancelled, !state.finished else { return }
            state.cancelled = true
            var byte: UInt8 = 1
            _ = withUnsafePointer(to: &byte) { write(wakeWrite, $0, 1) }
        }
    }

    /// Returns once the thread has closed its connection and ended.
    func waitUntilEnded() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state in
                if state.finished { return true }
                state.waiters.append(waiter)
                return false
            }
            if done { waiter.resume() }
        }
    }

    private var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// The thread's body.
    private func run(connect: @Sendable () throws -> PGConnection, password: String?,
                     ready: CheckedContinuation<Void, any Error>) {
        var connection: PGConnection?
        do {
            let opened = try connect()
            connection = opened
            // Payloads are handed out as UTF-8 whatever the database's default client encoding.
            try opened.execute("SET client_encoding = 'UTF8'")
            try opened.execute("LISTEN " + PostgreSQLStore.quote(channel))
            if isCancelled { throw SyncError(.storeClosed, "the PostgreSQL listener was closed while it started") }
        } catch {
            connection?.close()
            continuation.finish()
            end()
            ready.resume(throwing: error)
            return
        }
        ready.resume()
        let error = deliver(from: connection!, password: password)
        connection!.close()
        continuation.finish(throwing: error)
        end()
    }

    /// Polls until cancelled (returns `nil`) or the connection fails (returns the error).
    private func deliver(from connection: PGConnection, password: String?) -> (any Error)? {
        guard let handle = connection.handle else { return SyncError(.storeClosed, "the PostgreSQL connection is closed") }
        let socket = PQsocket(handle)
        // The server's goodbye (`FATAL: terminating connection due to administrator command`)
        // arrives outside a query, as a notice: keep it for the error instead of libpq's
        // default of printing it to stderr. Only this thread runs libpq on this connection.
        let notices = NoticeLog()
        PQsetNoticeProcessor(handle, { context, message in
            guard let context, let message else { return }
            Unmanaged<NoticeLog>.fromOpaque(context).takeUnretainedValue().last = String(cString: message)
        }, Unmanaged.passUnretained(notices).toOpaque())
        defer { PQsetNoticeProcessor(handle, { _, _ in }, nil) }
        func lost() -> SyncError {
            let detail = [notices.last, PQerrorMessage(handle).map { String(cString: $0) }]
                .compactMap { $0?.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
                .joined(separator: "; ")
            let message = PGConnection.redact(detail, password: password)
            return SyncError(.transient, "\(connection.endpoint): the connection listening on channel '\(channel)' was lost: \(message)")
        }
        guard socket >= 0 else { return lost() }
        while true {
            // Hand out what libpq already holds (a command's reply can carry notifications).
            while let notification = PQnotifies(handle) {
                let payload = String(cString: notification.pointee.extra)
                PQfreemem(notification)
                continuation.yield(payload)
            }
            var descriptors = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
                               pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if poll(&descriptors, 2, -1) < 0 {
                if errno == EINTR { continue }
                return SyncError(.storageFailure, "\(connection.endpoint): poll() failed on a listening connection (errno \(errno))")
            }
            if descriptors[1].revents != 0 { return nil }
            if descriptors[0].revents != 0 {
                // Reads what arrived without blocking; 0 (or a bad status) means the server is gone.
                if PQconsumeInput(handle) == 0 || PQstatus(handle) != CONNECTION_OK { return lost() }
            }
        }
    }

    /// Marks the thread ended, closes the pipe and wakes whoever waits for it.
    private func end() {
        let pending: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.finished = true
            Self.closeDescriptor(wakeRead)
            Self.closeDescriptor(wakeWrite)
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in pending { waiter.resume() }
        ended(self)
    }

    private static func closeDescriptor(_ descriptor: Int32) { _ = close(descriptor) }
}

/// The last notice the server sent a listening connection. Only touched on the listener's
/// thread (libpq calls the notice processor from inside `PQconsumeInput`).
private final class NoticeLog {
    var last: String?
}

/// The store's notification side: the pool `notify` runs on, the way to open a dedicated
/// connection, and every open listener, so closing the store ends them.
final class PGNotificationHub: Sendable {
    /// The store's pool (`notify` borrows a connection from it).
    let pool: CheckoutPool<PGWorker>
    private let connect: @Sendable () throws -> PGConnection
    private let password: String?
    /// The open listeners, and whether the hub refuses new ones.
    private let state = Mutex<(listeners: [ObjectIdentifier: PGListener], closed: Bool)>(([:], false))

    /// Creates the hub of a store: `connect` opens a connection configured as the pool's are.
    init(pool: CheckoutPool<PGWorker>, connect: @escaping @Sendable () throws -> PGConnection, password: String?) {
        self.pool = pool
        self.connect = connect
        self.password = password
    }

    /// How many listeners are open.
    var openListeners: Int { state.withLock { $0.listeners.count } }

    /// Opens a dedicated connection listening on `channel`; returns once `LISTEN` is in effect.
    /// Throws ``SyncError/Code/storeClosed`` after ``close()`` and what connecting threw.
    func listen(channel: String) async throws -> PGListener {
        let listener = try PGListener(channel: channel) { [weak self] ended in
            guard let self else { return }
            _ = self.state.withLock { $0.listeners.removeValue(forKey: ObjectIdentifier(ended)) }
        }
        let accepted = state.withLock { state in
            if state.closed { return false }
            state.listeners[ObjectIdentifier(listener)] = listener
            return true
        }
        guard accepted else { throw SyncError(.storeClosed, "the PostgreSQL store is closed") }
        try await listener.start(connect: connect, password: password)
        return listener
    }

    /// Refuses new listeners, ends every open one and waits until their connections are closed.
    func close() async {
        let open: [PGListener] = state.withLock { state in
            state.closed = true
            return Array(state.listeners.values)
        }
        for listener in open { listener.cancel() }
        for listener in open { await listener.waitUntilEnded() }
    }
}
