import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import OfflineSync
import OfflineSyncService
import OfflineSyncWire
import ServiceLifecycle
import Synchronization

/// The sync server: ``OfflineSyncService`` over HTTP on Hummingbird 2.
///
/// - the native API under `/v1` (batched push, cursor pull pages, change notifications over
///   a WebSocket), described in `Docs/Protocol.md` and `Docs/openapi.yaml`;
/// - the Datasync / Azure Mobile Apps tables API under `/tables/{table}`;
/// - `GET /health`, the one route without credentials (it reveals nothing but liveness);
/// - operator routes under `/v1/admin`, behind the admin key.
///
/// Every other route needs `Authorization: Bearer <token>`: one minted by the server's
/// ``TokenAuthority``, or one of a configured identity provider (``TokenIssuer``). The token's identity and claims decide every read and write through the
/// service's sync rules (`Docs/SyncRules.md`): owner-only tables (every table without rules)
/// keep each identity's rows apart; shared tables serve each identity the rows the rules let
/// it read, on every route, in every error, count and notification.
///
/// ```swift
/// let service = try await OfflineSyncService(store: SQLiteStore(path: "server.sqlite"))
/// let server = try await SyncServer(service: service, configuration: .init(tokenSecret: secret))
/// try await server.run()   // until SIGTERM or SIGINT; in-flight requests finish first
/// ```
public struct SyncServer: Sendable {
    /// What a server listens on, its limits and its secrets.
    public struct Configuration: Sendable {
        /// The address to bind; `127.0.0.1` by default.
        public var host: String
        /// The port; `8080` by default, `0` for any free port (see ``RunningSyncServer/port``).
        public var port: Int
        /// The HMAC-SHA256 key of identity tokens, at least 32 bytes.
        public var tokenSecret: [UInt8]
        /// The key of the operator routes (`X-Admin-Key`), or `nil` to disable them.
        public var adminKey: String?
        /// A scraper's key: `GET /metrics` accepts it as `Authorization: Bearer <key>`, and no
        /// other route accepts it, so whoever holds it reads the metrics and can do nothing
        /// else (the admin key in `X-Admin-Key` reads them too). `nil` (the default) or empty:
        /// only the admin key reads them.
        public var metricsKey: String? = nil
        /// When the console's session cookie carries `Secure`; by default when the sign-in came
        /// over TLS or from a trusted proxy saying `X-Forwarded-Proto: https`. This server
        /// terminates no TLS itself, so behind a TLS-terminating proxy `auto` needs that proxy
        /// in ``trustedProxies``; otherwise use ``ConsoleSecureCookie/always``. A server that
        /// listens beyond loopback with `auto`, an admin key and no trusted proxy logs a
        /// warning when it starts.
        public var consoleSecureCookie: ConsoleSecureCookie = .auto
        /// The proxies whose `X-Forwarded-Proto` and `X-Forwarded-For` are believed (for the
        /// console's cookie and the limit on wrong keys); none by default.
        public var trustedProxies = TrustedProxies()
        /// How many wrong admin or metrics keys the server takes per client address and
        /// overall, at every door that compares one (the console's sign-in, `X-Admin-Key`, a
        /// console session cookie, the metrics key), before it answers 429 without checking.
        public var consoleSignIns = ConsoleSignInLimits()
        /// The largest request body accepted, in bytes (413 `bodyTooLarge` above it).
        public var maxBodyBytes: Int
        /// The most operations one push may carry (413 `batchTooLarge` above it). A
        /// `SyncContext` sends a local transaction whole, up to ten times its push batch size
        /// (500 by default), so keep this at least that large.
        public var maxBatchSize: Int
        /// The largest pull page a client may ask for (400 `pageSizeExceeded` above it).
        public var maxPageSize: Int
        /// The tables API's page size (`$top` larger than this is served in several pages).
        public var tablesPageSize: Int
        /// Where the server logs (requests, failures); never tokens, keys or record values.
        public var logger: Logger
        /// The access keys of the Cognito Sync API (AWS Signature Version 4, service
        /// `cognito-sync`). Without any, that API accepts only the server's bearer tokens.
        public var cognitoKeys: [CognitoAccessKey]
        /// How long a graceful shutdown may wait for connections to finish, once the drain
        /// period (``drainPeriod``) is over, before the server cancels them and stops anyway: a
        /// client that never closes its socket cannot hold a stopping server open. A push cut
        /// off this way rolls back whole, as any failed transaction does.
        public var shutdownGracePeriod: Duration = .seconds(10)
        /// How long a new connection may stay silent before the server closes it (default 10
        /// seconds). A connection that has sent nothing is also closed as soon as a shutdown
        /// begins, so it neither holds a stopping server open nor holds a socket for nothing.
        public var silentConnectionTimeout: Duration = .seconds(10)
        /// How long, once a shutdown begins, the server keeps serving while `GET /ready`
        /// answers 503, before it stops accepting: the time a load balancer needs to see the
        /// instance leave and send new requests elsewhere. Default 0: it stops accepting at once.
        public var drainPeriod: Duration = .zero
        /// Once the drain period is over, how long the change channels get to close with "going
        /// away" (a WebSocket's 1001, an event stream's `goingAway`) before the application's
        /// own shutdown closes what is left as a plain end, which their clients report as a
        /// disconnection (default 2 seconds; the wait ends as soon as every channel closed).
        public var goingAwayGrace: Duration = .seconds(2)
        /// The identity providers whose tokens are accepted (`Docs/Server.md`, "Identity
        /// providers").
        public var issuers: [TokenIssuer] = []
        /// Whether the server's own development tokens are accepted (and minted by
        /// `POST /v1/admin/tokens`). By default only while no issuer is configured: whoever
        /// holds the token secret or the admin key can mint one for any identity.
        public var developmentTokens: DevelopmentTokens = .withoutIssuers
        /// When the issuers' keys are fetched again.
        public var keyRefresh = KeyRefreshPolicy()
        /// Whether `POST /v2/pull` answers with the binary page stream (`Docs/Protocol.md`).
        /// Off, the route does not exist, as on a server older than it: clients fall back to
        /// one `POST /v1/pull` per page.
        public var streamsPages = true
        /// Whether `POST /v2/push` takes and answers binary batches (`Docs/Protocol.md`, "The
        /// binary push"). Off, the route does not exist, as on a server older than it: clients
        /// fall back to `POST /v1/push`'s JSON.
        public var binaryPush = true
        /// The most pages one page-stream response carries; the client asks again from the
        /// last cursor for the rest. It bounds how long one request holds a connection and a
        /// server task, not how much memory: the stream holds one page at a time.
        public var pagesPerStream = 1000
        /// How often the server collects unreferenced attachments and abandoned uploads
        /// (``OfflineSyncService/pruneAttachments(now:)``, each past the service's
        /// ``AttachmentLimits/grace``); default hourly, `nil` for never (an operator then calls
        /// `POST /v1/admin/prune-attachments`). Several instances over one store may all run
        /// it: each removal is checked again in its own transaction.
        public var attachmentPruneInterval: Duration? = .seconds(3600)
        /// How long a change channel's notice may wait to be written before the server closes
        /// the channel (default 15 seconds). A write waits when the socket's buffers are full:
        /// the client stopped reading (a suspended app, a stalled network). Meanwhile the
        /// channel holds at most one waiting notice per table; once closed it holds nothing,
        /// and its client reconnects when it reads again, and pulls.
        public var changeChannelWriteTimeout: Duration = .seconds(15)
        /// How often the server pings an idle WebSocket change channel (default 30 seconds).
        /// A channel that has not answered one ping by the next is closed: it catches a client
        /// that stopped reading before any notice filled its buffers.
        public var changeChannelPingInterval: Duration = .seconds(30)

