import Foundation
import Hummingbird
import OfflineSync
import OfflineSyncWire

/// An error answered to a client: an HTTP status and a body
/// `{"error": {"code": "<code>", "message": "<message>"}}` (see `Docs/Protocol.md`).
public struct APIError: HTTPResponseError, Sendable {
    /// The HTTP status.
    public var status: HTTPResponse.Status
    /// A stable, machine-readable code (`unauthorized`, `bodyTooLarge`, `invalidRequest`…).
    public var code: String
    /// A sentence for people. Never carries a secret or a stored value.
    public var message: String
    /// Extra response headers (`WWW-Authenticate`, `Retry-After`…).
    public var headers: HTTPFields

    /// Creates an error.
    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    /// The response for this error.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        let body = JSON.object([("error", .object([("code", .string(code)), ("message", .string(message))]))]).encoded
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static let unauthorized = APIError(.unauthorized, "unauthorized", "missing or invalid credentials",
                                       headers: [.wwwAuthenticate: "Bearer"])

    /// The answer for a token that could be neither accepted nor refused because its issuer's
    /// keys cannot be had now: a client retries it, and does not take its credentials for refused.
    static func keysUnavailable(retryAfter: Duration) -> APIError {
        let seconds = max(1, retryAfter.components.seconds + (retryAfter.components.attoseconds > 0 ? 1 : 0))
        return APIError(.serviceUnavailable, "unavailable", "the identity provider's keys cannot be had now; retry later",
                        headers: [.retryAfter: "\(seconds)"])
    }

    /// The answer for a failure the client can do nothing about; its detail goes to the log only.
    static let internalError = APIError(.internalServerError, "internal", "the server could not complete the request")

    /// The answer for an error the service threw. Storage failures are logged by the caller
    /// and answered without their detail.
    static func from(_ error: SyncError) -> APIError {
        switch error.code {
        case .invalidQuery, .invalidValue, .invalidName, .typeMismatch, .invalidCursor, .rejected, .schemaMismatch,
             .invalidOperationSequence, .duplicateId:
            return APIError(.badRequest, String(describing: error.code), error.message)
        case .notFound, .tableNotDefined:
            return APIError(.notFound, String(describing: error.code), error.message)
        case .limitExceeded:
            return APIError(.contentTooLarge, "limitExceeded", error.message)
        case .authenticationFailed:
            return unauthorized
        case .conflict:
            return APIError(.conflict, "conflict", error.message)
        case .forbidden:
            return APIError(.forbidden, "forbidden", error.message)
        case .attachmentDamaged:
            return APIError(.badRequest, "attachmentDamaged", error.message)
        case .invalidConfiguration:
            return APIError(.badRequest, "invalidConfiguration", error.message)
        case .busy, .transient, .storeClosed:
            return APIError(.serviceUnavailable, "unavailable", "the server is busy; retry later", headers: [.retryAfter: "1"])
        default:
            return internalError
        }
    }
}
