import Foundation
import Hummingbird
import HTTPTypes
import HummingbirdWebSocket
import Logging
import NIOCore
import OfflineSync
import OfflineSyncService
import OfflineSyncWire

/// The server's route handlers and the helpers they share.
struct Routes: Sendable {
    let server: SyncServer
    var service: OfflineSyncService { server.service }
    var configuration: SyncServer.Configuration { server.configuration }
    var logger: Logger { server.configuration.logger }

    // MARK: Native API

    func addNative(to router: Router<SyncRequestContext>) {
        router.get("health") { _, _ in
            Self.json(.object([("status", .string("ok"))]))
        }
        router.get("ready") { _, _ in await ready() }
        router.get("metrics") { request, context in try metrics(request, context) }
        router.post("v1/push") { request, context in try await push(request, context) }
        router.post("v1/pull") { request, context in try await pull(request, context) }
        if configuration.binaryPush {
            router.post("v2/push") { request, context in try await pushBinary(request, context) }
        }
        if configuration.streamsPages {
            router.post("v2/pull") { request, context in try await pullStream(request, context) }
        }
        router.post("v1/admin/tokens") { request, context in try await mintToken(request, context) }
        router.post("v1/admin/prune") { request, context in try await prune(request, context) }
        router.post("v1/admin/prune-attachments") { request, context in
            try requireAdmin(request, context)
            let removed = try await call { try await service.pruneAttachments() }
            return Self.json(.object([("removed", .number(String(removed)))]))
        }
        router.post("v1/admin/merge-identities") { request, context in try await mergeIdentities(request, context) }
        router.post("v1/admin/explain") { request, context in try await explain(request, context) }
        router.get("v1/changes") { request, context -> Response in
            _ = try context.requireClaims()
            if Self.acceptsEventStream(request.headers) { return try eventStream(request, context) }
            throw APIError(.upgradeRequired, .upgradeRequired,
                           "/v1/changes is a WebSocket (send an upgrade request) or an event stream (Accept: text/event-stream)")
        }
    }

    func push(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let claims = try context.requireClaims()
        let body = try await readJSON(request)
        guard case .object = body, case .array(let items)? = body["operations"] else {
            throw APIError(.badRequest, .invalidRequest, "the body must be an object with an 'operations' array")
        }
        try checkBatchSize(items.count)
        let operations = try await decode { try items.enumerated().map { try Wire.operation($1, path: "operations[\($0)]") } }
        let report = try await apply(operations, claims: claims, request: request)
        guard Self.prefersMinimal(request.headers) else { return Self.json(bytes: Wire.encode(results: report.results)) }
        return Self.json(bytes: Wire.encode(results: report.results, minimalFor: operations),
                         headers: [Self.preferenceAppliedHeader: "return=minimal"])
    }

    /// Refuses a push of more operations than ``SyncServer/Configuration/maxBatchSize`` (413).
    func checkBatchSize(_ count: Int) throws {
        guard count <= configuration.maxBatchSize else {
            throw APIError(.contentTooLarge, .batchTooLarge,
                           "a push may carry at most \(configuration.maxBatchSize) operations; this one has \(count)")
        }
    }

    /// What both push routes do with a decoded batch: refuse an operation id sent twice, apply
    /// the batch and announce what it changed.
    func apply(_ operations: [PushOperation], claims: Claims, request: Request) async throws -> OfflineSyncService.PushReport {
        // Compared by bytes, as the outcomes are stored: two ids that differ only in Unicode
        // normalisation are two operations.
        var seen = Set<ExactString>()
        for operation in operations where !seen.insert(ExactString(operation.id)).inserted {
            throw APIError(.badRequest, .invalidRequest, "operation id '\(operation.id)' appears twice in one push")
        }
        let report = try await pushed(claims: claims, operations)
        let origin = request.headers[Self.clientHeader].flatMap(Self.clientId)
        await announce(identity: claims.identity, operations: operations, report: report, origin: origin)
        return report
    }

    /// Whether the request carries the `return=minimal` preference (RFC 7240), in any of its
    /// `Prefer` fields and among other preferences: the client rebuilds an applied insert's
    /// or update's record from what it sent, so the answer leaves it out.
    static func prefersMinimal(_ headers: HTTPFields) -> Bool {
        headers[values: preferHeader].contains { field in
            field.split(separator: ",").contains { preference in
                preference.split(separator: ";").first.map {
                    $0.trimmingCharacters(in: .whitespaces).lowercased() == "return=minimal"
                } ?? false
            }
        }
    }

