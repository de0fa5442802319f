import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OfflineSyncTransport
import Synchronization

/// The response's head did not come within the request's deadline.
struct HeadTimedOut: Error {}

/// One data task's exchange: hands the response's head to the waiting request and its body
/// to the body's reader.
///
/// URLSession pushes a body as it arrives, and a data task's delegate has no back-pressure it
/// can use, so the bytes not yet read wait here, counted in the transport's ``BufferGauge``.
/// What asks for a response bounds it: the page stream asks the server to end a response
/// after ``URLSessionTransport/streamedResponseLimit`` bytes, and an attachment download asks
/// for ranges of that size, one at a time. The exchange does not rely on the server for it:
/// a chunk that would take what waits unread past ``limit`` (a server or proxy that ignores
/// the bound, faster than the reader) ends the exchange instead: the bytes waiting are let go,
/// the task is cancelled, and the reader's next read throws
/// ``OfflineSyncTransport/ResponseOverflow``. A reader that gives up (cancelled, or dropping
/// the body) gets `CancellationError` at once, the bytes waiting are let go and the task is
/// cancelled.
final class TaskExchange: Sendable {
    private struct State {
        var head: Result<HTTPURLResponse, any Error>?
        var headWaiter: CheckedContinuation<HTTPURLResponse, any Error>?
        /// Bytes that arrived and wait for the reader, oldest first.
        var chunks: [[UInt8]] = []
        /// How many bytes `chunks` holds.
        var buffered = 0
        /// Set when the task completed (`.success` is a clean end) or the reader gave up
        /// (`CancellationError`).
        var end: Result<Void, any Error>?
        var bodyWaiter: CheckedContinuation<[UInt8]?, any Error>?

        /// The chunks at the front, joined, up to `limit` bytes (at least one chunk); `nil`
        /// when none waits.
        mutating func take(upTo limit: Int) -> [UInt8]? {
            guard !chunks.isEmpty else { return nil }
            var taken = 1, count = chunks[0].count
            while taken < chunks.count, count + chunks[taken].count <= limit {
                count += chunks[taken].count
                taken += 1
            }
            let piece = taken == 1 ? chunks[0] : Array(chunks[..<taken].joined())
            chunks.removeFirst(taken)
            buffered -= count
            return piece
        }
    }

    /// The most bytes one read hands over: waiting chunks are joined (fewer hand-offs), but
    /// never into a copy of a whole range; the reader's own pieces stay about a MiB.
    static let handOff = 256 << 10

    /// What became of a chunk that arrived.
    private enum Arrival: Sendable {
        /// Handed to the reader waiting.
        case handed(CheckedContinuation<[UInt8]?, any Error>)
        /// Kept for the reader, or dropped (nobody will read it).
        case kept
        /// It would have taken what waits past the limit: the exchange ended.
        case overflowed
    }

    private let state = Mutex(State())
    private let gauge: BufferGauge
    /// The most bytes that may wait unread.
    let limit: Int

    init(gauge: BufferGauge, limit: Int) {
        self.gauge = gauge
        self.limit = max(1, limit)
    }

    deinit {
        let left = state.withLock { $0.buffered }
        gauge.remove(left)
    }

