import OfflineSync

/// The machine-readable code of an error the server answers, shared by the server and its
/// clients: the `code` of an error body `{"error": {"code": "<code>", "message": "<message>"}}`
/// (``WireErrorBody``), of a page stream's failure frame, and of a rejected push result
/// (Docs/Protocol.md). A client branches on the code, never on the message, which is for
/// people.
///
/// A struct over a private enum, as ``SyncError/Code`` is: a code added later does not break a
/// caller's `switch`, and a code a newer server sends that this build does not know reads as
/// `nil` (``init(rawValue:)``), never as another code. ``rawValue`` is the code as sent, byte
/// for byte; the table of Docs/Server.md lists exactly these (Scripts/check-docs.py checks it).
public struct WireErrorCode: Hashable, Sendable, CustomStringConvertible {
    // One case per line, each with its raw value spelled out: Scripts/check-docs.py reads them.
    private enum Base: String, CaseIterable, Sendable {
        case unauthorized = "unauthorized"
        case forbidden = "forbidden"
        case notFound = "notFound"
        case tableNotDefined = "tableNotDefined"
        case rejected = "rejected"
        case conflict = "conflict"
        case attachmentMissing = "attachmentMissing"
        case attachmentDamaged = "attachmentDamaged"
        case invalidJSON = "invalidJSON"
        case invalidRequest = "invalidRequest"
        case invalidQuery = "invalidQuery"
        case invalidCursor = "invalidCursor"
        case invalidValue = "invalidValue"
        case invalidName = "invalidName"
        case typeMismatch = "typeMismatch"
        case schemaMismatch = "schemaMismatch"
        case invalidOperationSequence = "invalidOperationSequence"
        case duplicateId = "duplicateId"
        case invalidTable = "invalidTable"
        case invalidId = "invalidId"
        case idMismatch = "idMismatch"
        case invalidEntity = "invalidEntity"
        case invalidConfiguration = "invalidConfiguration"
        case incompleteBody = "incompleteBody"
        case pageSizeExceeded = "pageSizeExceeded"
        case unsupportedVersion = "unsupportedVersion"
        case notAcceptable = "notAcceptable"
        case unsupportedMediaType = "unsupportedMediaType"
        case bodyTooLarge = "bodyTooLarge"
        case batchTooLarge = "batchTooLarge"
        case limitExceeded = "limitExceeded"
        case upgradeRequired = "upgradeRequired"
        case unavailable = "unavailable"
        case internalError = "internal"
    }
    private let base: Base
    private init(_ base: Base) { self.base = base }

    /// The code as it travels, for example `invalidRequest`.
    public var rawValue: String { base.rawValue }

    /// The code whose wire form is `rawValue` (compared byte for byte), or `nil` for one this
    /// build does not know: a newer server's, or another protocol's (Cognito Sync's
    /// `x-amzn-ErrorType`).
    public init?(rawValue: String) {
        guard let base = Base.allCases.first(where: { $0.rawValue.utf8.elementsEqual(rawValue.utf8) }) else { return nil }
        self.base = base
    }

    /// Every code this build knows, in declaration order.
    public static var all: [WireErrorCode] { Base.allCases.map { WireErrorCode($0) } }

    /// The code as it travels.
    public var description: String { rawValue }

    // MARK: The codes