    static let preferHeader = HTTPField.Name("Prefer")!
    static let preferenceAppliedHeader = HTTPField.Name("Preference-Applied")!

    func pull(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let claims = try context.requireClaims()
        let body = try await readJSON(request)
        let pull = try await decode { try Wire.pullRequest(body) }
        guard pull.limit <= configuration.maxPageSize else {
            throw APIError(.badRequest, .pageSizeExceeded, "'limit' may be at most \(configuration.maxPageSize)")
        }
        let page = try await pulled(claims: claims, pull)
        return Self.json(bytes: Wire.encode(page))
    }

    /// Announces the tables a push changed: to the writer for its own rows; for shared tables
    /// to every identity whose own log changed (and to no other), and once to each large
    /// group whose log changed (its members' connections listen to it); once for a table an
    /// `everyone` grant lets callers read (the connections whose claims meet the grant listen);
    /// and to each identity whose large groups changed, so its connections listen to the
    /// right groups.
    ///
    /// With `origin` (the pushing client's id), the notices carry it, so that client's own
    /// channel does not make it pull what it just pushed — unless the push wrote a membership
    /// or `owner_of` table, which can change the writer's own view beyond the rows it wrote.
    func announce(identity: Identity, operations: [PushOperation], report: OfflineSyncService.PushReport,
                  origin: String? = nil) async {
        var notices = Set<ChangeNotice>()
        // The tables with an applied operation, each once (by exact bytes), found without
        // hashing a name per operation when the batch keeps to one table, as most do.
        var applied: [String] = []
        var seen = Set<ExactString>()
        for (result, operation) in zip(report.results, operations) {
            guard case .applied = result.outcome else { continue }
            if let last = applied.last, ExactString.sameBytes(last, operation.table) { continue }
            if seen.insert(ExactString(operation.table)).inserted { applied.append(operation.table) }
        }
        for table in applied where !service.isShared(table) {
            notices.insert(ChangeNotice(identity: identity.text, table: table))
        }
        for (table, identities) in report.viewsChanged {
            for reader in identities { notices.insert(ChangeNotice(identity: reader.text, table: table)) }
        }
        for (table, groups) in report.groupsChanged {
            for group in groups { notices.insert(ChangeNotice(group: group, table: table)) }
        }
        let everyoneReads = service.tablesWithEveryoneGrants
        for table in applied where everyoneReads.contains(table) {
            notices.insert(ChangeNotice(everyoneReading: table))
        }
        for (reader, groups) in report.regrouped {
            notices.insert(ChangeNotice(groupsChangedFor: reader.text))
            for group in groups { notices.insert(ChangeNotice(group: group, member: reader.text)) }
        }
        let deciding = service.rules.viewDecidingTables
        if let origin, !operations.contains(where: { deciding.contains($0.table) }) {
            notices = Set(notices.map { notice in
                var marked = notice
                if case .table = notice.change { marked.origin = origin }
                return marked
            })
        }
        if !notices.isEmpty {
            await server.feed.publish(notices.sorted { $0.encoded < $1.encoded })
        }
    }

    // MARK: Operator routes

    func mintToken(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        try requireAdmin(request, context)
        guard server.verifier.acceptsDevelopmentTokens else {
            throw APIError(.forbidden, .forbidden, "development tokens are off on this server")
        }
        let body = try await readJSON(request)
        guard case .string(let identity)? = body["identity"] else {
            throw APIError(.badRequest, .invalidRequest, "the body needs an 'identity' string")
        }
        try await decode { try server.verifier.checkDevelopmentIdentity(identity) }
        var lifetime: Int64 = 24 * 3600
        if let value = body["lifetimeSeconds"] {
            guard case .number(let text) = value, let seconds = Int64(text), seconds > 0, seconds <= 366 * 24 * 3600 else {
                throw APIError(.badRequest, .invalidRequest, "'lifetimeSeconds' must be a whole number from 1 to 31622400")
            }
            lifetime = seconds
        }
        var roles: Set<String> = []
        if let value = body["roles"] {
            guard case .array(let items) = value else { throw APIError(.badRequest, .invalidRequest, "'roles' must be an array of strings") }
            for item in items {
                guard case .string(let role) = item else { throw APIError(.badRequest, .invalidRequest, "'roles' must be an array of strings") }
                roles.insert(role)
            }
        }
        let token = try await decode { try await server.tokens.mint(identity: identity, roles: roles, lifetime: .seconds(lifetime)) }
        return Self.json(.object([("token", .string(token))]))
    }