    /// Starts `task` and waits for its response's head, at most `timeout` (then the task is
    /// cancelled and ``HeadTimedOut`` thrown).
    func head(of task: URLSessionDataTask, timeout: Duration) async throws -> HTTPURLResponse {
        let timer = Task { [weak self] in
            try await Task.sleep(for: timeout)
            self?.finishHead(.failure(HeadTimedOut()))
            task.cancel()
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let early = state.withLock { state -> Result<HTTPURLResponse, any Error>? in
                    if let head = state.head { return head }
                    state.headWaiter = continuation
                    return nil
                }
                if let early { continuation.resume(with: early) }
                task.resume()
            }
        } onCancel: {
            task.cancel()
            finishHead(.failure(CancellationError()))
        }
    }

    private func finishHead(_ result: Result<HTTPURLResponse, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<HTTPURLResponse, any Error>? in
            guard state.head == nil else { return nil }
            state.head = result
            defer { state.headWaiter = nil }
            return state.headWaiter
        }
        waiter?.resume(with: result)
    }

    /// The next chunk of the body (see ``OfflineSyncTransport/TransportBody/next()``). A
    /// cancelled reader gets `CancellationError` at once, and the task is cancelled.
    func next(of task: URLSessionDataTask) async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let answer = state.withLock { state -> Result<[UInt8]?, any Error>? in
                    if let piece = state.take(upTo: Self.handOff) {
                        gauge.remove(piece.count)
                        return .success(piece)
                    }
                    switch state.end {
                    case .success?: return .success(nil)
                    case .failure(let error)?: return .failure(error)
                    case nil:
                        state.bodyWaiter = continuation
                        return nil
                    }
                }
                if let answer { continuation.resume(with: answer) }
            }
        } onCancel: {
            abandon(task)
        }
    }

    /// The reader gave up: the bytes waiting are let go, a read waiting throws
    /// `CancellationError` (as every later one does), and the task is cancelled.
    func abandon(_ task: URLSessionTask) {
        let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
            gauge.remove(state.buffered)
            state.chunks = []
            state.buffered = 0
            state.end = .failure(CancellationError())
            defer { state.bodyWaiter = nil }
            return state.bodyWaiter
        }
        waiter?.resume(throwing: CancellationError())
        task.cancel()
    }

    func received(_ response: URLResponse, completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        if let response = response as? HTTPURLResponse {
            finishHead(.success(response))
            completionHandler(.allow)
        } else {
            finishHead(.failure(URLError(.badServerResponse)))
            completionHandler(.cancel)
        }
    }

    /// Takes a chunk of `task`'s body: to the reader waiting, or kept for it while what waits
    /// stays within ``limit``; past it the exchange ends
    /// (``OfflineSyncTransport/ResponseOverflow``) and `task` is cancelled.
    func received(_ data: Data, of task: URLSessionTask) {
        let chunk = [UInt8](data)
        let arrival = state.withLock { state -> Arrival in
            // A reader that gave up, or an exchange that ended, wants nothing more.
            guard state.end == nil else { return .kept }
            if let waiter = state.bodyWaiter {
                state.bodyWaiter = nil
                return .handed(waiter)
            }
            guard state.buffered + chunk.count <= limit else {
                gauge.remove(state.buffered)
                state.chunks = []
                state.buffered = 0
                state.end = .failure(ResponseOverflow(limit: limit))
                return .overflowed
            }
            state.chunks.append(chunk)
            state.buffered += chunk.count
            gauge.add(chunk.count)
            return .kept
        }
        switch arrival {
        case .handed(let waiter): waiter.resume(returning: chunk)
        case .overflowed: task.cancel()
        case .kept: break
        }
    }

    func completed(_ error: (any Error)?) {
        finishHead(.failure(error ?? URLError(.badServerResponse)))
        let end: Result<Void, any Error> = error.map { .failure($0) } ?? .success(())
        let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
            // A reader that gave up was answered already.
            guard state.end == nil else { return nil }
            state.end = end
            defer { state.bodyWaiter = nil }
            return state.bodyWaiter
        }
        switch end {
        case .success: waiter?.resume(returning: nil)
        case .failure(let error): waiter?.resume(throwing: error)
        }
    }
}

/// What the exchanges of one transport hold for their readers: the bytes waiting now, and the
/// most that ever waited at once (a bound a test can check without timing anything).
final class BufferGauge: Sendable {
    private let state = Mutex<(current: Int, peak: Int)>((0, 0))

    func add(_ count: Int) {
        state.withLock { state in
            state.current += count
            state.peak = max(state.peak, state.current)
        }
    }

    func remove(_ count: Int) {
        guard count != 0 else { return }
        state.withLock { $0.current -= count }
    }

    var current: Int { state.withLock { $0.current } }
    var peak: Int { state.withLock { $0.peak } }
}

/// A data task's body as the remote reads it. Dropping it cancels the task and lets go of
/// what waits unread, so a response the remote gave up on (a pull stream left silent, a body
/// not read) holds neither its connection nor its bytes.
final class URLSessionBody: TransportBody {
    private let task: URLSessionDataTask
    private let exchange: TaskExchange

    init(task: URLSessionDataTask, exchange: TaskExchange) {
        self.task = task
        self.exchange = exchange
    }

    deinit { exchange.abandon(task) }

    func next() async throws -> [UInt8]? { try await exchange.next(of: task) }
}
