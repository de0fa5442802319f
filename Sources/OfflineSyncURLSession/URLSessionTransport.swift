import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OfflineSync
import OfflineSyncTransport
import Synchronization

/// ``OfflineSyncTransport/HTTPTransport`` on Foundation's `URLSession`: the platform's
/// proxy, cellular and Low Data Mode settings (from the `URLSessionConfiguration` it is
/// given), its TLS trust with an optional challenge handler for certificate pinning, and no
/// SwiftNIO in the binary.
///
/// The transport owns its session: it must be the session's delegate to read a body as it
/// arrives (Foundation on Linux does not call per-task delegates). The session is invalidated
/// when the last copy of the transport is released.
///
/// A response body is handed over as it arrives and held until it is read: URLSession has
/// no back-pressure a data task's delegate can use (suspending a running task stops its
/// transfer for good on Linux). So the transport asks the server to end each page-stream
/// response after ``streamedResponseLimit`` bytes (the remote goes on from the last page's
/// cursor in a new request): a pull holds at most that much plus a page, however large.
///
/// WebSockets use `URLSessionWebSocketTask`. Foundation on Linux has the type but its libcurl
/// is built without WebSockets; there the change channel reads the server's event stream
/// instead (``OfflineSyncTransport/WebSocketUnavailable``).
public struct URLSessionTransport: HTTPTransport {
    /// Decides a TLS or HTTP authentication challenge (a pinned certificate's check); `nil`
    /// leaves it to the system's default handling.
    public typealias ChallengeHandler = @Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?)

    private let owner: SessionOwner
    /// The session requests go through.
    public var session: URLSession { owner.session }
    /// The most bytes a page-stream response carries for this transport (4 MiB).
    public var streamedResponseLimit: Int? { 4 << 20 }

    /// Creates the transport with a session of `configuration`, answering its
    /// authentication challenges with `challenge` (the system's default handling when `nil`).
    public init(configuration: URLSessionConfiguration = URLSessionTransport.defaultConfiguration, challenge: ChallengeHandler? = nil) {
        owner = SessionOwner(configuration: configuration, challenge: challenge)
    }

    /// The transport every ``URLSessionRemoteStore`` uses unless given another (one session
    /// for the process, of ``defaultConfiguration``).
    public static let shared = URLSessionTransport()

    /// The configuration a transport uses unless given another: ephemeral (no cookies, no
    /// cache: every answer of a sync server is fresh), failing a request at once when the
    /// device is offline instead of waiting for connectivity, so the remote's own backoff
    /// decides when to try again. Start from it to change a setting
    /// (`allowsExpensiveNetworkAccess`, a proxy).
    public static var defaultConfiguration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        #if !canImport(FoundationNetworking)
        configuration.waitsForConnectivity = false
        #endif
        return configuration
    }

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
        owner.router.register(exchange, for: task)
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
                          receive: @escaping @Sendable (String) -> Void) async throws -> UInt16? {
        guard let address = URL(string: url) else { throw SyncError(.invalidConfiguration, "'\(url)' is not a URL") }
        var request = URLRequest(url: address)
        for (name, value) in headers { request.addValue(value, forHTTPHeaderField: name) }
        let task = session.webSocketTask(with: request)
        task.maximumMessageSize = maxMessageBytes
        task.resume()
        return try await withTaskCancellationHandler {
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
                if task.closeCode != .invalid { return UInt16(clamping: task.closeCode.rawValue) }
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

/// Owns a transport's session, and invalidates it when the last copy of the transport goes
/// (the session holds its delegate until then, so it would outlive every remote otherwise).
private final class SessionOwner: Sendable {
    let session: URLSession
    let router: SessionRouter

    init(configuration: URLSessionConfiguration, challenge: URLSessionTransport.ChallengeHandler?) {
        router = SessionRouter(challenge: challenge)
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: nil)
    }

    deinit { session.finishTasksAndInvalidate() }
}

/// The session's delegate: passes each data task's events to its ``TaskExchange``, and
/// authentication challenges to the transport's handler.
///
/// `@unchecked Sendable` (an `NSObject` subclass, which cannot be checked): its only mutable
/// state is the `Mutex`.
final class SessionRouter: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let exchanges = Mutex<[Int: TaskExchange]>([:])
    private let challenge: URLSessionTransport.ChallengeHandler?

    init(challenge: URLSessionTransport.ChallengeHandler?) {
        self.challenge = challenge
    }

    /// Sends `task`'s events to `exchange` until it completes (register before resuming it).
    func register(_ exchange: TaskExchange, for task: URLSessionTask) {
        exchanges.withLock { $0[task.taskIdentifier] = exchange }
    }

    private func exchange(_ task: URLSessionTask) -> TaskExchange? {
        exchanges.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        guard let exchange = exchange(dataTask) else { return completionHandler(.cancel) }
        exchange.received(response, completionHandler: completionHandler)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchange(dataTask)?.received(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let exchange = exchanges.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        exchange?.completed(error)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        guard let handler = self.challenge else { return completionHandler(.performDefaultHandling, nil) }
        let (disposition, credential) = handler(challenge)
        completionHandler(disposition, credential)
    }
}

/// The response's head did not come within the request's deadline.
struct HeadTimedOut: Error {}

/// One data task's exchange: hands the response's head to the waiting request and its data
/// to the body's reader.
final class TaskExchange: Sendable {
    private struct State {
        var head: Result<HTTPURLResponse, any Error>?
        var headWaiter: CheckedContinuation<HTTPURLResponse, any Error>?
        var chunks: [[UInt8]] = []
        /// Set when the task completed: `nil` inside is a clean end.
        var end: Result<Void, any Error>?
        var bodyWaiter: CheckedContinuation<[UInt8]?, any Error>?
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
                let answer = state.withLock { state -> Result<[UInt8]?, any Error>? in
                    if !state.chunks.isEmpty {
                        // Every chunk waiting is handed over at once: fewer hand-offs.
                        let chunk = state.chunks.count == 1 ? state.chunks[0] : Array(state.chunks.joined())
                        state.chunks.removeAll(keepingCapacity: true)
                        return .success(chunk)
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
            task.cancel()
        }
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

    func received(_ data: Data) {
        let chunk = [UInt8](data)
        let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
            if let waiter = state.bodyWaiter {
                state.bodyWaiter = nil
                return waiter
            }
            state.chunks.append(chunk)
            return nil
        }
        waiter?.resume(returning: chunk)
    }

    func completed(_ error: (any Error)?) {
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
