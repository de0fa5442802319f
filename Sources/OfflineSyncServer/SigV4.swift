import Crypto
import Foundation
import OfflineSync

/// Verifies AWS Signature Version 4 (`AWS4-HMAC-SHA256`) on requests signed by AWS SDKs
/// (botocore among them), against access keys configured on the server.
///
/// A request passes when its `Authorization` header names a configured access key, a
/// credential scope of the right date, any region, this ``service`` and `aws4_request`; its
/// `X-Amz-Date` is within ``maxClockSkew`` of now; and the signature recomputed over the
/// canonical request (method, path, sorted query, the signed headers, the body's SHA-256)
/// matches, compared in constant time. The hash signed is always that of the body
/// received: an `X-Amz-Content-Sha256` header declaring another is refused. Anything else throws
/// ``SyncError/Code/authenticationFailed`` with a reason meant for logs, not for clients.
public struct SigV4Verifier: Sendable {
    /// The signing name requests must be scoped to (`cognito-sync`).
    public let service: String
    /// How far `X-Amz-Date` may be from the server's clock.
    public let maxClockSkew: Duration
    private let secrets: [String: String]

    /// Creates a verifier for `credentials` (access key id → secret access key).
    public init(credentials: [String: String], service: String = "cognito-sync", maxClockSkew: Duration = .seconds(300)) {
        self.secrets = credentials
        self.service = service
        self.maxClockSkew = maxClockSkew
    }

    /// What a verified request was signed with.
    public struct Signer: Sendable, Hashable {
        /// The access key id.
        public var accessKeyId: String
        /// The region of the credential scope.
        public var region: String
        /// The request's signature (lowercase hex), unique to its exact bytes and date.
        public var signature: String
        /// Creates a signer description.
        public init(accessKeyId: String, region: String, signature: String = "") {
            self.accessKeyId = accessKeyId
            self.region = region
            self.signature = signature
        }
    }