        /// Creates a configuration.
        public init(host: String = "127.0.0.1", port: Int = 8080, tokenSecret: [UInt8], adminKey: String? = nil,
                    maxBodyBytes: Int = 32 << 20, maxBatchSize: Int = 5000, maxPageSize: Int = OfflineSyncService.maxPageSize,
                    tablesPageSize: Int = 100, logger: Logger = Logger(label: "offline-sync.server"),
                    cognitoKeys: [CognitoAccessKey] = []) {
            self.host = host
            self.port = port
            self.tokenSecret = tokenSecret
            self.adminKey = adminKey
            self.maxBodyBytes = maxBodyBytes
            self.maxBatchSize = maxBatchSize
            self.maxPageSize = maxPageSize
            self.tablesPageSize = tablesPageSize
            self.logger = logger
            self.cognitoKeys = cognitoKeys
        }
    }

    /// The service the server exposes.
    public let service: OfflineSyncService
    /// The server's configuration.
    public let configuration: Configuration
    /// The authority that mints and checks the server's own (development) tokens.
    public let tokens: TokenAuthority
    /// Checks every bearer token: the development tokens and the issuers'.
    let verifier: TokenVerifier
    /// Where committed changes are announced.
    public let feed: any ChangeFeed
    /// The datasets behind the Cognito Sync API.
    public let datasets: DatasetService
    /// What the server counts, served on `GET /metrics` (``ServerMetrics``).
    public let metrics: ServerMetrics
    /// The last operations the rules refused, shown in the console (`/admin`).
    public let refusals = RecentRefusals()
    /// The console's failed sign-ins and revoked sessions.
    let console = ConsoleState()
    /// When this server value was made: the console's uptime.
    let started = Timestamp.now()
    /// Set once a shutdown begins: `GET /ready` answers 503 from then on.
    let draining = DrainFlag()
    /// `GET /ready`'s store reads: shared by the probes, each probe bounded by its deadline.
    let readiness = ReadinessProbe()
    /// The change channels open now, told "going away" when the drain ends.
    let channels = ChannelRegistry()
    /// The event loops' lists of WebSocket change channels with notices to write.
    let noticeLoops = NoticeLoops()

