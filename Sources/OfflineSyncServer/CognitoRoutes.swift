import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService
import OfflineSyncWire

/// An access key for the Cognito Sync API, verified with AWS Signature Version 4.
public struct CognitoAccessKey: Sendable, Hashable {
    /// The access key id (`AKIA…`).
    public var accessKeyId: String
    /// The secret access key.
    public var secretAccessKey: String
    /// The one identity the key may reach, or `nil` for a developer key that reaches every
    /// identity and the pool-level operations.
    public var identityId: String?

    /// Creates a key.
    public init(accessKeyId: String, secretAccessKey: String, identityId: String? = nil) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.identityId = identityId
    }

    /// Parses `ACCESS_KEY_ID:SECRET` or `ACCESS_KEY_ID:SECRET:IDENTITY_ID` (the identity may
    /// itself contain `:`).
    public init?(parsing text: String) {
        let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        if parts.count == 3, parts[2].isEmpty { return nil }
        self.init(accessKeyId: parts[0], secretAccessKey: parts[1], identityId: parts.count == 3 ? parts[2] : nil)
    }
}

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

/// Who is calling the Cognito Sync API.
enum CognitoCaller: Sendable {
    /// A developer access key: every identity, and the pool-level operations.
    case developer(accessKeyId: String)
    /// An identity: through an access key bound to it, or a bearer token of the server.
    case identity(String, via: String)

    /// Recorded as `LastModifiedBy`.
    var name: String {
        switch self {
        case .developer(let key): return key
        case .identity(let identity, _): return identity
        }
    }
}

/// The Amazon Cognito Sync–compatible API (rest-json, `2014-06-30`), as botocore's service
/// model for `cognito-sync` describes it, over ``DatasetService``. Requests are signed with
/// AWS Signature Version 4 against the server's ``CognitoAccessKey``s, or carry the server's
/// bearer token (the identity is then the token's).
struct CognitoRoutes: Sendable {
    let routes: Routes
    var datasets: DatasetService { routes.server.datasets }
    var verifier: SigV4Verifier { routes.server.sigV4 }
    var signedRequests: SignedRequestLedger { routes.server.signedRequests }
    var keys: [String: CognitoAccessKey] { routes.server.cognitoKeys }

    func add(to router: Router<SyncRequestContext>) {
        let pools = "identitypools"
        let identity = "\(pools)/:pool/identities/:identity"
        let dataset = "\(identity)/datasets/:dataset"
        router.get(RouterPath(pools)) { request, context in try await handle(request, context, listPoolUsage) }
        router.get(RouterPath("\(pools)/:pool")) { request, context in try await handle(request, context, describePoolUsage) }
        router.post(RouterPath("\(pools)/:pool/bulkpublish")) { request, context in try await handle(request, context, bulkPublish) }
        router.post(RouterPath("\(pools)/:pool/getBulkPublishDetails")) { request, context in
            try await handle(request, context, bulkPublishDetails)
        }
        router.get(RouterPath("\(pools)/:pool/events")) { request, context in try await handle(request, context, getEvents) }
        router.post(RouterPath("\(pools)/:pool/events")) { request, context in try await handle(request, context, setEvents) }
        router.get(RouterPath("\(pools)/:pool/configuration")) { request, context in try await handle(request, context, getConfiguration) }
        router.post(RouterPath("\(pools)/:pool/configuration")) { request, context in try await handle(request, context, setConfiguration) }
        router.get(RouterPath(identity)) { request, context in try await handle(request, context, describeIdentityUsage) }
        router.get(RouterPath("\(identity)/datasets")) { request, context in try await handle(request, context, listDatasets) }
        router.get(RouterPath(dataset)) { request, context in try await handle(request, context, describeDataset) }
        router.post(RouterPath(dataset)) { request, context in try await handle(request, context, updateRecords) }
        router.delete(RouterPath(dataset)) { request, context in try await handle(request, context, deleteDataset) }
        router.get(RouterPath("\(dataset)/records")) { request, context in try await handle(request, context, listRecords) }
        router.post(RouterPath("\(dataset)/subscriptions/:device")) { request, context in try await handle(request, context, subscribe) }
        router.delete(RouterPath("\(dataset)/subscriptions/:device")) { request, context in
            try await handle(request, context, unsubscribe)
        }
        router.post(RouterPath("\(pools)/:pool/identity/:identity/device")) { request, context in
            try await handle(request, context, registerDevice)
        }
    }