    /// 401: the request carries no token, or one the server does not accept (expired, wrong
    /// signature, unknown issuer), or an admin route a missing or wrong `X-Admin-Key`.
    /// Comes with `WWW-Authenticate: Bearer`. A client asks its token provider once more, then
    /// reports ``SyncError/Code/authenticationFailed``.
    public static let unauthorized = WireErrorCode(.unauthorized)
    /// 403: the caller is known but may not do this: the sync rules refuse the table or the
    /// write to this identity, or development tokens are off. As a push result's code (status
    /// 403) it names a write the sync rules refused, settled by ``RefusalResolution``.
    public static let forbidden = WireErrorCode(.forbidden)
    /// 404: no such record or entity (the tables API, the console when the server has no
    /// admin key).
    public static let notFound = WireErrorCode(.notFound)
    /// 404: the table is not defined on the server.
    public static let tableNotDefined = WireErrorCode(.tableNotDefined)
    /// 400 (404 for an item that does not exist, in the tables API): the server refused the
    /// write or request as sent, and will again.
    public static let rejected = WireErrorCode(.rejected)
    /// 409: the change was based on state the server no longer has (a dataset record's sync
    /// count that moved on); nothing was applied.
    public static let conflict = WireErrorCode(.conflict)
    /// 409, as a push result's code: a record references an attachment the server does not
    /// hold whole for this identity; nothing was applied. Upload the file, then send the
    /// record again (Docs/Attachments.md, "A record refused for its file").
    public static let attachmentMissing = WireErrorCode(.attachmentMissing)
    /// 400: an attachment's bytes do not match its hash.
    public static let attachmentDamaged = WireErrorCode(.attachmentDamaged)
    /// 400: the body is not JSON (the message names the byte).
    public static let invalidJSON = WireErrorCode(.invalidJSON)
    /// 400: the request is malformed for its route: a body member missing or mistyped, an
    /// operation id twice in one push, an upload's headers or offsets.
    public static let invalidRequest = WireErrorCode(.invalidRequest)
    /// 400: a query (predicate, `$filter`, `$orderby`, `$skiptoken`) that is malformed or does
    /// not fit the table.
    public static let invalidQuery = WireErrorCode(.invalidQuery)
    /// 400: a pull cursor the server did not issue, or not for this request.
    public static let invalidCursor = WireErrorCode(.invalidCursor)
    /// 400: a value no store can keep exactly.
    public static let invalidValue = WireErrorCode(.invalidValue)
    /// 400: a table or field name the server cannot hold.
    public static let invalidName = WireErrorCode(.invalidName)
    /// 400: a value of another type than its field's.
    public static let typeMismatch = WireErrorCode(.typeMismatch)
    /// 400: a schema that cannot be applied to the data the server holds.
    public static let schemaMismatch = WireErrorCode(.schemaMismatch)
    /// 400: operations on one item that cannot follow each other.
    public static let invalidOperationSequence = WireErrorCode(.invalidOperationSequence)
    /// 400: a record with this id exists already.
    public static let duplicateId = WireErrorCode(.duplicateId)
    /// 400: the tables API's table segment is not a table name.
    public static let invalidTable = WireErrorCode(.invalidTable)
    /// 400: the tables API's id segment is not valid percent-encoding.
    public static let invalidId = WireErrorCode(.invalidId)
    /// 400: the tables API's entity names another id than its path.
    public static let idMismatch = WireErrorCode(.idMismatch)
    /// 400: the tables API's entity does not decode for its table.
    public static let invalidEntity = WireErrorCode(.invalidEntity)
    /// 400: the server is not configured for the request (push sync for a platform with no
    /// application configured).
    public static let invalidConfiguration = WireErrorCode(.invalidConfiguration)
    /// 400: the request body ended before its announced length.
    public static let incompleteBody = WireErrorCode(.incompleteBody)
    /// 400: a pull asks for more than the server's largest page.
    public static let pageSizeExceeded = WireErrorCode(.pageSizeExceeded)
    /// 400 (`ZUMO-API-VERSION`, the upload interop version), 406 (`Accept`) or 415
    /// (`Content-Type`): the request speaks a version of a format this server does not; the
    /// message says which it speaks. A client reports 406 and 415 as
    /// ``SyncError/Code/unsupported``.
    public static let unsupportedVersion = WireErrorCode(.unsupportedVersion)
    /// 406: the request does not accept the only form the route answers in.
    public static let notAcceptable = WireErrorCode(.notAcceptable)
    /// 415: the body is not in the form the route reads.
    public static let unsupportedMediaType = WireErrorCode(.unsupportedMediaType)
    /// 413: the request body is larger than the server takes.
    public static let bodyTooLarge = WireErrorCode(.bodyTooLarge)
    /// 413: a push carries more operations than the server takes at once.
    public static let batchTooLarge = WireErrorCode(.batchTooLarge)
    /// 413: a size or count limit (an attachment's size, the attachment quota, a dataset's).
    public static let limitExceeded = WireErrorCode(.limitExceeded)
    /// 426: `GET /v1/changes` without a WebSocket upgrade or `Accept: text/event-stream`.
    public static let upgradeRequired = WireErrorCode(.upgradeRequired)
    /// 503 with `Retry-After`: the store is busy, or an identity provider's keys cannot be had
    /// now. Retried by clients.
    public static let unavailable = WireErrorCode(.unavailable)
    /// 500 (sent as `internal`): the server failed; the detail is in its log, not the answer.
    public static let internalError = WireErrorCode(.internalError)
}

