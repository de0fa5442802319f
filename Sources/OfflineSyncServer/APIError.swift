import Foundation
import Hummingbird
import OfflineSync
import OfflineSyncWire

/// An error answered to a client: an HTTP status and a body
/// `{"error": {"code": "<code>", "message": "<message>"}}` (``WireErrorBody``; see
/// `Docs/Protocol.md`, and `Docs/Server.md` for the table of codes).
public struct APIError: HTTPResponseError, Sendable {
    /// The HTTP status.
    public var status: HTTPResponse.Status
    /// The machine-readable code a client branches on, shared with the clients.
    public var wireCode: WireErrorCode
    /// ``wireCode`` as it goes on the wire (`unauthorized`, `limitExceeded`…). Setting a text no
    /// ``WireErrorCode`` has sends `internal`.
    public var code: String {
        get { wireCode.rawValue }
        set { wireCode = WireErrorCode(rawValue: newValue) ?? .internalError }
    }
    /// A sentence for people. Never carries a secret or a stored value.
    public var message: String
    /// Extra response headers (`WWW-Authenticate`, `Retry-After`…).
    public var headers: HTTPFields

    /// Creates an error.
    public init(_ status: HTTPResponse.Status, _ code: WireErrorCode, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.wireCode = code
        self.message = message
        self.headers = headers
    }

    /// Creates an error from a code spelled as text; a text no ``WireErrorCode`` has is sent
    /// as `internal`. Name the code instead (`APIError(.notFound, .notFound, …)`).
    @available(*, deprecated, message: "name the code: APIError(status, .notFound, message)")
    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, headers: HTTPFields = [:]) {
        self.init(status, WireErrorCode(rawValue: code) ?? .internalError, message, headers: headers)
    }

    /// The JSON body this error is answered with, byte for byte.
    public var body: [UInt8] { WireErrorBody(code: wireCode, message: message).encoded }

    /// The response for this error.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static let unauthorized = APIError(.unauthorized, .unauthorized, "missing or invalid credentials",
                                       headers: [.wwwAuthenticate: "Bearer"])

    /// The answer for a token that could be neither accepted nor refused because its issuer's
    /// keys cannot be had now: a client retries it, and does not take its credentials for refused.
    static func keysUnavailable(retryAfter: Duration) -> APIError {
        let seconds = max(1, retryAfter.components.seconds + (retryAfter.components.attoseconds > 0 ? 1 : 0))
        return APIError(.serviceUnavailable, .unavailable, "the identity provider's keys cannot be had now; retry later",
                        headers: [.retryAfter: "\(seconds)"])
    }

    /// The answer for a failure the client can do nothing about; its detail goes to the log only.
    static let internalError = APIError(.internalServerError, .internalError, "the server could not complete the request")

    /// The answer for an error the service threw. Storage failures are logged by the caller
    /// and answered without their detail.
    static func from(_ error: SyncError) -> APIError {
        switch error.code {
        case .invalidQuery, .invalidValue, .invalidName, .typeMismatch, .invalidCursor, .rejected, .schemaMismatch,
             .invalidOperationSequence, .duplicateId:
            // Each of these is a wire code of the same name.
            return APIError(.badRequest, WireErrorCode(syncErrorCode: error.code) ?? .rejected, error.message)
        case .notFound, .tableNotDefined:
            return APIError(.notFound, WireErrorCode(syncErrorCode: error.code) ?? .notFound, error.message)
        case .limitExceeded:
            return APIError(.contentTooLarge, .limitExceeded, error.message)
        case .authenticationFailed:
            return unauthorized
        case .conflict:
            return APIError(.conflict, .conflict, error.message)
        case .forbidden:
            return APIError(.forbidden, .forbidden, error.message)
        case .attachmentDamaged:
            return APIError(.badRequest, .attachmentDamaged, error.message)
        case .invalidConfiguration:
            return APIError(.badRequest, .invalidConfiguration, error.message)
        case .busy, .transient, .storeClosed:
            return APIError(.serviceUnavailable, .unavailable, "the server is busy; retry later", headers: [.retryAfter: "1"])
        default:
            return internalError
        }
    }
}