    /// The service that, when a shutdown begins, marks the server draining and holds the
    /// listener open for ``Configuration/drainPeriod``. It comes after the application in the
    /// service group, which shuts services down in reverse order: it is told first, and the
    /// application stops accepting only once it is done.
    private var drain: DrainService {
        DrainService(draining: draining, period: configuration.drainPeriod, channels: channels, goingAwayGrace: configuration.goingAwayGrace,
                     sweep: SlowChannelSweep(channels: channels, timeout: configuration.changeChannelWriteTimeout, metrics: metrics))
    }
    /// The services that run beside the application until the shutdown.
    private var services: [any Service] {
        var services: [any Service] = [drain]
        if let interval = configuration.attachmentPruneInterval {
            services.append(AttachmentPruneService(service: service, interval: interval, logger: configuration.logger))
        }
        return services
    }
    let sigV4: SigV4Verifier
    let signedRequests: SignedRequestLedger
    let cognitoKeys: [String: CognitoAccessKey]

    /// Creates a server. `datasets` defaults to a ``DatasetService`` over the service's store
    /// (with no stream destination). Throws ``SyncError/Code/invalidValue`` for a token
    /// secret shorter than 32 bytes, limits below 1 or an access key id given twice.
    public init(service: OfflineSyncService, configuration: Configuration, feed: any ChangeFeed = LocalChangeFeed(),
                datasets: DatasetService? = nil) async throws {
        guard configuration.maxBodyBytes >= 1024, configuration.maxBatchSize >= 1, configuration.maxPageSize >= 1,
              configuration.tablesPageSize >= 1, configuration.pagesPerStream >= 1,
              configuration.changeChannelWriteTimeout > .zero, configuration.changeChannelPingInterval > .zero else {
            throw SyncError(.invalidValue, "server limits and change-channel times must be positive (and the body limit at least 1 KiB)")
        }
        self.service = service
        self.configuration = configuration
        let metrics = ServerMetrics(ruleTables: Set(service.rules.tables.keys))
        self.metrics = metrics
        self.tokens = try await TokenAuthority(secret: configuration.tokenSecret)
        self.verifier = try TokenVerifier(development: configuration.developmentTokens.isOn(issuers: configuration.issuers) ? tokens : nil,
                                          issuers: configuration.issuers,
                                          policy: configuration.keyRefresh, logger: configuration.logger,
                                          keySetFetched: { metrics.keySetFetched(issuer: $0, ok: $1) })
        self.feed = feed
        if let datasets {
            self.datasets = datasets
        } else {
            self.datasets = try await DatasetService(store: service.store)
        }
        self.signedRequests = try await SignedRequestLedger(store: self.datasets.store)
        var keys: [String: CognitoAccessKey] = [:]
        for key in configuration.cognitoKeys {
            guard keys.updateValue(key, forKey: key.accessKeyId) == nil else {
                throw SyncError(.invalidValue, "access key id '\(key.accessKeyId)' is configured twice")
            }
        }
        self.cognitoKeys = keys
        self.sigV4 = SigV4Verifier(credentials: keys.mapValues(\.secretAccessKey))
    }

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully: the listener closes, requests
    /// in flight complete (a push is one transaction, so it is applied whole or not at all),
    /// notification sockets are closed, and the call returns — within
    /// ``Configuration/shutdownGracePeriod``, after which what is left is cancelled.
    ///
    /// `onListening` is called with the bound port once the server accepts connections.
    public func run(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let app = makeApplication(onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) })
        var groupConfiguration = ServiceGroupConfiguration(services: [app as any Service] + services, gracefulShutdownSignals: [.sigterm, .sigint],
                                                           logger: configuration.logger)
        groupConfiguration.maximumGracefulShutdownDuration = shutdownBound
        try await ServiceGroup(configuration: groupConfiguration).run()
    }

    /// How long a graceful shutdown may take in all before what is left is cancelled: the
    /// drain period, the change channels' "going away", then the grace period for the
    /// connections. The grace period alone would cut a drain longer than it short, closing
    /// connections the drain still serves.
    var shutdownBound: Duration {
        configuration.drainPeriod + configuration.goingAwayGrace + configuration.shutdownGracePeriod
    }

    /// Starts serving in the background and returns once the listener is bound.
    public func start() async throws -> RunningSyncServer {
        let (bound, boundContinuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
        let app = makeApplication(onServerRunning: { channel in
            boundContinuation.yield(channel.localAddress?.port ?? 0)
        })
        var groupConfiguration = ServiceGroupConfiguration(services: [app as any Service] + services, logger: configuration.logger)
        groupConfiguration.maximumGracefulShutdownDuration = shutdownBound
        let group = ServiceGroup(configuration: groupConfiguration)
        let task = Task {
            defer { boundContinuation.finish() }
            try await group.run()
        }
        var iterator = bound.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await task.value   // the server failed to start: report why
            throw SyncError(.transient, "the server stopped before it was listening")
        }
        return RunningSyncServer(host: configuration.host, port: port, group: group, task: task)
    }

    func makeApplication(onServerRunning: @escaping @Sendable (any Channel) async -> Void) -> some ApplicationProtocol {
        verifier.start()
        if let warning = Self.secureCookieWarning(configuration) { configuration.logger.warning("\(warning)") }
        let router = Router(context: SyncRequestContext.self)
        router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
        router.add(middleware: RequestLogMiddleware(logger: configuration.logger))
        router.add(middleware: AuthenticationMiddleware(verifier: verifier, metrics: metrics))
        let routes = Routes(server: self)
        routes.addNative(to: router)
        routes.addAttachments(to: router)
        routes.addTables(to: router)
        routes.addConsole(to: router)
        CognitoRoutes(routes: routes).add(to: router)
        let webSocketRouter = Router(context: SyncRequestContext.self)
        webSocketRouter.add(middleware: AuthenticationMiddleware(verifier: verifier, metrics: metrics))
        routes.addWebSocket(to: webSocketRouter)
        let webSocketResponder = webSocketRouter.buildResponder()
        let silentTimeout = configuration.silentConnectionTimeout
        let webSocketConfiguration = WebSocketServerConfiguration(autoPing: .enabled(timePeriod: configuration.changeChannelPingInterval))
        return Application(
            router: router,
            server: HTTPServerBuilder { responder in
                GuardedChildChannel(base: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                       configuration: webSocketConfiguration),
                                    firstByteTimeout: .nanoseconds(Int64(silentTimeout / .nanoseconds(1))))
            },
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "OfflineSync"),
            onServerRunning: onServerRunning,
            logger: configuration.logger)
    }
}

