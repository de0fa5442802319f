import AsyncHTTPClient
import Foundation
import NIOCore
import OfflineSyncWire

/// Fetches the JSON documents an issuer publishes (its JWKS and its OpenID Connect
/// discovery document), with the lifetime its `Cache-Control` gives them.
///
/// Bounded in every direction an unreliable or hostile endpoint could push: 10 seconds per
/// request, 1 MiB per document, no redirects (a key URL is configured, not discovered by
/// following an answer somewhere else), 200 only.
struct KeyDocumentLoader: Sendable {
    /// The largest document read.
    static let maxDocumentBytes = 1 << 20
    /// How long one request may take.
    static let timeout: TimeAmount = .seconds(10)

    /// One client for the whole process, as `HTTPClient.shared` is, but one that never
    /// follows a redirect. It lives as long as the process, so it is never shut down.
    private static let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5), read: .seconds(10))))

    /// A fetched document and how long it may be used: the `max-age` of its
    /// `Cache-Control` (0 for `no-cache` or `no-store`), `nil` without one.
    struct Document {
        let json: JSON
        let maxAge: Duration?
    }

    /// Fetches `url` (which ``TokenIssuer/isAllowedKeyURL(_:)`` has allowed). Throws
    /// ``TokenRefusal`` with a reason for the log (no document contents).
    func fetch(_ url: URL) async throws(TokenRefusal) -> Document {
        guard TokenIssuer.isAllowedKeyURL(url) else { throw TokenRefusal("\(url.absoluteString) is neither https nor loopback http") }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "Accept", value: "application/json")
        let response: HTTPClientResponse
        do {
            response = try await Self.client.execute(request, timeout: Self.timeout)
        } catch {
            throw TokenRefusal("\(url.absoluteString): \(Self.describe(error))")
        }
        guard response.status == .ok else { throw TokenRefusal("\(url.absoluteString) answered \(response.status.code)") }
        let body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: Self.maxDocumentBytes)
        } catch {
            throw TokenRefusal("\(url.absoluteString): the document is over \(Self.maxDocumentBytes) bytes or was cut off")
        }
        guard let json = try? body.withUnsafeReadableBytes({ try JSON.parse($0) }) else {
            throw TokenRefusal("\(url.absoluteString): not one JSON document with unique keys")
        }
        return Document(json: json, maxAge: Self.maxAge(cacheControl: response.headers["cache-control"]))
    }

    /// Reads a JWKS from a local file (with no lifetime of its own).
    func read(file path: String) throws(TokenRefusal) -> Document {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw TokenRefusal("cannot open \(path)") }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: Self.maxDocumentBytes + 1), data.count <= Self.maxDocumentBytes else {
            throw TokenRefusal("\(path): unreadable or over \(Self.maxDocumentBytes) bytes")
        }
        guard let json = try? JSON.parse(data) else { throw TokenRefusal("\(path): not one JSON document with unique keys") }
        return Document(json: json, maxAge: nil)
    }

    /// The lifetime `Cache-Control` values give a response: `max-age` (the last one, if
    /// several), 0 for `no-cache` or `no-store`; `nil` when they say nothing about it.
    static func maxAge(cacheControl values: [String]) -> Duration? {
        var result: Duration?
        for directive in values.flatMap({ $0.split(separator: ",") }) {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            switch parts.first {
            case "no-cache", "no-store": return .zero
            case "max-age":
                if parts.count == 2, let seconds = Int64(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))), seconds >= 0 {
                    result = .seconds(seconds)
                }
            default: continue
            }
        }
        return result
    }

    /// The kind of a transport failure, without anything an attacker could have put in it.
    private static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return "\(error)" }
        return String(describing: type(of: error))
    }
}
