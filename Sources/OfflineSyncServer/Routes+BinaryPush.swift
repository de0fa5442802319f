import Hummingbird
import HTTPTypes
import NIOCore
import OfflineSync
import OfflineSyncService
import OfflineSyncWire

extension Routes {
    // MARK: Binary push

    /// `POST /v2/push`: `/v1/push` with the batch and its answer in ``PushBatch``'s binary
    /// form. The same checks in the same order, the same service call and the same
    /// notifications; what differs is only the encoding, so an answer here equals `/v1/push`'s
    /// minimal answer, decoded. A body in another format or version is 415, a request that
    /// does not accept the answer's format at this version 406 — each saying which version
    /// this server speaks — so a client built for another version learns why.
    func pushBinary(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let claims = try context.requireClaims()
        try Self.checkBinaryPushTypes(request.headers)
        let buffer = try await readBody(request)
        let operations = try await decode {
            try buffer.withUnsafeReadableBytes {
                try PushBatch.decodeOperations($0, reservingExtraFields: OfflineSyncService.fieldsAddedToPushedItems)
            }
        }
        try checkBatchSize(operations.count)
        let report = try await apply(operations, claims: claims, request: request)
        let bytes = PushBatch.encode(results: report.results, answering: operations)
        return Response(status: .ok, headers: [.contentType: "\(PushBatch.resultsMediaType); version=\(PushBatch.version)"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// Refuses a request whose `Content-Type` is not the binary push at this version (415), or
    /// whose `Accept` does not name the binary answer at this version (406).
    static func checkBinaryPushTypes(_ headers: HTTPFields) throws {
        let wanted = "\(PushBatch.mediaType); version=\(PushBatch.version)"
        switch mediaVersion(of: PushBatch.mediaType, in: headers[values: .contentType], version: PushBatch.version) {
        case .matching: break
        case .none:
            throw APIError(.unsupportedMediaType, .unsupportedMediaType, "POST /v2/push takes a binary push: send Content-Type: \(wanted)")
        case .other(let versions):
            throw APIError(.unsupportedMediaType, .unsupportedVersion,
                           "this server reads binary push version \(PushBatch.version); the request is version \(versions.joined(separator: ", ")) (send Content-Type: \(wanted), or push JSON with POST /v1/push)")
        }
        let accepted = "\(PushBatch.resultsMediaType); version=\(PushBatch.version)"
        switch mediaVersion(of: PushBatch.resultsMediaType, in: headers[values: .accept], version: PushBatch.version) {
        case .matching: break
        case .none:
            throw APIError(.notAcceptable, .notAcceptable, "POST /v2/push answers only in binary: send Accept: \(accepted)")
        case .other(let versions):
            throw APIError(.notAcceptable, .unsupportedVersion,
                           "this server writes binary push answers version \(PushBatch.version); the request accepts version \(versions.joined(separator: ", ")) (send Accept: \(accepted), or push JSON with POST /v1/push)")
        }
    }
}