extension SyncServer {
    /// The warning a server logs when it starts beyond loopback with a console whose cookie
    /// can never be `Secure`: `auto`, no trusted proxy, and a listener that never sees TLS
    /// (this server terminates none). `nil` otherwise.
    static func secureCookieWarning(_ configuration: Configuration) -> String? {
        guard configuration.adminKey != nil, configuration.consoleSecureCookie == .auto, configuration.trustedProxies.isEmpty,
              !isLoopback(configuration.host) else { return nil }
        return "the console's session cookie will never be Secure: this server terminates no TLS, and no --trusted-proxy "
            + "says X-Forwarded-Proto: https. Behind a TLS-terminating proxy, name it with --trusted-proxy, "
            + "or set --console-secure-cookie always"
    }

    /// Whether `host`, a listening address, is loopback only (`localhost`, 127.0.0.0/8, `::1`).
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        guard let bytes = TrustedProxies.address(host) else { return false }
        return bytes.count == 4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
    }
}

/// A flag set once, read from any task: whether a server's shutdown began (shared by its
/// copies), whether it reached a change channel.
final class DrainFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// Marks a server draining when a shutdown begins, waits its drain period, then tells every
/// open change channel "going away" and gives them a moment to say it.
///
/// It holds only the flag, the period and the channels: the service group logs each
/// service's description (at debug level), so a service holding the server would log its
/// configuration, the admin key and the token secret among it (`LogTests` caught that).
struct DrainService: Service, CustomStringConvertible {
    let draining: DrainFlag
    let period: Duration
    let channels: ChannelRegistry

