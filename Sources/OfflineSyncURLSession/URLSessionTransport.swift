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
/// transfer for good on Linux, and `suspend()` need not stop libcurl reading the socket). So
/// no response this transport carries is larger than ``streamedResponseLimit``: the server
/// ends each page-stream response after that many bytes (the remote goes on from the last
/// page's cursor in a new request), and an attachment download asks for ranges of that size
/// (`Range: bytes=a-b`), the next once the last was read. A pull or a download holds at most
/// that much plus what its reader holds, however large, and however slow the disk behind it.
///
/// The transport does not take the server's word for it: what waits unread for one request
/// never passes ``maxUnreadBytes`` (twice ``streamedResponseLimit``), or the request's own
/// ``OfflineSyncTransport/TransportRequest/responseBufferLimit`` (what a caller that keeps the
/// whole answer collects). A response that would pass it (a server or proxy that ignores
/// `Range` or the page stream's bound, faster than the disk) is cut: its bytes are let go,
/// its task is cancelled and its reader gets ``OfflineSyncTransport/ResponseOverflow``. A page
/// stream then goes on from its last page in a new request; a download fails typed.
/// A reader that is cancelled gets `CancellationError` at once, and its task is cancelled.
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
    /// The most bytes one response carries for this transport (4 MiB): a page-stream response,
    /// or one range of an attachment download.
    public var streamedResponseLimit: Int? { Self.responseLimit }
    private static let responseLimit = 4 << 20
    /// The most bytes of one response that may wait unread (8 MiB) when its request sets no
    /// ``OfflineSyncTransport/TransportRequest/responseBufferLimit``: twice a response's bound,
    /// so a response the server bounds never reaches it, however slowly it is read.
    public static let maxUnreadBytes = 2 * responseLimit

    /// Bytes of response bodies that arrived and wait for their readers, across this
    /// transport's requests.
    package var bufferedBytes: Int { owner.router.gauge.current }
    /// The most bytes that ever waited at once (``bufferedBytes``' high-water mark): about one
    /// ``streamedResponseLimit`` per response read, however slowly, and never more than
    /// ``maxUnreadBytes`` per response (unless its request allows more).
    package var peakBufferedBytes: Int { owner.router.gauge.peak }
    /// Requests started and not yet completed.
    package var runningRequests: Int { owner.router.running }
    /// Returns once no request is under way (at once when none is), or when the caller is
    /// cancelled.
    package func whenIdle() async { await owner.router.whenIdle() }

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
        let exchange = TaskExchange(gauge: owner.router.gauge, limit: request.responseBufferLimit ?? Self.maxUnreadBytes)
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
        if let error = error as? ResponseOverflow { return error.description }
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
    private struct State {
        var exchanges: [Int: TaskExchange] = [:]
        /// Callers of ``whenIdle()``, by the id each was given.
        var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var lastWaiter: UInt64 = 0
    }

    private let state = Mutex(State())
    private let challenge: URLSessionTransport.ChallengeHandler?
    /// What the exchanges hold for their readers.
    let gauge = BufferGauge()

    init(challenge: URLSessionTransport.ChallengeHandler?) {
        self.challenge = challenge
    }

    /// Sends `task`'s events to `exchange` until it completes (register before resuming it).
    func register(_ exchange: TaskExchange, for task: URLSessionTask) {
        state.withLock { $0.exchanges[task.taskIdentifier] = exchange }
    }

    private func exchange(_ task: URLSessionTask) -> TaskExchange? {
        state.withLock { $0.exchanges[task.taskIdentifier] }
    }

    /// Tasks registered and not yet completed.
    var running: Int { state.withLock { $0.exchanges.count } }

    /// Returns once no task is registered, or when the caller is cancelled.
    func whenIdle() async {
        let id = state.withLock { state -> UInt64 in
            state.lastWaiter += 1
            return state.lastWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.exchanges.isEmpty || Task.isCancelled { return true }
                    state.idleWaiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.idleWaiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        guard let exchange = exchange(dataTask) else { return completionHandler(.cancel) }
        exchange.received(response, completionHandler: completionHandler)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchange(dataTask)?.received(data, of: dataTask)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (exchange, idle) = state.withLock { state -> (TaskExchange?, [CheckedContinuation<Void, Never>]) in
            let exchange = state.exchanges.removeValue(forKey: task.taskIdentifier)
            guard state.exchanges.isEmpty else { return (exchange, []) }
            defer { state.idleWaiters = [:] }
            return (exchange, Array(state.idleWaiters.values))
        }
        exchange?.completed(error)
        for waiter in idle { waiter.resume() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        guard let handler = self.challenge else { return completionHandler(.performDefaultHandling, nil) }
        let (disposition, credential) = handler(challenge)
        completionHandler(disposition, credential)
    }
}