extension WireErrorCode {
    /// The codes that are also ``SyncError/Code``s of the same name, both ways.
    private static let syncTwins: [(wire: WireErrorCode, sync: SyncError.Code)] = [
        (.forbidden, .forbidden), (.notFound, .notFound), (.tableNotDefined, .tableNotDefined), (.rejected, .rejected),
        (.conflict, .conflict), (.attachmentMissing, .attachmentMissing), (.attachmentDamaged, .attachmentDamaged),
        (.invalidQuery, .invalidQuery), (.invalidCursor, .invalidCursor), (.invalidValue, .invalidValue),
        (.invalidName, .invalidName), (.typeMismatch, .typeMismatch), (.schemaMismatch, .schemaMismatch),
        (.invalidOperationSequence, .invalidOperationSequence), (.duplicateId, .duplicateId),
        (.invalidConfiguration, .invalidConfiguration), (.limitExceeded, .limitExceeded),
    ]

    /// The wire code of a ``SyncError/Code`` of the same name (`forbidden`, `attachmentMissing`,
    /// `invalidQuery`…), or `nil` for one that never travels as itself (`transient`, `busy`…).
    public init?(syncErrorCode code: SyncError.Code) {
        guard let twin = Self.syncTwins.first(where: { $0.sync == code }) else { return nil }
        self = twin.wire
    }

    /// The ``SyncError/Code`` of the same name, or `nil` for a code that is the wire's own
    /// (`invalidJSON`, `bodyTooLarge`…).
    public var syncErrorCode: SyncError.Code? {
        Self.syncTwins.first { $0.wire == self }?.sync
    }
}

/// An error answer's JSON body, `{"error": {"code": "<code>", "message": "<message>"}}`: what
/// the server writes for every refusal of its native API and the tables API, and what the
/// clients read. One type on both sides, so the two cannot drift.
public struct WireErrorBody: Sendable, Hashable {
    /// The code as sent (kept whole for a code this build does not know, to report it).
    public let rawCode: String
    /// The code, or `nil` for one this build does not know.
    public let code: WireErrorCode?
    /// A sentence for people; never carries a secret or a stored value.
    public var message: String

    /// The body for `code` and `message`.
    public init(code: WireErrorCode, message: String) {
        rawCode = code.rawValue
        self.code = code
        self.message = message
    }

    /// Reads an error body; `nil` when `json` is not one (an object whose `error` member is
    /// an object with `code` and `message` strings).
    public init?(json: JSON) {
        guard case .string(let raw)? = json["error"]?["code"], case .string(let message)? = json["error"]?["message"] else {
            return nil
        }
        rawCode = raw
        code = WireErrorCode(rawValue: raw)
        self.message = message
    }

    /// The body as a document.
    public var json: JSON {
        .object([("error", .object([("code", .string(rawCode)), ("message", .string(message))]))])
    }

    /// The body as compact UTF-8 JSON text.
    public var encoded: [UInt8] { json.encoded }
}
