import Crypto
import Foundation
import HTTPTypes

/// When the console's session cookie carries `Secure`, so a browser sends it over HTTPS only.
public enum ConsoleSecureCookie: String, Sendable, Hashable, CaseIterable {
    /// When the sign-in arrived over TLS, or from a trusted proxy (``TrustedProxies``) that
    /// says `X-Forwarded-Proto: https`. The default.
    case auto
    /// Always, also over plain HTTP (a browser then keeps no cookie from a plain-HTTP sign-in,
    /// except on `localhost`).
    case always
    /// Never.
    case never
}

/// A signed-in browser's session of the console: when it ends and a random id. The cookie
/// holds both and an HMAC-SHA256 of them keyed by the admin key, so a changed admin key ends
/// every session; signing out records the id as revoked in the store
/// (``ConsoleRevocations``), which every instance over that store reads.
package struct ConsoleSession: Sendable, Hashable {
    static let cookieName = "osync_console"
    /// How long a sign-in lasts, in seconds.
    static let lifetime: Int64 = 12 * 3600

    /// When the session ends, in seconds since 1970.
    package var expiry: Int64
    /// 32 lowercase hex digits (16 random bytes).
    package var id: String

    /// The session `id` that ends at `expiry` (seconds since 1970).
    package init(expiry: Int64, id: String) {
        self.expiry = expiry
        self.id = id
    }

    /// A new session that starts at `now` (seconds since 1970).
    static func start(now: Int64) -> ConsoleSession {
        ConsoleSession(expiry: now + lifetime, id: hex((0..<16).map { _ in UInt8.random(in: .min ... .max) }))
    }

    /// The HMAC-SHA256 of the expiry and the id keyed by `adminKey`, in lowercase hex.
    package func signature(adminKey: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array("offline-sync console \(expiry) \(id)".utf8),
                                                  using: SymmetricKey(data: Array(adminKey.utf8)))
        return Self.hex(Array(mac))
    }

    /// `Set-Cookie` for this session: `/admin` only, `HttpOnly`, `SameSite=Strict`, and
    /// `Secure` when `secure`.
    package func setCookie(adminKey: String, secure: Bool) -> String {
        "\(Self.cookieName)=\(expiry).\(id).\(signature(adminKey: adminKey)); Path=/admin; Max-Age=\(Self.lifetime); "
            + "HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// `Set-Cookie` that makes a browser forget the session's cookie.
    static func clearing(secure: Bool) -> String {
        "\(cookieName)=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The sessions a request's cookies carry that have not ended at `now` (seconds since
    /// 1970) and whose HMAC matches, compared in constant time; whether one was revoked is
    /// the store's to say.
    static func sessions(in headers: HTTPFields, adminKey: String, now: Int64) -> [ConsoleSession] {
        offered(in: headers, now: now).filter { $0.session.isSigned($0.signature, adminKey: adminKey) }.map { $0.session }
    }

    /// The session cookies a request carries in this form that have not ended at `now`, each
    /// with the signature it came with, unchecked. Checking one answers a guess at the admin
    /// key, so the console checks them behind the limit on wrong keys.
    static func offered(in headers: HTTPFields, now: Int64) -> [(session: ConsoleSession, signature: Substring)] {
        offered(cookies: headers[values: .cookie], now: now)
    }

    /// ``offered(in:now:)`` for the values of a request's `Cookie` fields.
    package static func offered(cookies: [String], now: Int64) -> [(session: ConsoleSession, signature: Substring)] {
        var found: [(session: ConsoleSession, signature: Substring)] = []
        for header in cookies {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0] == cookieName else { continue }
                let fields = parts[1].split(separator: ".", omittingEmptySubsequences: false)
                guard fields.count == 3, let expiry = Int64(fields[0]), expiry > now, isSessionId(fields[1]) else { continue }
                found.append((ConsoleSession(expiry: expiry, id: String(fields[1])), fields[2]))
            }
        }
        return found
    }

    /// Whether `signature` is this session's HMAC under `adminKey`, compared in constant time.
    package func isSigned(_ signature: Substring, adminKey: String) -> Bool {
        constantTimeEqual(Array(signature.utf8), Array(self.signature(adminKey: adminKey).utf8))
    }

    private static func isSessionId(_ text: Substring) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}