    var description: String { "DrainService" }

    /// How long the channels get to close with "going away" (``SyncServer/Configuration/goingAwayGrace``).
    let goingAwayGrace: Duration

    /// Closes the channels whose client stopped reading, from the start until the channels
    /// went away.
    let sweep: SlowChannelSweep

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await sweep.run() }
            // Until the shutdown begins (or the group is cancelled).
            try? await gracefulShutdown()
            draining.set()
            if period > .zero { try? await Task.sleep(for: period) }
            // The balancer has had the drain period to send new work elsewhere: the channels
            // still here move now, at once and without reporting a disconnection.
            channels.goAway()
            let deadline = ContinuousClock.now + goingAwayGrace
            while channels.count > 0, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
            group.cancelAll()
        }
    }
}

/// The change channels open on a server (shared by its copies), so a shutdown can tell each
/// "going away" before the application stops, and ``SlowChannelSweep`` can find those
/// whose client stopped reading.
final class ChannelRegistry: Sendable {
    private struct State {
        var open: [ObjectIdentifier: OpenChannel] = [:]
        var closing = false
    }

    private let state = Mutex(State())

    /// Adds `channel`; `false` when the server is already past its drain (the channel
    /// should go away at once).
    func add(_ channel: OpenChannel) -> Bool {
        state.withLock { state in
            guard !state.closing else { return false }
            state.open[ObjectIdentifier(channel)] = channel
            return true
        }
    }