    func prune(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        try requireAdmin(request, context)
        let body = try await readJSON(request)
        // At most 100 years, so the cutoff's arithmetic cannot overflow.
        guard case .number(let text)? = body["olderThanSeconds"], let seconds = Int64(text), (0...3_155_760_000).contains(seconds) else {
            throw APIError(.badRequest, .invalidRequest, "the body needs 'olderThanSeconds', a whole number of seconds up to 100 years")
        }
        let cutoff = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 - seconds * 1000)
        let removed = try await call { try await service.pruneOperationOutcomes(olderThan: cutoff) }
        return Self.json(.object([("removed", .number(String(removed)))]))
    }

    /// Merges one identity's datasets into another's, as an identity provider does when an
    /// unauthenticated identity signs in: `{"identityPoolId", "from", "into"}` → `{"datasets": [names]}`.
    func mergeIdentities(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        try requireAdmin(request, context)
        let body = try await readJSON(request)
        guard case .string(let pool)? = body["identityPoolId"], case .string(let from)? = body["from"],
              case .string(let into)? = body["into"] else {
            throw APIError(.badRequest, .invalidRequest, "the body needs 'identityPoolId', 'from' and 'into' strings")
        }
        let names = try await call { try await server.datasets.mergeIdentity(pool: pool, from: from, into: into, caller: "admin") }
        return Self.json(.object([("datasets", .array(names.map(JSON.string)))]))
    }

    /// Why the rules let an identity read a row and make each change to it, or why not:
    /// `{"identity", "table", "id", "roles"?: [..], "claims"?: {name: [values]}}` →
    /// ``OfflineSyncService/RuleExplanation`` as JSON. The claims are the ones a token of that
    /// identity would carry; the answer names what the rules compare, so only the admin key asks.
    func explain(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        try requireAdmin(request, context)
        let body = try await readJSON(request)
        guard case .string(let identity)? = body["identity"], case .string(let table)? = body["table"],
              case .string(let id)? = body["id"] else {
            throw APIError(.badRequest, .invalidRequest, "the body needs 'identity', 'table' and 'id' strings")
        }
        func strings(_ value: JSON?, _ name: String) throws -> [String] {
            guard let value else { return [] }
            guard case .array(let items) = value else { throw APIError(.badRequest, .invalidRequest, "'\(name)' must be an array of strings") }
            return try items.map { item in
                guard case .string(let text) = item else { throw APIError(.badRequest, .invalidRequest, "'\(name)' must be an array of strings") }
                return text
            }
        }
        var values: [String: [String]] = [:]
        if let claims = body["claims"] {
            guard case .object(let pairs) = claims else {
                throw APIError(.badRequest, .invalidRequest, "'claims' must be an object of string arrays")
            }
            for (name, value) in pairs { values[name] = try strings(value, "claims.\(name)") }
        }
        let claims = Claims(identity: try await decode { try Identity(identity) }, roles: Set(try strings(body["roles"], "roles")),
                            values: values)
        let explanation = try await call { try await service.explain(claims: claims, table: table, id: id) }
        return Self.json(Self.json(explanation))
    }

    static func json(_ explanation: RuleExplanation) -> JSON {
        .object([
            ("identity", .string(explanation.identity)), ("table", .string(explanation.table)), ("id", .string(explanation.id)),
            ("storage", .string(explanation.storage)), ("exists", .bool(explanation.exists)), ("deleted", .bool(explanation.deleted)),
            ("decisions", .array(explanation.decisions.map { decision in
                .object([
                    ("operation", .string(decision.operation)), ("allowed", .bool(decision.allowed)),
                    ("grants", .array(decision.grants.map { check in
                        .object([("grant", .string(check.grant)), ("admits", .bool(check.admits)), ("reason", .string(check.reason))])
                    })),
                ])
            })),
        ])
    }

    // MARK: Notifications

    func addWebSocket(to router: Router<SyncRequestContext>) {
        // A request that may not upgrade (no valid token) falls through to the HTTP router,
        // whose `GET /v1/changes` answers 401 (or 426 to a valid token without an upgrade).
        router.ws("v1/changes", shouldUpgrade: { request, context in
            // A handshake that gets here malformed (a bad key, no `Connection: upgrade`) is
            // refused, and answered 400; accepted, it would make the upgrader drop the
            // connection without any answer. (One with no key or another version never gets
            // here: SwiftNIO's upgrader drops it first.)
            guard Self.isWellFormedHandshake(request.headers), context.caller != nil else { return .dontUpgrade }
            return .upgrade([:])
        }, onUpgrade: { inbound, outbound, context in
            guard let caller = context.requestContext.caller else {
                try await outbound.close(.policyViolation, reason: "unauthorized")
                return
            }
            let relay = await NoticeRelay.open(routes: self, caller: caller, request: context.request,
                                              connection: context.requestContext.channel)
            // Closed before the handler writes its close frame, which no notice may follow.
            defer { relay.close() }
            // Opened after the drain ended (the listener stays open while the channels go
            // away): never subscribed, sent on at once. A client told "subscribed" here would
            // catch up against a server that is about to stop and miss what another instance
            // commits before it reconnects there.
            if relay.isGoingAway {
                try? await outbound.close(.goingAway, reason: "server shutting down")
                return
            }
            // Its groups could not be read: never subscribed (the client, not yet caught up,
            // tries again after its backoff rather than at once).
            if relay.hasFailed {
                try? await outbound.close(.unexpectedServerError, reason: Self.groupsUnreadableCloseReason)
                return
            }
            try await outbound.writeTextMessage(NoticeRelay.subscribed)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Read (and ignore) what the client sends, until it closes.
                    for try await _ in inbound {}
                }
                group.addTask {
                    switch await SocketNoticeWriter.deliver(relay, into: context.requestContext.channel) {
                    case .closed:
                        return
                    case .tokenExpired:
                        // The token's end is the connection's: the client reconnects with a fresh one.
                        // No notice frame may follow the close frame.
                        relay.close()
                        try await outbound.close(.unknown(Self.tokenExpiredCloseCode), reason: "token expired")
                    case .failed:
                        // The channel no longer hears all it should: the client reconnects,
                        // subscribes afresh and catches up.
                        relay.close()
                        try await outbound.close(.unexpectedServerError, reason: Self.groupsUnreadableCloseReason)
                    }
                }
                try await group.next()
                group.cancelAll()
            }
            // The drain ended (``DrainService``): 1001, and the client reconnects at once
            // (behind a balancer, to another instance) without reporting a disconnection.
            if relay.isGoingAway { try? await outbound.close(.goingAway, reason: "server shutting down") }
        })
    }

    /// The close code of a change channel whose token expired (4000–4999 are RFC 6455's
    /// private-use codes; 4401 echoes HTTP's 401). The client reconnects, asking its token
    /// provider for a fresh token.
    static let tokenExpiredCloseCode: UInt16 = 4401

    /// The reason of a change channel closed with 1011 ("unexpected condition") because its
    /// caller's groups could not be read. Any close but 1001 makes a client report a
    /// disconnection, reconnect after its backoff and catch up.
    static let groupsUnreadableCloseReason = "groups unreadable"

    /// RFC 6455's opening handshake: `Connection: upgrade`, `Sec-WebSocket-Version: 13` and a
    /// `Sec-WebSocket-Key` that is 16 bytes in base64.
    static func isWellFormedHandshake(_ headers: HTTPFields) -> Bool {
        guard let connection = headers[.connection],
              connection.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces).lowercased() == "upgrade" }),
              headers[.secWebSocketVersion]?.trimmingCharacters(in: .whitespaces) == "13",
              let key = headers[.secWebSocketKey]?.trimmingCharacters(in: .whitespaces),
              let decoded = Data(base64Encoded: key), decoded.count == 16 else { return false }
        return true
    }

    // MARK: Helpers

    /// `GET /ready`, the readiness probe (no credentials): 200 while the server takes new
    /// work; 503 once a shutdown began (``SyncServer/Configuration/drainPeriod``), and while
    /// its store does not answer a read within ``readinessDeadline``. The answer comes by the
    /// deadline even when the store hangs, and probes share the store read under way
    /// (``ReadinessProbe``: a second one only beside a read stuck for five deadlines, never a
    /// third), so probes of a hung store neither hang nor pile up, and a read stuck for good
    /// does not keep the answer at 503 once the store recovered.
    func ready() async -> Response {
        if server.draining.isSet {
            return Self.json(.object([("status", .string("draining"))]), status: .serviceUnavailable)
        }
        let store = service.store
        let outcome = await server.readiness.check(within: Self.readinessDeadline) {
            try await store.read { txn in _ = try txn.tables() }
        }
        guard outcome == .answered else {
            return Self.json(.object([("status", .string("store unavailable"))]), status: .serviceUnavailable)
        }
        return Self.json(.object([("status", .string("ready"))]))
    }

    /// How long `GET /ready` waits for the store's answer before it answers 503.
    static let readinessDeadline: Duration = .seconds(2)

    /// `GET /metrics`: ``ServerMetrics`` in Prometheus's text format, for the metrics key as
    /// `Authorization: Bearer <key>` (``SyncServer/Configuration/metricsKey``) or the admin key
    /// in `X-Admin-Key` (never as a bearer token), each behind the limit on wrong keys
    /// (``requireMetricsReader(_:_:)``).
    func metrics(_ request: Request, _ context: SyncRequestContext) throws -> Response {
        try requireMetricsReader(request, context)
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: server.metrics.exposition())))
    }

    static let adminKeyHeader = HTTPField.Name("X-Admin-Key")!

    /// The header naming the pushing client (``clientId(_:)``), the same id its change
    /// channel gives as `?client=`.
    static let clientHeader = HTTPField.Name("X-OfflineSync-Client")!

    /// A client id as sent: 1 to 64 letters, digits, `-` or `_`; anything else is ignored.
    static func clientId(_ text: String) -> String? {
        guard (1...64).contains(text.utf8.count),
              text.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (48...57).contains($0)
                  || (65...90).contains($0) || (97...122).contains($0) }) else { return nil }
        return text
    }


    /// Collects the body up to the configured limit (413 `bodyTooLarge` beyond it).
    func readBody(_ request: Request) async throws -> ByteBuffer {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > configuration.maxBodyBytes {
            throw bodyTooLarge
        }
        do {
            return try await request.body.collect(upTo: configuration.maxBodyBytes)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw bodyTooLarge
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The client stopped sending before its announced body was complete.
            throw APIError(.badRequest, .incompleteBody, "the request body ended before its announced length")
        }
    }

    var bodyTooLarge: APIError {
        APIError(.contentTooLarge, .bodyTooLarge, "the request body is larger than \(configuration.maxBodyBytes) bytes")
    }

    /// Reads a JSON body (400 `invalidJSON` with the reason when it is not JSON).
    func readJSON(_ request: Request) async throws -> JSON {
        let buffer = try await readBody(request)
        do {
            return try buffer.withUnsafeReadableBytes { try JSON.parse($0) }
        } catch let error as SyncError {
            throw APIError(.badRequest, .invalidJSON, error.message)
        }
    }

    /// Runs a decoding step, answering its ``SyncError`` with 400 `invalidRequest`.
    func decode<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as SyncError {
            throw APIError(.badRequest, .invalidRequest, error.message)
        }
    }

    /// Applies a push through the service (``call(_:)``) and counts it in ``SyncServer/metrics``.
    func pushed(claims: Claims, _ operations: [PushOperation]) async throws -> OfflineSyncService.PushReport {
        let start = ContinuousClock.now
        let report = try await call { try await service.pushReporting(claims: claims, operations) }
        server.metrics.push(operations, report.results, duration: ContinuousClock.now - start)
        server.refusals.record(identity: claims.identity.text, operations, report.results)
        if !report.groupChangesFailed.isEmpty {
            // Counts and codes only: a group's key holds values of the rows that name it.
            let codes = Set(report.groupChangesFailed.values.map(\.description)).sorted().joined(separator: ",")
            logger.warning("a group's change of mode after a push failed; the next push of the group tries again",
                           metadata: ["groups": "\(report.groupChangesFailed.count)", "codes": "\(codes)"])
        }
        return report
    }

    /// Reads a pull page through the service (``call(_:)``) and counts it in ``SyncServer/metrics``.
    func pulled(claims: Claims, _ request: PullRequest) async throws -> PullPage {
        let start = ContinuousClock.now
        let page = try await call { try await service.pull(claims: claims, request) }
        server.metrics.pull(page, duration: ContinuousClock.now - start)
        return page
    }

    /// Runs a service call, answering its ``SyncError`` with the matching status (and logging
    /// failures that are the server's, without their values).
    func call<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as SyncError {
            let answer = APIError.from(error)
            if answer.status.code >= 500 {
                logger.error("service call failed", metadata: ["code": "\(error.code)"])
            }
            throw answer
        }
    }

    static func json(_ document: JSON, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        json(bytes: document.encoded, status: status, headers: headers)
    }

    static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
