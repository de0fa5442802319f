import HTTPTypes
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncWire

/// An error of the Cognito Sync API, in the rest-json shape AWS SDKs read: the status of
/// the service model, `x-amzn-ErrorType: <Name>:` and `{"message": …}`.
struct CognitoError: HTTPResponseError, Sendable {
    var name: String
    var status: HTTPResponse.Status
    var message: String

    init(_ name: String, _ status: HTTPResponse.Status, _ message: String) {
        self.name = name
        self.status = status
        self.message = message
    }

    static let errorType = HTTPField.Name("x-amzn-ErrorType")!

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [:]
        headers[.contentType] = "application/x-amz-json-1.1"
        headers[Self.errorType] = "\(name):http://internal.amazon.com/coral/com.amazonaws.cognito.sync.model/"
        let body = JSON.object([("message", .string(message))]).encoded
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func notAuthorized(_ message: String = "the request is not authorized") -> CognitoError {
        CognitoError("NotAuthorizedException", .forbidden, message)
    }

    static func invalidParameter(_ message: String) -> CognitoError {
        CognitoError("InvalidParameterException", .badRequest, message)
    }

    /// The exception for a service error, as the service model names them.
    static func from(_ error: SyncError) -> CognitoError {
        switch error.code {
        case .limitExceeded: return CognitoError("LimitExceededException", .badRequest, error.message)
        case .notFound: return CognitoError("ResourceNotFoundException", .notFound, error.message)
        case .conflict: return CognitoError("ResourceConflictException", .conflict, error.message)
        case .forbidden, .authenticationFailed: return notAuthorized()
        case .invalidConfiguration: return CognitoError("InvalidConfigurationException", .badRequest, error.message)
        case .busy, .transient, .storeClosed: return CognitoError("TooManyRequestsException", .tooManyRequests, "the server is busy; retry later")
        case .invalidValue, .invalidName, .invalidQuery, .invalidCursor, .typeMismatch, .rejected:
            return invalidParameter(error.message)
        default: return CognitoError("InternalErrorException", .internalServerError, "the server could not complete the request")
        }
    }
}