    /// Removes `channel`, which ended.
    func remove(_ channel: OpenChannel) {
        _ = state.withLock { $0.open.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Tells every open channel, and every one added from now on, to go away.
    func goAway() {
        let open = state.withLock { state in
            state.closing = true
            return Array(state.open.values)
        }
        open.forEach { $0.goAway() }
    }

    /// The channels whose current write began more than `timeout` before `now` (uptime nanoseconds).
    func stalled(longerThan timeout: Duration, now: UInt64) -> [OpenChannel] {
        let limit = UInt64(timeout / .nanoseconds(1))
        return state.withLock { state in state.open.values.filter { $0.isStalled(longerThan: limit, now: now) } }
    }

    /// The channels open now.
    var count: Int { state.withLock { $0.open.count } }
}

/// One open change channel, whatever carries it.
final class OpenChannel: Sendable {
    /// Ends the channel with "going away" (the server is shutting down).
    let goAway: @Sendable () -> Void
    /// Closes the channel's connection at once, without a closing handshake: the handshake's
    /// own write would wait behind the same full buffers as the write that stalled.
    private let close: @Sendable () -> Void
    /// When the write under way began, in uptime nanoseconds; 0 while none is.
    private let writingSince = Atomic<UInt64>(0)
    private let aborted = Atomic(false)

    init(goAway: @escaping @Sendable () -> Void, close: @escaping @Sendable () -> Void) {
        self.goAway = goAway
        self.close = close
    }

    /// Runs `write`, marked as under way for ``SlowChannelSweep``.
    func writing(_ write: () async throws -> Void) async throws {
        beginWrite()
        defer { endWrite() }
        try await write()
    }

    /// Marks a write as under way, until ``endWrite()``, for a writer that does not await its writes.
    func beginWrite() {
        writingSince.store(max(1, DispatchTime.now().uptimeNanoseconds), ordering: .releasing)
    }

    /// The write marked by ``beginWrite()`` is done.
    func endWrite() {
        writingSince.store(0, ordering: .releasing)
    }

    func isStalled(longerThan limit: UInt64, now: UInt64) -> Bool {
        let since = writingSince.load(ordering: .acquiring)
        return since != 0 && now > since && now - since > limit
    }

    /// Closes the connection; `true` the first time.
    @discardableResult
    func abort() -> Bool {
        guard !aborted.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        close()
        return true
    }
}

/// Closes the change channels whose client stopped reading: a notice write that has waited
/// longer than ``SyncServer/Configuration/changeChannelWriteTimeout`` (the socket's buffers
/// are full) ends its connection, so a client that does not read holds neither a task nor
/// memory past that bound. The client reconnects when it reads again, and pulls.
///
/// One sweep of every channel each quarter of the timeout (at most a second apart) costs
/// an atomic load per channel, where a timer per write would cost a task per socket. It
/// runs inside ``DrainService``, so the server's services and their shutdown order are
/// those of a server without it.
struct SlowChannelSweep: Sendable {
    let channels: ChannelRegistry
    let timeout: Duration
    let metrics: ServerMetrics

    /// Sweeps until cancelled.
    func run() async {
        let period = min(timeout / 4, .seconds(1))
        while true {
            do { try await Task.sleep(for: period) } catch { return }
            for channel in channels.stalled(longerThan: timeout, now: DispatchTime.now().uptimeNanoseconds) where channel.abort() {
                metrics.slowChannelClosed()
            }
        }
    }
}

/// When the server accepts its own development tokens (``TokenAuthority``).
public enum DevelopmentTokens: String, Sendable, Hashable, CaseIterable {
    /// Accepted while no identity provider is configured, refused once one is: a server
    /// that takes an identity provider's tokens is taken to be in production.
    case withoutIssuers = "auto"
    /// Accepted beside the issuers' tokens. Each issuer then needs an identity prefix, and a
    /// development token may not carry an identity that starts with one, so the token secret
    /// and the admin key cannot mint a token for a provider's user.
    case on
    /// Refused, and never minted: only the identity providers' tokens are accepted.
    case off

    /// Whether development tokens are accepted beside `issuers`.
    func isOn(issuers: [TokenIssuer]) -> Bool {
        switch self {
        case .withoutIssuers: issuers.isEmpty
        case .on: true
        case .off: false
        }
    }
}

/// A server started with ``SyncServer/start()``.
public struct RunningSyncServer: Sendable {
    /// The bound address.
    public let host: String
    /// The bound port.
    public let port: Int
    let group: ServiceGroup
    let task: Task<Void, any Error>

    /// `http://host:port`.
    public var baseURL: String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)" }

    /// Shuts down gracefully, as on SIGTERM, and waits until the server has stopped.
    public func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}

/// The per-request context: what Hummingbird keeps, and the caller that
/// ``AuthenticationMiddleware`` verified.
struct SyncRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    /// The request's connection: a change channel closes it when its client stopped reading.
    let channel: any Channel
    /// What became of the request's bearer token.
    var bearer = Bearer.none

