import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncService

/// The operator's console under `/admin` (Docs/Operating.md, "The console"): a page a browser
/// opens with the admin key. Signing in sets a cookie that names its expiry and carries an
/// HMAC of it keyed by the admin key, so the server keeps no session, and a changed admin key
/// ends every session. A script may send `X-Admin-Key` instead. Without an admin key the
/// console does not exist (404), as the other operator routes.
extension Routes {
    static let consoleCookie = "osync_console"
    /// How long a sign-in lasts.
    static let consoleSession: Int64 = 12 * 3600

    func addConsole(to router: Router<SyncRequestContext>) {
        router.get("admin") { request, _ in try await console(request) }
        router.post("admin/login") { request, _ in try await consoleLogin(request) }
        router.post("admin/logout") { request, _ in
            guard let adminKey = configuration.adminKey else { throw APIError(.notFound, "notFound", "the console is off: the server has no admin key") }
            guard consoleAuthorized(request, adminKey: adminKey) else { return Self.page(ConsolePage.login(message: nil), status: .unauthorized) }
            return Self.page(ConsolePage.login(message: "Signed out."), status: .ok,
                             cookie: "\(Self.consoleCookie)=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict")
        }
    }

    /// The console, or the sign-in form (401) without a valid session or key.
    func console(_ request: Request) async throws -> Response {
        guard let adminKey = configuration.adminKey else { throw APIError(.notFound, "notFound", "the console is off: the server has no admin key") }
        guard consoleAuthorized(request, adminKey: adminKey) else {
            return Self.page(ConsolePage.login(message: nil), status: .unauthorized)
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
    /// redirection to the console, or the form again (401).
    func consoleLogin(_ request: Request) async throws -> Response {
        guard let adminKey = configuration.adminKey else { throw APIError(.notFound, "notFound", "the console is off: the server has no admin key") }
        let form = String(buffer: try await readBody(request))
        let given = request.headers[Self.adminKeyHeader] ?? form.split(separator: "&").compactMap { pair -> String? in
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0] == "key" else { return nil }
            return String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }.first
        guard let given, constantTimeEqual(Array(given.utf8), Array(adminKey.utf8)) else {
            return Self.page(ConsolePage.login(message: "That is not the admin key."), status: .unauthorized)
        }
        let expiry = Timestamp.now().millisecondsSince1970 / 1000 + Self.consoleSession
        let cookie = "\(Self.consoleCookie)=\(expiry).\(Self.consoleSignature(expiry, adminKey: adminKey)); Path=/admin; "
            + "Max-Age=\(Self.consoleSession); HttpOnly; SameSite=Strict"
        var headers = HTTPFields()
        headers[.location] = "/admin"
        headers[.setCookie] = cookie
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    /// Whether the request carries the admin key or a console cookie that has not expired and
    /// whose HMAC matches.
    func consoleAuthorized(_ request: Request, adminKey: String) -> Bool {
        if let given = request.headers[Self.adminKeyHeader] { return constantTimeEqual(Array(given.utf8), Array(adminKey.utf8)) }
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0] == Self.consoleCookie else { continue }
                let token = parts[1].split(separator: ".", maxSplits: 1)
                guard token.count == 2, let expiry = Int64(token[0]),
                      expiry > Timestamp.now().millisecondsSince1970 / 1000 else { continue }
                if constantTimeEqual(Array(token[1].utf8), Array(Self.consoleSignature(expiry, adminKey: adminKey).utf8)) { return true }
            }
        }
        return false
    }

    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!

    static func consoleSignature(_ expiry: Int64, adminKey: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array("offline-sync console \(expiry)".utf8),
                                                  using: SymmetricKey(data: Array(adminKey.utf8)))
        return mac.map { String(format: "%02x", $0) }.joined()
    }

    /// An HTML answer that no cache keeps, no frame embeds and no script runs in.
    static func page(_ html: String, status: HTTPResponse.Status, cookie: String? = nil) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
        headers[Self.referrerPolicy] = "no-referrer"
        if let cookie { headers[.setCookie] = cookie }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}
