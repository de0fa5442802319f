import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncService

/// The operator's console under `/admin` (Docs/Operating.md, "The console"): a page a browser
/// opens with the admin key. Signing in sets a cookie that names its expiry and a random
/// session id and carries an HMAC of both keyed by the admin key (``ConsoleSession``), so a
/// changed admin key ends every session; signing out records the id in the store
/// (``ConsoleRevocations``), so that cookie is refused from then on, after a restart and by
/// every instance over the store. Wrong keys are limited per client address and overall
/// (``SignInLimiter``), on the sign-in form as at every door that takes the admin key
/// (``checkKey(_:_:matches:)``). A script may send `X-Admin-Key` instead. Without an admin key
/// the console does not exist (404), as the other operator routes.
extension Routes {
    func addConsole(to router: Router<SyncRequestContext>) {
        router.get("admin") { request, context in try await console(request, context) }
        router.post("admin/login") { request, context in try await consoleLogin(request, context) }
        router.post("admin/logout") { request, context in try await consoleLogout(request, context) }
    }

    /// Who a console request comes from.
    enum ConsoleCaller {
        /// The admin key in `X-Admin-Key` (a script).
        case key
        /// A signed-in browser.
        case session(ConsoleSession)
        /// Neither: a wrong key, or no session that is signed, unexpired and not signed out.
        case nobody
        /// Its key or cookie was not checked: its client had too many wrong keys lately.
        case limited(Duration)
    }

    /// The admin key; 404 without one (the console does not exist).
    func consoleAdminKey() throws -> String {
        guard let adminKey = configuration.adminKey else { throw APIError(.notFound, .notFound, "the console is off: the server has no admin key") }
        return adminKey
    }

    /// The console, or the sign-in form (401) without a valid session or key.
    func console(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let adminKey = try consoleAdminKey()
        switch try await consoleCaller(request, context, adminKey: adminKey) {
        case .nobody: return Self.page(ConsolePage.login(message: nil), status: .unauthorized)
        case .limited(let delay): return Self.tooManyWrongKeysPage(delay)
        case .key, .session: break
        }
        let query = request.uri.queryParameters
        var explainer = ConsolePage.Explainer()
        explainer.identity = query["identity"].map(String.init) ?? ""
        explainer.table = query["table"].map(String.init) ?? ""
        explainer.id = query["id"].map(String.init) ?? ""
        explainer.roles = query["roles"].map(String.init) ?? ""
        explainer.claims = query["claims"].map(String.init) ?? ""
        if !explainer.identity.isEmpty || !explainer.table.isEmpty || !explainer.id.isEmpty {
            do {
                explainer.answer = try await service.explain(claims: try Self.consoleClaims(explainer), table: explainer.table, id: explainer.id)
            } catch let error as SyncError {
                explainer.error = error.message
            }
        }
        var tables: [TableRowCount] = [], tablesError: String?
        do { tables = try await service.tableRowCounts() } catch let error as SyncError { tablesError = error.message }
        let snapshot = ConsolePage.Snapshot(
            uptimeSeconds: (Timestamp.now().millisecondsSince1970 - server.started.millisecondsSince1970) / 1000,
            channels: server.channels.count, counters: MetricTotals.lines(server.metrics.exposition()),
            tables: tables, tablesError: tablesError, refusals: server.refusals.all, explainer: explainer)
        return Self.page(ConsolePage.dashboard(snapshot), status: .ok)
    }

    /// The explainer's claims: the identity, its comma-separated roles and `name=value` claims
    /// (a name given twice holds every value).
    static func consoleClaims(_ explainer: ConsolePage.Explainer) throws -> Claims {
        func list(_ text: String) -> [String] {
            text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        var values: [String: [String]] = [:]
        for pair in list(explainer.claims) {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw SyncError(.invalidValue, "a claim is name=value, not '\(pair)'") }
            values[parts[0], default: []].append(parts[1])
        }
        return Claims(identity: try Identity(explainer.identity), roles: Set(list(explainer.roles)), values: values)
    }