    /// A verified request: its caller, path parameters, query and JSON body.
    struct Call: Sendable {
        var caller: CognitoCaller
        var parameters: [String: String]
        var query: [String: String]
        var body: JSON
        var headers: HTTPFields

        func parameter(_ name: String) -> String { parameters[name] ?? "" }

        /// An optional integer query parameter.
        func integer(_ name: String) throws -> Int64? {
            guard let text = query[name] else { return nil }
            guard let value = Int64(text) else { throw CognitoError.invalidParameter("\(name) must be an integer") }
            return value
        }
    }

    typealias Handler = @Sendable (Call) async throws -> JSON

    /// Reads, authenticates and answers one request; every error leaves in the rest-json shape.
    func handle(_ request: Request, _ context: SyncRequestContext, _ handler: Handler) async throws -> Response {
        do {
            let buffer = try await routes.readBody(request)
            let bytes = Array(buffer.readableBytesView)
            let (caller, signer) = try await authenticate(request, body: bytes)
            var parameters: [String: String] = [:]
            for name in ["pool", "identity", "dataset", "device"] {
                if let raw = context.parameters.get(name) {
                    parameters[name] = raw.removingPercentEncoding ?? raw
                }
            }
            var query: [String: String] = [:]
            for (name, value) in request.uri.queryParameters { query[String(name)] = String(value) }
            var body = JSON.object([])
            if !bytes.isEmpty {
                do { body = try JSON.parse(bytes) } catch let error as SyncError {
                    throw CognitoError("SerializationException", .badRequest, error.message)
                }
                guard case .object = body else { throw CognitoError.invalidParameter("the body must be a JSON object") }
            }
            let call = Call(caller: caller, parameters: parameters, query: query, body: body, headers: request.headers)
            if let identity = parameters["identity"] { try authorize(caller, identity: identity) }
            // A signed request that changes something runs once: a replay of the same bytes
            // (captured, or an SDK retry signed within the same second) gets the first answer.
            guard request.method != .get, let claimed = signer?.signature else { return Routes.json(try await handler(call)) }
            switch try await signedRequests.claim(claimed, window: verifier.maxClockSkew * 3) {
            case .answered(let answer):
                routes.logger.notice("SigV4 replay answered from its first run")
                return Routes.json(bytes: answer)
            case .inProgress:
                throw CognitoError("TooManyRequestsException", .tooManyRequests, "the same signed request is running; retry later")
            case .claimed:
                break
            }
            let answer: JSON
            do {
                answer = try await handler(call)
            } catch {
                try? await signedRequests.release(claimed)
                throw error
            }
            let encoded = answer.encoded
            try? await signedRequests.complete(claimed, answer: encoded)
            return Routes.json(bytes: encoded)
        } catch let error as SyncError {
            let answer = CognitoError.from(error)
            if answer.status.code >= 500 { routes.logger.error("cognito call failed", metadata: ["code": "\(error.code)"]) }
            throw answer
        } catch let error as APIError where error.status == .contentTooLarge {
            throw CognitoError("LimitExceededException", .badRequest, error.message)
        }
    }

