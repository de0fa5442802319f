import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OfflineSync
import OfflineSyncTransport
import Synchronization

/// ``OfflineSyncTransport/HTTPTransport`` on Foundation's `URLSession`: the platform's
/// proxy, cellular and Low Data Mode settings, its TLS trust (and the session delegate's
/// certificate pinning), and no SwiftNIO in the binary.
///
/// Each request gets a task delegate of its own (`URLSessionTask.delegate`), so the session
/// can be the app's, with its own delegate and configuration: the transport handles only
/// the response's head and data, and leaves authentication challenges to the session.
///
/// A response body is handed over as it arrives and is held in memory only up to
/// ``bufferLimit``: past that the task is suspended until the reader catches up, so a long
/// page stream costs a bounded buffer, not its size.
///
/// WebSockets use `URLSessionWebSocketTask`. Foundation on Linux has the type but its libcurl
/// is built without WebSockets; there the change channel reads the server's event stream
/// instead (``OfflineSyncTransport/WebSocketUnavailable``).
public struct URLSessionTransport: HTTPTransport {
    /// The session requests go through.
    public let session: URLSession
    /// The most body bytes held for a reader that has not asked for them yet.
    public static let bufferLimit = 4 << 20

    /// Creates the transport over `session` (by default ``defaultSession``).
    public init(session: URLSession = URLSessionTransport.defaultSession) {
        self.session = session
    }

    /// The session a transport uses unless given another: an ephemeral configuration (no
    /// cookies, no cache: every answer of a sync server is fresh) that fails a request at
    /// once when the device is offline instead of waiting for connectivity, so the remote's
    /// own backoff decides when to try again.
    public static let defaultSession: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        #if !canImport(FoundationNetworking)
        configuration.waitsForConnectivity = false
        #endif
        return URLSession(configuration: configuration)
    }()

    /// See ``OfflineSyncTransport/HTTPTransport/execute(_:timeout:)``.
    public func execute(_ request: TransportRequest, timeout: Duration) async throws -> TransportResponse {
        guard let url = URL(string: request.url) else {
            throw SyncError(.invalidConfiguration, "'\(request.url)' is not a URL")
        }
        var outgoing = URLRequest(url: url)
        outgoing.httpMethod = request.method.rawValue
        // URLSession's own timeout is the longest silence of the connection, head or body.
        outgoing.timeoutInterval = max(1, Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        for (name, value) in request.headers { outgoing.addValue(value, forHTTPHeaderField: name) }
        outgoing.httpBody = request.body.map { Data($0) }
        let task = session.dataTask(with: outgoing)
        let exchange = TaskExchange()
        task.delegate = exchange
        let body = URLSessionBody(task: task, exchange: exchange)
        let response = try await exchange.head(of: task, timeout: timeout)
        var headers: [(name: String, value: String)] = []
        for (name, value) in response.allHeaderFields {
            guard let name = name as? String, let value = value as? String else { continue }
            headers.append((name, value))
        }
        return TransportResponse(status: response.statusCode, headers: headers, body: body)
    }

    /// See ``OfflineSyncTransport/HTTPTransport/webSocket(url:headers:maxMessageBytes:receive:)``.
    public func webSocket(url: String, headers: [(name: String, value: String)], maxMessageBytes: Int,
                          receive: @escaping @Sendable (String) -> Void) async throws {
        guard let address = URL(string: url) else { throw SyncError(.invalidConfiguration, "'\(url)' is not a URL") }
        var request = URLRequest(url: address)
        for (name, value) in headers { request.addValue(value, forHTTPHeaderField: name) }
        let task = session.webSocketTask(with: request)
        task.maximumMessageSize = maxMessageBytes
        task.resume()
        try await withTaskCancellationHandler {
            do {
                while true {
                    if case .string(let text) = try await task.receive() { receive(text) }
                }
            } catch {
                if Task.isCancelled { throw CancellationError() }
                if let failure = error as? URLError, failure.code == .unsupportedURL {
                    // `ws://` is a URL every WebSocket-capable Foundation takes: refused here,
                    // it is the platform that cannot.
                    throw WebSocketUnavailable(reason: "this platform's URLSession cannot open WebSockets (\(failure.localizedDescription))")
                }
                if let response = task.response as? HTTPURLResponse, response.statusCode != 101 {
                    throw WebSocketUpgradeRefused()
                }
                if task.closeCode != .invalid { return }
                throw error
            }
        } onCancel: {
            task.cancel(with: .goingAway, reason: nil)
        }
    }

    /// See ``OfflineSyncTransport/HTTPTransport/describe(_:)``.
    public func describe(_ error: any Error) -> String? {
        if error is HeadTimedOut { return "no answer in time" }
        guard let error = error as? URLError else { return nil }
        switch error.code {
        case .cannotConnectToHost: return "the connection was refused (is the server running on that port?)"
        case .timedOut: return "no answer in time"
        case .networkConnectionLost: return "the connection was lost"
        case .notConnectedToInternet: return "the device is offline"
        case .cannotFindHost, .dnsLookupFailed: return "the host cannot be found"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot:
            return "the TLS connection failed (the server's certificate was not trusted)"
        case .badServerResponse: return "the server's answer was not HTTP"
        default: return "URL error \(error.code.rawValue)"
        }
    }
}