    /// `POST /admin/login` with the form's `key` (or `X-Admin-Key`): the session cookie and a
    /// redirection to the console; the form again with 401 for a wrong key, or with 429 and
    /// `Retry-After`, the key unchecked, while its client address has had too many wrong keys
    /// (``SyncServer/Configuration/consoleSignIns``), here or at any other door. A request
    /// that offers no key is not a guess, and is not counted. A right key forgets its
    /// address's failures.
    func consoleLogin(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let adminKey = try consoleAdminKey()
        let form = String(buffer: try await readBody(request))
        let offered = request.headers[Self.adminKeyHeader] ?? ConsoleForm.key(in: form)
        guard let given = offered, !given.isEmpty else {
            return Self.page(ConsolePage.login(message: "That is not the admin key."), status: .unauthorized)
        }
        switch checkKey(given, against: adminKey, request, context) {
        case .limited(let delay): return Self.tooManyWrongKeysPage(delay)
        case .wrong: return Self.page(ConsolePage.login(message: "That is not the admin key."), status: .unauthorized)
        case .right: server.console.signIns.succeeded(clientAddress(request, context))
        }
        let session = ConsoleSession.start(now: Timestamp.now().millisecondsSince1970 / 1000)
        var headers = HTTPFields()
        headers[.location] = "/admin"
        headers[.setCookie] = session.setCookie(adminKey: adminKey, secure: consoleCookieIsSecure(request, context))
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    /// `POST /admin/logout`: every session the request's cookies carry is recorded as signed
    /// out, and the browser told to forget its cookie. Needs a session or the admin key.
    func consoleLogout(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let adminKey = try consoleAdminKey()
        switch try await consoleCaller(request, context, adminKey: adminKey) {
        case .nobody: return Self.page(ConsolePage.login(message: nil), status: .unauthorized)
        case .limited(let delay): return Self.tooManyWrongKeysPage(delay)
        case .key, .session: break
        }
        let store = service.store
        for session in ConsoleSession.sessions(in: request.headers, adminKey: adminKey, now: Timestamp.now().millisecondsSince1970 / 1000) {
            try await call { try await server.console.revocations.revoke(session, in: store) }
        }
        return Self.page(ConsolePage.login(message: "Signed out."), status: .ok,
                         headers: [.setCookie: ConsoleSession.clearing(secure: consoleCookieIsSecure(request, context))])
    }

    /// The caller: the admin key in `X-Admin-Key` (which, when present, decides alone), or a
    /// session cookie that is signed, unexpired and not signed out. Both are checked behind the
    /// limit on wrong keys (``checkKey(_:_:matches:)``): a cookie's HMAC is keyed by the admin
    /// key, so a cookie of the right form that does not match counts as a wrong key, as an
    /// empty `X-Admin-Key` or a request with neither does not. The store is read only for a
    /// cookie whose HMAC matched, so a request without the key never reaches it.
    func consoleCaller(_ request: Request, _ context: SyncRequestContext, adminKey: String) async throws -> ConsoleCaller {
        if let given = request.headers[Self.adminKeyHeader] {
            guard !given.isEmpty else { return .nobody }
            switch checkKey(given, against: adminKey, request, context) {
            case .right: return .key
            case .wrong: return .nobody
            case .limited(let delay): return .limited(delay)
            }
        }
        let offered = ConsoleSession.offered(in: request.headers, now: Timestamp.now().millisecondsSince1970 / 1000)
        guard !offered.isEmpty else { return .nobody }
        var signed: [ConsoleSession] = []
        switch checkKey(request, context, matches: {
            signed = offered.filter { $0.session.isSigned($0.signature, adminKey: adminKey) }.map { $0.session }
            return !signed.isEmpty
        }) {
        case .right: break
        case .wrong: return .nobody
        case .limited(let delay): return .limited(delay)
        }
        let store = service.store
        for session in signed {
            let revoked = try await call { try await server.console.revocations.isRevoked(session, in: store) }
            if !revoked { return .session(session) }
        }
        return .nobody
    }

    /// The sign-in form with 429 and `Retry-After`: the key or cookie was not checked.
    static func tooManyWrongKeysPage(_ delay: Duration) -> Response {
        let seconds = retryAfterSeconds(delay)
        return page(ConsolePage.login(message: "Too many failed sign-ins: try again in \(seconds) s."),
                    status: .tooManyRequests, headers: [.retryAfter: "\(seconds)"])
    }

    /// Whether the session cookie gets `Secure` (``SyncServer/Configuration/consoleSecureCookie``):
    /// `auto` sets it when the request came over TLS (which this server, terminating no TLS,
    /// never sees itself), or from a trusted proxy whose `X-Forwarded-Proto` says `https`: its
    /// last value, the one the proxy that connected wrote, as `X-Forwarded-For` is read from
    /// the right. A value further left was written by whoever sent the request to that proxy.
    func consoleCookieIsSecure(_ request: Request, _ context: SyncRequestContext) -> Bool {
        Self.consoleCookieIsSecure(configuration.consoleSecureCookie, scheme: request.head.scheme,
                                   fromTrustedProxy: configuration.trustedProxies.trusts(context.channel.remoteAddress),
                                   forwardedProto: request.headers[values: TrustedProxies.forwardedProtoHeader])
    }

    /// ``consoleCookieIsSecure(_:_:)`` for a request that came with `scheme` (`https` over
    /// TLS), from a trusted proxy or not, with these `X-Forwarded-Proto` fields.
    static func consoleCookieIsSecure(_ policy: ConsoleSecureCookie, scheme: String?, fromTrustedProxy: Bool,
                                      forwardedProto: [String]) -> Bool {
        switch policy {
        case .always: return true
        case .never: return false
        case .auto:
            if scheme?.lowercased() == "https" { return true }
            guard fromTrustedProxy else { return false }
            let proto = forwardedProto.last?.split(separator: ",", omittingEmptySubsequences: false).last?
                .trimmingCharacters(in: .whitespaces).lowercased()
            return proto == "https"
        }
    }

    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!

    /// An HTML answer that no cache keeps, no frame embeds and no script runs in.
    static func page(_ html: String, status: HTTPResponse.Status, headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
        headers[Self.referrerPolicy] = "no-referrer"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}