    /// Verifies a request. `path` and `query` are as received (still percent-encoded);
    /// header names are matched case-insensitively.
    public func verify(method: String, path: String, query: String, headers: [(name: String, value: String)],
                       body: [UInt8], now: Date = Date()) throws -> Signer {
        func header(_ name: String) -> String? {
            let values = headers.filter { $0.name.lowercased() == name }.map(\.value)
            return values.isEmpty ? nil : values.joined(separator: ",")
        }
        guard let authorization = header("authorization") else { throw Self.refuse("no Authorization header") }
        let prefix = "AWS4-HMAC-SHA256 "
        guard authorization.hasPrefix(prefix) else { throw Self.refuse("not AWS4-HMAC-SHA256") }
        var parts: [String: String] = [:]
        for item in authorization.dropFirst(prefix.count).split(separator: ",") {
            let pair = item.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { throw Self.refuse("malformed Authorization header") }
            parts[String(pair[0])] = String(pair[1])
        }
        guard let credential = parts["Credential"], let signedHeaderList = parts["SignedHeaders"],
              let signature = parts["Signature"] else { throw Self.refuse("incomplete Authorization header") }
        let scope = credential.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard scope.count == 5, scope[3] == service, scope[4] == "aws4_request" else { throw Self.refuse("bad credential scope") }
        guard let secret = secrets[scope[0]] else { throw Self.refuse("unknown access key") }
        guard let amzDate = header("x-amz-date"), let signedAt = Self.parseAmzDate(amzDate) else {
            throw Self.refuse("missing or malformed X-Amz-Date")
        }
        guard amzDate.hasPrefix(scope[1]) else { throw Self.refuse("credential date does not match X-Amz-Date") }
        let skew = abs(now.timeIntervalSince(signedAt))
        guard skew <= Double(maxClockSkew.components.seconds) else { throw Self.refuse("X-Amz-Date is outside the allowed clock skew") }
        let signedHeaders = signedHeaderList.split(separator: ";").map(String.init)
        guard signedHeaders.contains("host"), signedHeaders == signedHeaders.sorted() else {
            throw Self.refuse("SignedHeaders must be sorted and include host")
        }
        var canonicalHeaders = ""
        for name in signedHeaders {
            guard let value = header(name) else { throw Self.refuse("a signed header is missing") }
            canonicalHeaders += "\(name):\(Self.trimHeaderValue(value))\n"
        }
        // The signature always covers the body received: a declared hash must be that body's,
        // or a captured request could be replayed with another body under its old hash.
        let payloadHash = Self.hex(SHA256.hash(data: body))
        if let declared = header("x-amz-content-sha256"), declared != "UNSIGNED-PAYLOAD", declared.lowercased() != payloadHash {
            throw Self.refuse("X-Amz-Content-Sha256 does not match the body")
        }
        let canonicalRequest = [method.uppercased(), Self.canonicalPath(path), Self.canonicalQuery(query), canonicalHeaders,
                                signedHeaderList, payloadHash].joined(separator: "\n")
        let credentialScope = scope[1...4].joined(separator: "/")
        let stringToSign = ["AWS4-HMAC-SHA256", amzDate, credentialScope,
                            Self.hex(SHA256.hash(data: Array(canonicalRequest.utf8)))].joined(separator: "\n")
        var key = SymmetricKey(data: Array("AWS4\(secret)".utf8))
        for part in [scope[1], scope[2], scope[3], "aws4_request"] {
            key = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array(part.utf8), using: key)))
        }
        let expected = Self.hex(HMAC<SHA256>.authenticationCode(for: Array(stringToSign.utf8), using: key))
        guard constantTimeEqual(Array(expected.utf8), Array(signature.utf8)) else { throw Self.refuse("signature mismatch") }
        return Signer(accessKeyId: scope[0], region: scope[2], signature: expected)
    }

    static func refuse(_ reason: String) -> SyncError { SyncError(.authenticationFailed, reason) }

    /// `20261123T155119Z`.
    static func parseAmzDate(_ text: String) -> Date? {
        let digits = Array(text.utf8)
        guard digits.count == 16, digits[8] == UInt8(ascii: "T"), digits[15] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? { Int(String(decoding: digits[range], as: UTF8.self)) }
        guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8), let hour = number(9..<11),
              let minute = number(11..<13), let second = number(13..<15) else { return nil }
        var components = DateComponents()
        (components.year, components.month, components.day) = (year, month, day)
        (components.hour, components.minute, components.second) = (hour, minute, second)
        components.timeZone = TimeZone(identifier: "UTC")
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: components)
    }

    /// Trims a header value and collapses runs of spaces, as SigV4 canonicalizes them.
    static func trimHeaderValue(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            .trimmingCharacters(in: .whitespaces)
    }

    /// The path as AWS SDKs sign it for services other than S3: the received (already
    /// encoded) path, percent-encoded once more except for unreserved characters and `/`.
    static func canonicalPath(_ path: String) -> String {
        path.isEmpty ? "/" : encode(path, keepSlash: true)
    }

    /// Query parameters decoded, re-encoded, sorted by name then value, joined with `&`.
    static func canonicalQuery(_ query: String) -> String {
        guard !query.isEmpty else { return "" }
        let pairs = query.split(separator: "&", omittingEmptySubsequences: true).map { pair -> (String, String) in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String { String(text).removingPercentEncoding ?? String(text) }
            return (encode(decode(parts[0]), keepSlash: false), encode(parts.count > 1 ? decode(parts[1]) : "", keepSlash: false))
        }
        return pairs.sorted { $0.0 == $1.0 ? $0.1 < $1.1 : $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    static func encode(_ text: String, keepSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        digest.map { String(format: "%02x", $0) }.joined()
    }
}

/// Whether two secrets are equal, in time that depends only on their lengths (no early exit
/// that would tell an attacker how many leading bytes were right).
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    var difference = UInt8(a.count == b.count ? 0 : 1)
    for index in 0..<max(a.count, b.count) {
        difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
    }
    return difference == 0
}
