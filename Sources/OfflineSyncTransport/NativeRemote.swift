import Foundation
import Logging
import OfflineSync
import OfflineSyncWire
import Synchronization

/// A ``RemoteStore`` over HTTP: the native API of an OfflineSync server (binary pushes to
/// `/v2/push`, or JSON to `/v1/push` on a server without it; `/v1/pull`, and whole pulls as
/// `/v2/pull`'s page stream: ``openPull(_:)``), over any ``HTTPTransport``.
///
/// Apps use it through `OfflineSyncHTTP`'s `HTTPRemoteStore` (AsyncHTTPClient) or
/// `OfflineSyncURLSession`'s `URLSessionRemoteStore`: each wraps this type over its
/// transport, so the two behave alike.
///
/// - **Timeouts**: every request has a deadline (``Configuration/requestTimeout``).
/// - **Retries** with exponential backoff and full jitter for failures worth retrying:
///   connection errors and timeouts, 5xx, and 429 (honouring `Retry-After`). Both calls are
///   safe to repeat: a pull is a read, and a push replayed after a lost answer gets its
///   first outcome back (the server remembers each operation id), so nothing is applied twice.
/// - **Typed errors**: 401 is ``SyncError/Code/authenticationFailed``; 403 is
///   ``SyncError/Code/forbidden`` (that request is refused, not the credentials); a request the server
///   refuses keeps the server's code (`invalidCursor`, `invalidQuery`…) or is
///   ``SyncError/Code/rejected``; a failure that outlasts the retries is
///   ``SyncError/Code/transient``, so the sync context keeps its queue and tries later.
/// - **Memory**: a response is read up to ``Configuration/maxResponseBytes``; a pull page is
///   bounded by its page size, never by the table's size, and a page stream is read a frame
///   at a time as the pull asks for pages. Over a transport that cannot pause a response
///   (URLSession), what waits unread is bounded as well: by what the caller collects, or by
///   the transport for a page stream, which goes on from its last page in a new request
///   when its reader falls that far behind (``TransportRequest/responseBufferLimit``).
///
/// Over a transport of one's own (an app's own HTTP stack):
///
/// ```swift
/// let remote = NativeRemote(baseURL: "https://sync.example.com", transport: MyTransport(), token: { try await auth.token() })
/// let context = try await SyncContext(store: local, remote: remote)
/// ```
public struct NativeRemote: RemoteStore {
    /// How requests are timed and retried.
    public struct Configuration: Sendable {
        /// The deadline of one attempt.
        public var requestTimeout: Duration
        /// Attempts per call, the first included.
        public var maxAttempts: Int
        /// The first retry waits up to this long; each further retry doubles it.
        public var initialBackoff: Duration
        /// The longest wait between attempts (also caps `Retry-After`).
        public var maxBackoff: Duration
        /// The largest response body read.
        public var maxResponseBytes: Int
        /// How long the change channel may take from connecting to its subscription (the
        /// WebSocket upgrade and the server's `subscribed`). A server that accepts and never
        /// answers, or a proxy that holds the upgrade, is then reported as
        /// ``RemoteChangeEvent/unavailable(_:)`` and tried again with backoff.
        public var channelHandshakeTimeout: Duration

        /// Creates a configuration.
        public init(requestTimeout: Duration = .seconds(30), maxAttempts: Int = 5, initialBackoff: Duration = .milliseconds(100),
                    maxBackoff: Duration = .seconds(10), maxResponseBytes: Int = 256 << 20,
                    channelHandshakeTimeout: Duration = .seconds(10)) {
            self.requestTimeout = requestTimeout
            self.maxAttempts = max(1, maxAttempts)
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
            self.maxResponseBytes = maxResponseBytes
            self.channelHandshakeTimeout = channelHandshakeTimeout
        }
    }

    /// The server's base URL (`http://host:port`).
    public let baseURL: String
    /// The retry and timeout policy.
    public let configuration: Configuration
    let token: @Sendable () async throws -> String
    /// The HTTP library underneath.
    public let transport: any HTTPTransport
    /// This remote's id, sent with its pushes (`X-OfflineSync-Client`) and its change
    /// channel (`?client=`): the server does not announce a push's own changes back to the
    /// channel of the client that pushed them, so a context does not pull what it just sent.
    let clientId = UUID().uuidString
    /// The routes this remote found the server lacks (shared by its copies).
    let routes = KnownRoutes()
    /// The remote's logger (retries and reconnections, at debug level; never a token or a body).
    public let logger: Logger

