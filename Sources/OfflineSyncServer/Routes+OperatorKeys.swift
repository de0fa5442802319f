import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

// The admin key and the metrics key are compared in one place, ``Routes/checkKey(_:_:matches:)``,
// behind one limit on wrong keys per client address and overall (``SignInLimiter``, with
// ``SyncServer/Configuration/consoleSignIns``): the console's sign-in form, `X-Admin-Key` on
// the operator routes, `/metrics` and the console, a console session cookie (its HMAC is keyed
// by the admin key, so checking one answers a guess at the key) and the metrics key. A door
// that had its own comparison could be used to guess without limit.

extension Routes {
    /// What became of a key a request offered.
    enum KeyCheck {
        /// It is the key.
        case right
        /// It is not: counted against the client's address.
        case wrong
        /// Not checked: the client's address had too many wrong keys lately (or all addresses
        /// had, and this one too); a key is checked again after this long.
        case limited(Duration)
    }

    /// The address a request is counted by: its connection's peer, or the client a trusted
    /// proxy names (``TrustedProxies/client(peer:forwardedFor:)``).
    func clientAddress(_ request: Request, _ context: SyncRequestContext) -> [UInt8] {
        configuration.trustedProxies.client(peer: context.channel.remoteAddress,
                                            forwardedFor: request.headers[values: TrustedProxies.forwardedForHeader])
    }

    /// Checks a key the request offered: first whether its client may try now (a limited
    /// client's key is not compared at all), then `matches`, a constant-time comparison with
    /// the expected key; a wrong key counts against the client's address. Each refusal is
    /// counted in `offline_sync_console_signin_refused_total`. Call it only for a request that
    /// offers a key: one that offers none is no guess.
    func checkKey(_ request: Request, _ context: SyncRequestContext, matches: () -> Bool) -> KeyCheck {
        let client = clientAddress(request, context)
        let limits = configuration.consoleSignIns
        if let delay = server.console.signIns.wait(for: client, limits: limits) {
            server.metrics.consoleSignInRefused(.rateLimited)
            return .limited(delay)
        }
        guard matches() else {
            server.console.signIns.failed(client, limits: limits)
            server.metrics.consoleSignInRefused(.wrongKey)
            return .wrong
        }
        return .right
    }

    /// ``checkKey(_:_:matches:)`` for `given` against `expected`, compared in constant time.
    func checkKey(_ given: String, against expected: String, _ request: Request, _ context: SyncRequestContext) -> KeyCheck {
        checkKey(request, context) { constantTimeEqual(Array(given.utf8), Array(expected.utf8)) }
    }

    /// Whole seconds to put in `Retry-After` for `delay`, rounded up, at least 1.
    static func retryAfterSeconds(_ delay: Duration) -> Int64 {
        max(1, delay.components.seconds + (delay.components.attoseconds > 0 ? 1 : 0))
    }

    /// The answer to a key that was not checked because its client had too many wrong ones
    /// lately: 429 `unavailable` with `Retry-After`.
    static func tooManyWrongKeys(_ delay: Duration) -> APIError {
        let seconds = retryAfterSeconds(delay)
        return APIError(.tooManyRequests, .unavailable, "too many wrong keys from this address lately; the key was not checked: retry in \(seconds) s",
                        headers: [.retryAfter: "\(seconds)"])
    }

    /// Checks `X-Admin-Key` (``checkKey(_:against:_:_:)``): 401 without detail for a missing,
    /// empty or wrong key, or when the server has no admin key; 429 with `Retry-After` while
    /// the client may not try. A missing or empty key is not counted.
    func requireAdmin(_ request: Request, _ context: SyncRequestContext) throws {
        let refused = APIError(.unauthorized, .unauthorized, "missing or wrong admin key")
        guard let expected = configuration.adminKey, let given = request.headers[Self.adminKeyHeader], !given.isEmpty else {
            throw refused
        }
        switch checkKey(given, against: expected, request, context) {
        case .right: return
        case .wrong: throw refused
        case .limited(let delay): throw Self.tooManyWrongKeys(delay)
        }
    }

    /// Lets `GET /metrics` through for the metrics key as `Authorization: Bearer <key>`
    /// (``SyncServer/Configuration/metricsKey``) or the admin key in `X-Admin-Key` (never as a
    /// bearer token), each through ``checkKey(_:against:_:_:)``. A bearer credential counts as
    /// a guess only on a server with a metrics key: without one there is nothing to guess.
    func requireMetricsReader(_ request: Request, _ context: SyncRequestContext) throws {
        if let expected = configuration.metricsKey, !expected.isEmpty, let offered = Self.bearerCredential(request.headers), !offered.isEmpty {
            switch checkKey(offered, against: expected, request, context) {
            case .right: return
            case .limited(let delay): throw Self.tooManyWrongKeys(delay)
            case .wrong: break
            }
        }
        try requireAdmin(request, context)
    }

    /// The credential of an `Authorization: Bearer <credential>` field, trimmed; `nil` for
    /// another scheme or none.
    static func bearerCredential(_ headers: HTTPFields) -> String? {
        guard let header = headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }
}