/// The response's head did not come within the request's deadline.
struct HeadTimedOut: Error {}

/// One data task's delegate: hands the response's head to the waiting request and its data
/// to the body's reader, suspending the task while ``URLSessionTransport/bufferLimit`` bytes
/// wait unread.
///
/// `@unchecked Sendable` (it is an `NSObject` subclass, which cannot be checked): every
/// stored property is the `Mutex`.
final class TaskExchange: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private struct State {
        var head: Result<HTTPURLResponse, any Error>?
        var headWaiter: CheckedContinuation<HTTPURLResponse, any Error>?
        var chunks: [[UInt8]] = []
        var buffered = 0
        /// Set when the task completed: `nil` inside is a clean end.
        var end: Result<Void, any Error>?
        var bodyWaiter: CheckedContinuation<[UInt8]?, any Error>?
        var suspended = false
    }

    private let state = Mutex(State())

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

    /// The next chunk of the body (see ``OfflineSyncTransport/TransportBody/next()``).
    func next(of task: URLSessionDataTask) async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let (answer, resume) = state.withLock { state -> (Result<[UInt8]?, any Error>?, Bool) in
                    if !state.chunks.isEmpty {
                        let chunk = state.chunks.removeFirst()
                        state.buffered -= chunk.count
                        let resume = state.suspended && state.buffered <= URLSessionTransport.bufferLimit / 4
                        if resume { state.suspended = false }
                        return (.success(chunk), resume)
                    }
                    switch state.end {
                    case .success?: return (.success(nil), false)
                    case .failure(let error)?: return (.failure(error), false)
                    case nil:
                        state.bodyWaiter = continuation
                        let resume = state.suspended
                        state.suspended = false
                        return (nil, resume)
                    }
                }
                if resume { task.resume() }
                if let answer { continuation.resume(with: answer) }
            }
        } onCancel: {
            task.cancel()
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        if let response = response as? HTTPURLResponse {
            finishHead(.success(response))
            completionHandler(.allow)
        } else {
            finishHead(.failure(URLError(.badServerResponse)))
            completionHandler(.cancel)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let chunk = [UInt8](data)
        let (waiter, suspend) = state.withLock { state -> (CheckedContinuation<[UInt8]?, any Error>?, Bool) in
            if let waiter = state.bodyWaiter {
                state.bodyWaiter = nil
                return (waiter, false)
            }
            state.chunks.append(chunk)
            state.buffered += chunk.count
            let suspend = !state.suspended && state.buffered > URLSessionTransport.bufferLimit
            if suspend { state.suspended = true }
            return (nil, suspend)
        }
        if let waiter { waiter.resume(returning: chunk) }
        if suspend { dataTask.suspend() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        finishHead(.failure(error ?? URLError(.badServerResponse)))
        let end: Result<Void, any Error> = error.map { .failure($0) } ?? .success(())
        let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
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

/// A data task's body as the remote reads it. Dropping it cancels the task, so a response the
/// remote gave up on (a pull stream left silent, a body not read) does not hold its connection.
final class URLSessionBody: TransportBody {
    private let task: URLSessionDataTask
    private let exchange: TaskExchange

    init(task: URLSessionDataTask, exchange: TaskExchange) {
        self.task = task
        self.exchange = exchange
    }

    deinit { task.cancel() }

    func next() async throws -> [UInt8]? { try await exchange.next(of: task) }
}