    /// Creates a remote for the server at `baseURL` over `transport`. `token` returns the
    /// bearer token to send: it is called before each attempt, and once more at once after a
    /// 401 (then the request is sent again with what it returns), so an app's provider can
    /// return its identity SDK's current access token and refresh it when it has expired. A
    /// provider that throws makes the call fail with ``SyncError/Code/authenticationFailed``
    /// (or the code of the ``SyncError`` it throws); a second 401 in a row is
    /// ``SyncError/Code/authenticationFailed``.
    public init(baseURL: String, configuration: Configuration = .init(), transport: any HTTPTransport,
                logger: Logger = Logger(label: "offline-sync.http"), token: @escaping @Sendable () async throws -> String) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.configuration = configuration
        self.transport = transport
        self.logger = logger
        self.token = token
    }

    /// Pushes a batch; see ``RemoteStore/push(_:)``. The batch goes to `POST /v2/push` in
    /// binary (``PushBatch``); a server without that route (older, or with it turned off)
    /// answers a bare 404, and from then on this remote pushes JSON to `POST /v1/push`.
    public func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        if !routes.lacksBinaryPush.withLock({ $0 }) {
            let answer = try await exchange(
                path: "/v2/push", body: PushBatch.encode(operations: operations),
                contentType: "\(PushBatch.mediaType); version=\(PushBatch.version)",
                headers: [("X-OfflineSync-Client", clientId), ("Accept", "\(PushBatch.resultsMediaType); version=\(PushBatch.version)")],
                responseBufferLimit: configuration.maxResponseBytes
            ) { response in
                let type = response.header("Content-Type") ?? ""
                guard type.lowercased().hasPrefix(PushBatch.resultsMediaType) else {
                    throw SyncError(.transient, "the server answered /v2/push with '\(type)', not a binary push answer")
                }
                let buffer = try await response.body.collect(upTo: configuration.maxResponseBytes)
                do {
                    return try buffer.withUnsafeBytes { try PushBatch.decodeResults($0, answering: operations) }
                } catch let error as SyncError {
                    throw SyncError(.transient, "the server's push answer is malformed: \(error.message)")
                }
            }
            switch answer {
            case .answered(let results): return try Self.checked(results, answering: operations)
            case .noSuchRoute: routes.lacksBinaryPush.withLock { $0 = true }
            }
        }
        // `return=minimal`: an applied insert or update comes back without its record, which
        // is rebuilt here from the operation (half a push's answer, and most of its parsing);
        // a server that ignores the preference answers whole records, read the same way.
        let answer = try await send(path: "/v1/push", body: Wire.encode(operations: operations),
                                    headers: [("X-OfflineSync-Client", clientId), ("Prefer", "return=minimal")])
        guard case .array(let items)? = answer["results"] else {
            throw SyncError(.transient, "the server's push answer has no 'results'")
        }
        let results = try items.enumerated().map { index, item in
            try Wire.result(item, answering: index < operations.count ? operations[index] : nil, path: "results[\(index)]")
        }
        return try Self.checked(results, answering: operations)
    }

    /// `results` when they answer `operations` one for one, in order.
    private static func checked(_ results: [PushResult], answering operations: [PushOperation]) throws -> [PushResult] {
        guard results.map(\.operationId) == operations.map(\.id) else {
            throw SyncError(.transient, "the server's push answer does not match the operations sent")
        }
        return results
    }

    /// Pulls one page; see ``RemoteStore/pull(_:)``.
    public func pull(_ request: PullRequest) async throws -> PullPage {
        let answer = try await send(path: "/v1/pull", body: Wire.json(request).encoded)
        do { return try Wire.pullPage(answer) } catch let error as SyncError {
            throw SyncError(.transient, "the server's pull answer is malformed: \(error.message)")
        }
    }

    /// Sends a request with retries; returns the parsed 200 answer. `path` may carry a
    /// query. Errors in the native shape (`{"error": {"code", "message"}}`) and in the
    /// Cognito Sync shape (`x-amzn-ErrorType`) are both typed.
    func send(method: TransportRequest.Method = .post, path: String, body bytes: [UInt8]?, attempts: Int? = nil,
              headers: [(String, String)] = []) async throws -> JSON {
        let answer = try await exchange(method: method, path: path, body: bytes, attempts: attempts, headers: headers,
                                        responseBufferLimit: configuration.maxResponseBytes) { response in
            let buffer = try await response.body.collect(upTo: configuration.maxResponseBytes)
            return try buffer.withUnsafeBytes { try JSON.parse($0) }
        }
        guard case .answered(let json) = answer else { throw Self.error(status: 404, code: "http404", message: "HTTP 404") }
        return json
    }

    /// What ``exchange(method:path:body:attempts:timeout:contentType:headers:responseBufferLimit:read:)`` got back.
    enum Exchange<Answer: Sendable>: Sendable {
        /// The 200 response, as `read` made it.
        case answered(Answer)
        /// A 404 that is not the server's own error (no `{"error": …}` body): the server has
        /// no such route — it is older than the route.
        case noSuchRoute
    }

    /// Sends a request with retries until an answer: `read` makes the 200 response into the
    /// answer (an error it throws that is not a ``SyncError`` — a body cut short — is retried
    /// as a failed attempt); any other status is thrown as a typed error, except a bare 404.
    /// `responseBufferLimit` goes with the request (``TransportRequest/responseBufferLimit``):
    /// a caller that collects the whole answer gives the most it collects; one that reads it
    /// as it comes (a page stream, an event stream) leaves the bound to the transport.
    func exchange<Answer: Sendable>(method: TransportRequest.Method = .post, path: String, body bytes: [UInt8]?, attempts: Int? = nil,
                                    timeout: Duration? = nil, contentType: String = "application/json", headers: [(String, String)] = [],
                                    responseBufferLimit: Int? = nil,
                                    read: (TransportResponse) async throws -> Answer) async throws -> Exchange<Answer> {
        let maxAttempts = attempts ?? configuration.maxAttempts
        var attempt = 0
        var askedAgain = false
        var backoff = Backoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
        while true {
            attempt += 1
            let failure: SyncError
            var retryAfter: Duration?
            let bearer = try await currentToken()
            do {
                var request = TransportRequest(method: method, url: baseURL + path,
                                               headers: [("Authorization", "Bearer \(bearer)")] + headers.map { ($0.0, $0.1) })
                if let bytes {
                    request.headers.append(("Content-Type", contentType))
                    request.body = bytes
                }
                request.responseBufferLimit = responseBufferLimit
                let response = try await transport.execute(request, timeout: timeout ?? configuration.requestTimeout)
                let status = response.status
                if status == 200 {
                    return .answered(try await read(response))
                }
                let buffer = try await response.body.collect(upTo: configuration.maxResponseBytes)
                let answer = try? buffer.withUnsafeBytes { try JSON.parse($0) }
                let code: String
                let message: String
                if let body = answer.flatMap({ WireErrorBody(json: $0) }) {
                    (code, message) = (body.rawCode, body.message)
                } else if let type = response.header("x-amzn-ErrorType") {
                    code = String(type.prefix { $0 != ":" })
                    if case .string(let m)? = answer?["message"] { message = m } else { message = code }
                } else {
                    if status == 404 { return .noSuchRoute }
                    (code, message) = ("http\(status)", "HTTP \(status)")
                }
                if status == 401, !askedAgain {
                    // The token may have expired since the provider gave it: ask once more
                    // (an app's provider refreshes it through its own SDK) and send again at
                    // once. This is not one of the transient attempts.
                    askedAgain = true
                    attempt -= 1
                    logger.debug("401: asking the token provider again", metadata: ["path": "\(path)"])
                    continue
                }
                if status == 429 || status >= 500 {
                    failure = SyncError(.transient, "the server answered \(status): \(message)")
                    retryAfter = response.header("Retry-After").flatMap(Int.init).map { .seconds(max(0, $0)) }
                } else {
                    throw Self.error(status: status, code: code, message: message)
                }
            } catch let error as SyncError {
                throw error
            } catch is CancellationError {
                throw SyncError(.cancelled, "the request was cancelled")
            } catch {
                if Task.isCancelled { throw SyncError(.cancelled, "the request was cancelled") }
                // Connection refused or reset, timeouts, a body cut short: worth retrying.
                failure = SyncError(.transient, "the request to \(path) failed: \(describe(error))")
            }
            guard attempt < maxAttempts else { throw failure }
            // A server's Retry-After is honoured up to the configured largest wait.
            let wait = min(max(retryAfter ?? .zero, backoff.nextDelay()), configuration.maxBackoff)
            logger.debug("retrying", metadata: ["path": "\(path)", "attempt": "\(attempt)", "reason": "\(failure.message)"])
            try await Task.sleep(for: wait)
        }
    }

    /// The token provider's answer. A provider that throws ``SyncError`` keeps its code (so
    /// it can say ``SyncError/Code/transient`` when its own refresh failed for want of a
    /// network); anything else it throws is ``SyncError/Code/authenticationFailed``: the
    /// app has no token to give, and retrying will not make one.
    func currentToken() async throws -> String {
        do {
            return try await token()
        } catch let error as SyncError {
            throw error
        } catch is CancellationError {
            throw SyncError(.cancelled, "the request was cancelled")
        } catch {
            throw SyncError(.authenticationFailed, "the token provider failed (\(describe(error)))")
        }
    }

    /// The typed error for a 4xx answer. `code` is the answer's code as sent: a
    /// ``WireErrorCode`` of this server's (an error body's, or a page stream failure's), or
    /// Cognito Sync's `x-amzn-ErrorType`, or `http<status>` for an answer without either.
    static func error(status: Int, code: String, message: String) -> SyncError {
        // Cognito Sync's error types: AWS's protocol, spelled as AWS spells them.
        switch code {
        case "ResourceConflictException": return SyncError(.conflict, message)
        case "LimitExceededException": return SyncError(.limitExceeded, message)
        case "ResourceNotFoundException": return SyncError(.notFound, message)
        case "InvalidConfigurationException": return SyncError(.invalidConfiguration, message)
        case "InvalidParameterException": return SyncError(.invalidValue, message)
        default: break
        }
        let wire = WireErrorCode(rawValue: code)
        // Only 401 says the credentials are refused. A 403 refuses this request (the sync
        // rules deny the table or the operation, or a proxy denies the path): the caller's
        // other requests may pass, so it is no reason to stop syncing everything.
        if status == 403 { return SyncError(.forbidden, message) }
        if status == 401 { return SyncError(.authenticationFailed, message) }
        if wire == .invalidCursor { return SyncError(.invalidCursor, message) }
        if wire == .invalidQuery { return SyncError(.invalidQuery, message) }
        if wire == .unsupportedVersion, status == 406 || status == 415 { return SyncError(.unsupported, message) }
        if status == 413 || wire == .pageSizeExceeded { return SyncError(.limitExceeded, message) }
        if wire == .attachmentDamaged { return SyncError(.attachmentDamaged, message) }
        if status == 404 { return SyncError(.notFound, message) }
        return SyncError(.rejected, "the server refused the request (\(status) \(code)): \(message)")
    }

    /// What went wrong with a request, in words an operator can act on ("the connection was
    /// refused"), never with anything the request carried.
    func describe(_ error: any Error) -> String {
        if let error = error as? StreamBrokeOff { return error.reason }
        if let error = error as? ResponseOverflow { return error.description }
        if let words = transport.describe(error) { return words }
        return String(describing: type(of: error))
    }
}