    /// SigV4 against the configured keys, or the server's bearer token; 403 otherwise. The
    /// signer is `nil` for a bearer token.
    func authenticate(_ request: Request, body: [UInt8]) async throws -> (CognitoCaller, SigV4Verifier.Signer?) {
        guard let header = request.headers[.authorization] else { throw CognitoError.notAuthorized("missing credentials") }
        if header.lowercased().hasPrefix("bearer ") {
            guard let identity = try? await routes.server.tokens.identity(
                fromToken: String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)) else {
                throw CognitoError.notAuthorized()
            }
            return (.identity(identity, via: "token"), nil)
        }
        var headers = request.headers.map { (name: $0.name.canonicalName, value: $0.value) }
        // HTTP/1's Host header arrives as the request's authority, not among the fields.
        if let authority = request.head.authority, !headers.contains(where: { $0.name.lowercased() == "host" }) {
            headers.append((name: "host", value: authority))
        }
        let signer: SigV4Verifier.Signer
        do {
            signer = try verifier.verify(method: request.method.rawValue, path: request.uri.path, query: request.uri.query ?? "",
                                         headers: headers, body: body)
        } catch {
            // The reason names what failed (scope, date, signature), never a key or secret.
            routes.logger.notice("SigV4 refused", metadata: ["reason": "\((error as? SyncError)?.message ?? "unknown")"])
            throw CognitoError.notAuthorized("the request signature is not valid")
        }
        guard let key = keys[signer.accessKeyId] else { throw CognitoError.notAuthorized() }
        if let identity = key.identityId { return (.identity(identity, via: key.accessKeyId), signer) }
        return (.developer(accessKeyId: key.accessKeyId), signer)
    }

    /// An identity's caller reaches only its own identity; a developer key reaches any.
    func authorize(_ caller: CognitoCaller, identity: String) throws {
        if case .identity(let own, _) = caller, own != identity {
            throw CognitoError.notAuthorized("these credentials may not reach identity '\(identity)'")
        }
    }

    func requireDeveloper(_ call: Call) throws {
        guard case .developer = call.caller else {
            throw CognitoError.notAuthorized("pool-level operations need a developer access key")
        }
    }

    // MARK: Identity operations

    func listDatasets(_ call: Call) async throws -> JSON {
        let list = try await datasets.listDatasets(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                                   nextToken: call.query["nextToken"], maxResults: try call.integer("maxResults").map(Int.init))
        return .object([("Datasets", .array(list.datasets.map(Self.dataset))), ("Count", .number(String(list.datasets.count)))]
            + (list.nextToken.map { [("NextToken", JSON.string($0))] } ?? []))
    }

    func describeDataset(_ call: Call) async throws -> JSON {
        let dataset = try await datasets.describeDataset(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                                         name: call.parameter("dataset"))
        return .object([("Dataset", Self.dataset(dataset))])
    }

    func listRecords(_ call: Call) async throws -> JSON {
        let page = try await datasets.listRecords(
            pool: call.parameter("pool"), identity: call.parameter("identity"), dataset: call.parameter("dataset"),
            lastSyncCount: try call.integer("lastSyncCount") ?? 0, nextToken: call.query["nextToken"],
            maxResults: try call.integer("maxResults").map(Int.init), syncSessionToken: call.query["syncSessionToken"])
        var members: [(key: String, value: JSON)] = [
            ("Records", .array(page.records.map(Self.record))), ("Count", .number(String(page.records.count))),
            ("DatasetSyncCount", .number(String(page.datasetSyncCount))),
            ("MergedDatasetNames", .array(page.mergedDatasetNames.map(JSON.string))),
            ("DatasetExists", .bool(page.datasetExists)),
            ("DatasetDeletedAfterRequestedSyncCount", .bool(page.datasetDeletedAfterRequestedSyncCount)),
            ("SyncSessionToken", .string(page.syncSessionToken)),
        ]
        if let next = page.nextToken { members.append(("NextToken", .string(next))) }
        if let by = page.lastModifiedBy { members.append(("LastModifiedBy", .string(by))) }
        return .object(members)
    }

    func updateRecords(_ call: Call) async throws -> JSON {
        guard case .string(let token)? = call.body["SyncSessionToken"], !token.isEmpty else {
            throw CognitoError.invalidParameter("SyncSessionToken is required")
        }
        var patches: [RecordPatch] = []
        if let list = call.body["RecordPatches"] {
            guard case .array(let items) = list else { throw CognitoError.invalidParameter("RecordPatches must be a list") }
            patches = try items.map(Self.patch)
        }
        var device: String?
        if let value = call.body["DeviceId"] {
            guard case .string(let id) = value else { throw CognitoError.invalidParameter("DeviceId must be a string") }
            device = id
        }
        let pool = call.parameter("pool"), identity = call.parameter("identity"), name = call.parameter("dataset")
        let result = try await datasets.updateRecords(pool: pool, identity: identity, dataset: name, patches: patches,
                                                      syncSessionToken: token, deviceId: device, caller: call.caller.name)
        if !patches.isEmpty {
            await routes.server.feed.publish([ChangeNotice(dataset: DatasetNotification(
                identityPoolId: pool, identityId: identity, datasetName: name, syncCount: result.syncCount))])
        }
        return .object([("Records", .array(result.records.map(Self.record)))])
    }

    func deleteDataset(_ call: Call) async throws -> JSON {
        let pool = call.parameter("pool"), identity = call.parameter("identity"), name = call.parameter("dataset")
        let dataset = try await datasets.deleteDataset(pool: pool, identity: identity, name: name, caller: call.caller.name)
        await routes.server.feed.publish([ChangeNotice(dataset: DatasetNotification(
            identityPoolId: pool, identityId: identity, datasetName: name, syncCount: dataset.syncCount + 1))])
        return .object([("Dataset", Self.dataset(dataset))])
    }

    func describeIdentityUsage(_ call: Call) async throws -> JSON {
        let usage = try await datasets.describeIdentityUsage(pool: call.parameter("pool"), identity: call.parameter("identity"))
        var members: [(key: String, value: JSON)] = [
            ("IdentityId", .string(usage.identityId)), ("IdentityPoolId", .string(usage.identityPoolId)),
            ("DatasetCount", .number(String(usage.datasetCount))), ("DataStorage", .number(String(usage.dataStorage))),
        ]
        if let date = usage.lastModifiedDate { members.append(("LastModifiedDate", Self.date(date))) }
        return .object([("IdentityUsage", .object(members))])
    }

    func registerDevice(_ call: Call) async throws -> JSON {
        guard case .string(let platformName)? = call.body["Platform"], let platform = PushPlatform(rawValue: platformName) else {
            throw CognitoError.invalidParameter("Platform must be one of \(PushPlatform.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard case .string(let token)? = call.body["Token"] else { throw CognitoError.invalidParameter("Token is required") }
        let id = try await datasets.registerDevice(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                                   platform: platform, token: token)
        return .object([("DeviceId", .string(id))])
    }

    func subscribe(_ call: Call) async throws -> JSON {
        try await datasets.subscribe(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                     dataset: call.parameter("dataset"), deviceId: call.parameter("device"))
        return .object([])
    }

    func unsubscribe(_ call: Call) async throws -> JSON {
        try await datasets.unsubscribe(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                       dataset: call.parameter("dataset"), deviceId: call.parameter("device"))
        return .object([])
    }

    // MARK: Pool operations (developer keys)

    func describePoolUsage(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        return .object([("IdentityPoolUsage", Self.poolUsage(try await datasets.describePoolUsage(pool: call.parameter("pool"))))])
    }

    func listPoolUsage(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        let limit = try call.integer("maxResults").map(Int.init)
        let (pools, next) = try await datasets.listPoolUsage(nextToken: call.query["nextToken"], maxResults: limit)
        var members: [(key: String, value: JSON)] = [
            ("IdentityPoolUsages", .array(pools.map(Self.poolUsage))), ("Count", .number(String(pools.count))),
            ("MaxResults", .number(String(limit ?? DatasetService.defaultPageSize))),
        ]
        if let next { members.append(("NextToken", .string(next))) }
        return .object(members)
    }

    func getConfiguration(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        return Self.configuration(try await datasets.configuration(pool: call.parameter("pool")))
    }

    func setConfiguration(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        var push: PushSyncConfiguration?
        if let value = call.body["PushSync"] {
            guard case .object = value else { throw CognitoError.invalidParameter("PushSync must be an object") }
            var arns: [String] = []
            if let list = value["ApplicationArns"] {
                guard case .array(let items) = list else { throw CognitoError.invalidParameter("ApplicationArns must be a list") }
                arns = try items.map { item in
                    guard case .string(let arn) = item else { throw CognitoError.invalidParameter("ApplicationArns holds strings") }
                    return arn
                }
            }
            push = PushSyncConfiguration(applicationArns: arns, roleArn: try Self.optionalString(value["RoleArn"], "RoleArn"))
        }
        var streams: StreamsConfiguration?
        if let value = call.body["CognitoStreams"] {
            guard case .object = value, let name = try Self.optionalString(value["StreamName"], "StreamName") else {
                throw CognitoError.invalidParameter("CognitoStreams needs a StreamName")
            }
            let status = try Self.optionalString(value["StreamingStatus"], "StreamingStatus") ?? "ENABLED"
            guard status == "ENABLED" || status == "DISABLED" else {
                throw CognitoError.invalidParameter("StreamingStatus is ENABLED or DISABLED")
            }
            streams = StreamsConfiguration(streamName: name, roleArn: try Self.optionalString(value["RoleArn"], "RoleArn"),
                                           enabled: status == "ENABLED")
        }
        return Self.configuration(try await datasets.setConfiguration(pool: call.parameter("pool"), pushSync: push, streams: streams))
    }

    func getEvents(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        let events = try await datasets.events(pool: call.parameter("pool"))
        return .object([("Events", .object(events.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) }))])
    }

    func setEvents(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        guard case .object(let members)? = call.body["Events"] else { throw CognitoError.invalidParameter("Events is required") }
        var events: [String: String] = [:]
        for member in members {
            guard case .string(let target) = member.value else { throw CognitoError.invalidParameter("an event's target is a string") }
            events[member.key] = target
        }
        try await datasets.setEvents(pool: call.parameter("pool"), events)
        return .object([])
    }

    func bulkPublish(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        let pool = call.parameter("pool")
        do {
            try await datasets.bulkPublish(pool: pool)
        } catch let error as SyncError where error.code == .busy {
            throw CognitoError("DuplicateRequestException", .badRequest, error.message)
        } catch let error as SyncError where error.code == .rejected {
            throw CognitoError("AlreadyStreamedException", .badRequest, error.message)
        }
        return .object([("IdentityPoolId", .string(pool))])
    }

    func bulkPublishDetails(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        let details = try await datasets.bulkPublishDetails(pool: call.parameter("pool"))
        var members: [(key: String, value: JSON)] = [
            ("IdentityPoolId", .string(details.identityPoolId)), ("BulkPublishStatus", .string(details.status)),
        ]
        if let start = details.startTime { members.append(("BulkPublishStartTime", Self.date(start))) }
        if let end = details.completeTime { members.append(("BulkPublishCompleteTime", Self.date(end))) }
        if let failure = details.failureMessage { members.append(("FailureMessage", .string(failure))) }
        return .object(members)
    }

    // MARK: Shapes

    /// Timestamps as rest-json sends them: seconds since 1970, with milliseconds.
    static func date(_ timestamp: Timestamp) -> JSON {
        let ms = timestamp.millisecondsSince1970
        let seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
        let fraction = ms - seconds * 1000
        return .number("\(seconds).\(String(fraction + 1000).dropFirst())")
    }

    static func parseDate(_ json: JSON) throws -> Timestamp {
        guard case .number(let text) = json, let seconds = Double(text), seconds.isFinite else {
            throw CognitoError.invalidParameter("a date is a number of seconds since 1970")
        }
        return Timestamp(Date(timeIntervalSince1970: seconds))
    }

    static func optionalString(_ json: JSON?, _ name: String) throws -> String? {
        guard let json else { return nil }
        guard case .string(let text) = json else { throw CognitoError.invalidParameter("\(name) must be a string") }
        return text
    }

    static func dataset(_ dataset: RemoteDataset) -> JSON {
        .object([
            ("IdentityId", .string(dataset.identityId)), ("DatasetName", .string(dataset.name)),
            ("CreationDate", date(dataset.creationDate)), ("LastModifiedDate", date(dataset.lastModifiedDate)),
            ("LastModifiedBy", .string(dataset.lastModifiedBy)), ("DataStorage", .number(String(dataset.dataStorage))),
            ("NumRecords", .number(String(dataset.numRecords))),
        ])
    }

    static func record(_ record: RemoteDatasetRecord) -> JSON {
        var members: [(key: String, value: JSON)] = [("Key", .string(record.key))]
        if let value = record.value { members.append(("Value", .string(value))) }
        members += [("SyncCount", .number(String(record.syncCount))), ("LastModifiedDate", date(record.lastModifiedDate)),
                    ("LastModifiedBy", .string(record.lastModifiedBy))]
        if let device = record.deviceLastModifiedDate { members.append(("DeviceLastModifiedDate", date(device))) }
        return .object(members)
    }

    static func patch(_ json: JSON) throws -> RecordPatch {
        guard case .object = json else { throw CognitoError.invalidParameter("a record patch is an object") }
        guard case .string(let opName)? = json["Op"], let op = RecordPatch.Operation(rawValue: opName) else {
            throw CognitoError.invalidParameter("a patch's Op is replace or remove")
        }
        guard case .string(let key)? = json["Key"] else { throw CognitoError.invalidParameter("a patch needs a Key") }
        guard case .number(let countText)? = json["SyncCount"], let count = Int64(countText) else {
            throw CognitoError.invalidParameter("a patch needs an integer SyncCount")
        }
        let value = try optionalString(json["Value"], "Value")
        let device = try json["DeviceLastModifiedDate"].map(parseDate)
        return RecordPatch(op: op, key: key, value: value, syncCount: count, deviceLastModifiedDate: device)
    }

    static func poolUsage(_ usage: PoolUsage) -> JSON {
        var members: [(key: String, value: JSON)] = [
            ("IdentityPoolId", .string(usage.identityPoolId)), ("SyncSessionsCount", .number(String(usage.syncSessionsCount))),
            ("DataStorage", .number(String(usage.dataStorage))),
        ]
        if let date = usage.lastModifiedDate { members.append(("LastModifiedDate", Self.date(date))) }
        return .object(members)
    }

    static func configuration(_ configuration: PoolConfiguration) -> JSON {
        var members: [(key: String, value: JSON)] = [("IdentityPoolId", .string(configuration.identityPoolId))]
        if let push = configuration.pushSync {
            var fields: [(key: String, value: JSON)] = [("ApplicationArns", .array(push.applicationArns.map(JSON.string)))]
            if let role = push.roleArn { fields.append(("RoleArn", .string(role))) }
            members.append(("PushSync", .object(fields)))
        }
        if let streams = configuration.streams {
            var fields: [(key: String, value: JSON)] = [("StreamName", .string(streams.streamName))]
            if let role = streams.roleArn { fields.append(("RoleArn", .string(role))) }
            fields.append(("StreamingStatus", .string(streams.enabled ? "ENABLED" : "DISABLED")))
            members.append(("CognitoStreams", .object(fields)))
        }
        return .object(members)
    }
}