    /// The request's verified bearer token, or `nil` when it had none or one not verified.
    var caller: VerifiedToken? {
        if case .verified(let token) = bearer { return token }
        return nil
    }

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }

    /// The verified caller's claims; otherwise 401 `unauthorized` (the same answer whatever
    /// was wrong), or 503 `unavailable` with `Retry-After` when the token's issuer's keys
    /// could not be had.
    func requireClaims() throws -> Claims {
        switch bearer {
        case .verified(let token): return token.claims
        case .none, .refused: throw APIError.unauthorized
        case .unverifiable(let retryAfter): throw APIError.keysUnavailable(retryAfter: retryAfter)
        }
    }
}

/// What became of a request's `Authorization: Bearer` token.
enum Bearer: Sendable {
    /// The request carried none.
    case none
    /// It was verified.
    case verified(VerifiedToken)
    /// It was refused: no retry with it can pass.
    case refused
    /// It could not be checked now (``KeysUnavailable``).
    case unverifiable(retryAfter: Duration)
}

/// Verifies a request's `Authorization: Bearer` token, once, before any route sees it, and
/// puts the result on the context (``SyncRequestContext/caller``); a route that needs an
/// identity asks for it there. A missing or invalid token is not refused here — `/health`,
/// the operator routes (behind their admin key) and SigV4-signed Cognito calls need none —
/// but every route that needs one answers the same 401.
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    let verifier: TokenVerifier
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        // `GET /metrics` takes the metrics key as its bearer credential (``Routes/metrics(_:)``):
        // it is not a token, and a scrape must not count as a refused one.
        if let header = request.headers[.authorization], request.uri.path != "/metrics" {
            let parts = header.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                do {
                    context.bearer = .verified(try await verifier.verify(String(parts[1]).trimmingCharacters(in: .whitespaces)))
                    metrics.tokenVerified("verified")
                } catch let unavailable as KeysUnavailable {
                    context.bearer = .unverifiable(retryAfter: unavailable.retryAfter)
                    metrics.tokenVerified("unverifiable")
                } catch {
                    context.bearer = .refused
                    metrics.tokenVerified("refused")
                }
            }
        }
        return try await next(request, context)
    }
}

/// Counts each request answered and times it (``ServerMetrics``), by the matched route's
/// template — never the path, which holds ids — and the status, errors included.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            metrics.request(route: context.endpointPath ?? "NotFound", method: request.method, status: response.status.code,
                            duration: ContinuousClock.now - start)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.request(route: context.endpointPath ?? "NotFound", method: request.method, status: status,
                            duration: ContinuousClock.now - start)
            throw error
        }
    }
}

/// Logs one line per request: method, path (no query string: it can carry record values),
/// status and duration. Headers are never logged, so tokens and keys stay out of logs.
struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        var metadata: Logger.Metadata = ["method": "\(request.method.rawValue)", "path": "\(request.uri.path)"]
        if let id = context.logger[metadataKey: "hb.request.id"] { metadata["request"] = id }
        do {
            let response = try await next(request, context)
            metadata["status"] = "\(response.status.code)"
            metadata["ms"] = "\((ContinuousClock.now - start).milliseconds)"
            logger.info("request", metadata: metadata)
            return response
        } catch let error as any HTTPResponseError {
            metadata["status"] = "\(error.status.code)"
            metadata["ms"] = "\((ContinuousClock.now - start).milliseconds)"
            logger.info("request", metadata: metadata)
            throw error
        } catch {
            metadata["status"] = "500"
            metadata["error"] = "\(type(of: error))"
            logger.error("request failed", metadata: metadata)
            throw APIError.internalError
        }
    }
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