extension NativeRemote {
    /// Whether the server answers `GET /health` with 200 within `timeout` (one attempt, no retries).
    public func isReachable(timeout: Duration = .seconds(5)) async -> Bool {
        let request = TransportRequest(method: .get, url: baseURL + "/health")
        guard let response = try? await transport.execute(request, timeout: timeout) else { return false }
        _ = try? await response.body.collect(upTo: 1 << 16)
        return response.status == 200
    }

    /// The default ``NetworkMonitor`` for this server: ``isReachable(timeout:)`` every
    /// `interval` while it answers, with backoff from 250 ms up to `maxBackoff` while it does not.
    public func networkMonitor(interval: Duration = .seconds(30), maxBackoff: Duration = .seconds(30)) -> ProbingNetworkMonitor {
        ProbingNetworkMonitor(interval: interval, maxBackoff: maxBackoff) { await self.isReachable() }
    }
}

/// What a remote learned of its server's routes: once `/v2/push` answered a bare 404, pushes
/// go to `/v1/push` without asking again (and once the change channel had to be an event
/// stream, it stays one) (a server is not expected to lose a route; a
/// remote made anew asks again).
final class KnownRoutes: Sendable {
    let lacksBinaryPush = Mutex(false)
    /// The change channel is read as an event stream: the transport has no WebSocket, or
    /// the upgrade was refused while the event stream was answered.
    let channelIsEventStream = Mutex(false)
}