/// Cognito streams written as JSON lines, one file per stream, in a directory: the server's
/// stand-in for the Kinesis stream a pool names.
public struct JSONLinesStreamSink: DatasetStreamSink {
    /// The directory holding `<stream name>.jsonl`.
    public let directory: URL
    private let lock = FileLock()

    /// Creates a sink writing under `directory` (created on first write).
    public init(directory: URL) {
        self.directory = directory
    }

    /// Appends one line per record: `identityPoolId`, `identityId`, `datasetName`, `key`,
    /// `value` (absent for a removed key), `syncCount`, `lastModifiedDate` (ISO 8601) and
    /// `lastModifiedBy`.
    public func publish(stream: String, records: [DatasetStreamRecord]) async throws {
        var out: [UInt8] = []
        for item in records {
            var members: [(key: String, value: JSON)] = [
                ("identityPoolId", .string(item.identityPoolId)), ("identityId", .string(item.identityId)),
                ("datasetName", .string(item.datasetName)), ("key", .string(item.record.key)),
            ]
            if let value = item.record.value { members.append(("value", .string(value))) }
            members += [("syncCount", .number(String(item.record.syncCount))),
                        ("lastModifiedDate", .string(WireDate.iso8601(item.record.lastModifiedDate))),
                        ("lastModifiedBy", .string(item.record.lastModifiedBy))]
            JSON.object(members).write(into: &out)
            out.append(UInt8(ascii: "\n"))
        }
        let safeName = String(stream.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
        let file = directory.appendingPathComponent("\(safeName).jsonl")
        let bytes = out
        try lock.withLock {
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                if !FileManager.default.fileExists(atPath: file.path) {
                    _ = FileManager.default.createFile(atPath: file.path, contents: nil)
                }
                let handle = try FileHandle(forWritingTo: file)
                defer { try? handle.close() }
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(bytes))
            } catch {
                throw SyncError(.storageFailure, "could not append to stream file \(file.lastPathComponent)")
            }
        }
    }
}

/// Serializes appends to the stream files of one sink.
final class FileLock: Sendable {
    private let mutex = NSLock()
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        mutex.lock()
        defer { mutex.unlock() }
        return try body()
    }
}
