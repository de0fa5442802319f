import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService
import OfflineSyncWire

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
            let (caller, signer) = try authenticate(request, context, body: bytes)
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
    func authenticate(_ request: Request, _ context: SyncRequestContext, body: [UInt8]) throws -> (CognitoCaller, SigV4Verifier.Signer?) {
        guard let header = request.headers[.authorization] else { throw CognitoError.notAuthorized("missing credentials") }
        if header.lowercased().hasPrefix("bearer ") {
            // Verified by the authentication middleware, as on every other route.
            switch context.bearer {
            case .verified(let caller): return (.identity(caller.claims.identity.text, via: "token"), nil)
            case .unverifiable:
                // Not a refusal: the token's issuer's keys cannot be had now, and a retry may
                // pass (the AWS SDKs retry this exception with backoff).
                throw CognitoError("TooManyRequestsException", .tooManyRequests, "the identity provider's keys cannot be had now; retry later")
            case .none, .refused: throw CognitoError.notAuthorized()
            }
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

    /// An identity's caller reaches only its own identity, spelled with the same bytes (a
    /// canonically equivalent spelling is another identity); a developer key reaches any.
    func authorize(_ caller: CognitoCaller, identity: String) throws {
        if case .identity(let own, _) = caller, ExactString(own) != ExactString(identity) {
            throw CognitoError.notAuthorized("these credentials may not reach identity '\(identity)'")
        }
    }

    func requireDeveloper(_ call: Call) throws {
        guard case .developer = call.caller else {
            throw CognitoError.notAuthorized("pool-level operations need a developer access key")
        }
    }
}
