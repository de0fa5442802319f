import OfflineSync
import OfflineSyncWire

// Attachments over the server's resumable-upload routes (`/v1/attachments`: see
// Docs/openapi.yaml and the server's Routes+Attachments.swift): offset retrieval with HEAD,
// creation with POST, appends with PATCH, downloads with GET and `Range`.

extension NativeRemote: AttachmentRemote {
    /// The interop version of draft-ietf-httpbis-resumable-upload this client speaks.
    static let uploadInteropVersion = "6"

    public func attachmentUploadState(_ sha256: String) async throws -> AttachmentUploadState? {
        let response = try await attachmentRequest(.head, "/v1/attachments/\(sha256)/upload")
        switch response.status {
        case 204, 200: return try Self.uploadState(response)
        case 404: return nil
        default: throw try await Self.attachmentFailure(response)
        }
    }

    public func appendAttachment(_ attachment: Attachment, offset: Int64, bytes: [UInt8], complete: Bool) async throws -> AttachmentUploadState {
        try await append(attachment, offset: offset, complete: complete, body: bytes, stream: nil)
    }

    /// 16 MiB over a transport that streams request bodies (a request holds a MiB at a time,
    /// and its answer comes well within a request's deadline on a slow link); 8 MiB held whole
    /// over one that does not.
    public var attachmentRequestLimit: Int64 { transport.streamsRequestBodies ? 16 << 20 : 8 << 20 }

    public func appendAttachment(_ attachment: Attachment, offset: Int64, length: Int64, complete: Bool,
                                 read: @escaping @Sendable (_ offset: Int64, _ count: Int) async throws -> [UInt8]) async throws -> AttachmentUploadState {
        guard transport.streamsRequestBodies else {
            let bytes = try await AttachmentTransfer.collect(attachment, offset: offset, length: length, read: read)
            return try await appendAttachment(attachment, offset: offset, bytes: bytes, complete: complete)
        }
        let stream = TransportBodyStream(length: length) { at, count in try await read(offset + at, count) }
        return try await append(attachment, offset: offset, complete: complete, body: nil, stream: stream)
    }

    /// A creation (offset 0, POST) or an append (PATCH) carrying `body` or `stream`.
    private func append(_ attachment: Attachment, offset: Int64, complete: Bool, body: [UInt8]?,
                        stream: TransportBodyStream?) async throws -> AttachmentUploadState {
        let response: TransportResponse
        if offset == 0 {
            response = try await attachmentRequest(.post, "/v1/attachments/\(attachment.sha256)", headers: [
                ("Upload-Complete", complete ? "?1" : "?0"), ("Upload-Length", String(attachment.size)),
                ("Content-Type", "application/octet-stream"),
            ], body: body, stream: stream)
        } else {
            response = try await attachmentRequest(.patch, "/v1/attachments/\(attachment.sha256)/upload", headers: [
                ("Upload-Offset", String(offset)), ("Upload-Complete", complete ? "?1" : "?0"),
                ("Content-Type", "application/partial-upload"),
            ], body: body, stream: stream)
        }
        switch response.status {
        case 200, 201, 204: return try Self.uploadState(response)
        case 409: throw SyncError(.conflict, "the server's upload is at offset \(response.header("Upload-Offset") ?? "?")")
        case 404: throw SyncError(.conflict, "the server has no upload of this attachment")
        default: throw try await Self.attachmentFailure(response)
        }
    }

    public func readAttachment(_ sha256: String, from offset: Int64,
                               _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        let response = try await attachmentRequest(.get, "/v1/attachments/\(sha256)",
                                                   headers: offset > 0 ? [("Range", "bytes=\(offset)-")] : [])
        switch response.status {
        case 200 where offset == 0, 206: break
        case 404: return false
        default: throw try await Self.attachmentFailure(response)
        }
        do {
            while let piece = try await response.body.next() {
                if !piece.isEmpty { try await body(piece) }
            }
        } catch let error as SyncError {
            throw error
        } catch {
            if Task.isCancelled { throw SyncError(.cancelled, "the download was cancelled") }
            throw SyncError(.transient, "the download of \(sha256.prefix(12))… broke off: \(describe(error))")
        }
        return true
    }

    /// One request to an attachment route, with the token (asked again once after a 401).
    /// A failure to get any answer is ``SyncError/Code/transient``; the caller reads the status.
    private func attachmentRequest(_ method: TransportRequest.Method, _ path: String, headers: [(String, String)] = [],
                                   body: [UInt8]? = nil, stream: TransportBodyStream? = nil) async throws -> TransportResponse {
        var askedAgain = false
        while true {
            let bearer = try await currentToken()
            var request = TransportRequest(method: method, url: baseURL + path,
                                           headers: [("Authorization", "Bearer \(bearer)"), ("Upload-Draft-Interop-Version", Self.uploadInteropVersion)]
                                               + headers.map { ($0.0, $0.1) })
            request.body = body
            request.bodyStream = stream
            let response: TransportResponse
            do {
                response = try await transport.execute(request, timeout: configuration.requestTimeout)
            } catch is CancellationError {
                throw SyncError(.cancelled, "the request was cancelled")
            } catch {
                if Task.isCancelled { throw SyncError(.cancelled, "the request was cancelled") }
                throw SyncError(.transient, "the request to \(path) failed: \(describe(error))")
            }
            if response.status == 401, !askedAgain {
                askedAgain = true
                continue
            }
            return response
        }
    }

    private static func uploadState(_ response: TransportResponse) throws -> AttachmentUploadState {
        guard let text = response.header("Upload-Offset"), let offset = Int64(text) else {
            throw SyncError(.transient, "the server's upload answer has no Upload-Offset")
        }
        return AttachmentUploadState(offset: offset, complete: response.header("Upload-Complete") == "?1")
    }

    /// The typed error of an attachment route's refusal (its body is the server's JSON error).
    private static func attachmentFailure(_ response: TransportResponse) async throws -> SyncError {
        let status = response.status
        let bytes = (try? await response.body.collect(upTo: 1 << 16)) ?? []
        let answer = try? bytes.withUnsafeBytes { try JSON.parse($0) }
        var code = "http\(status)", message = "HTTP \(status)"
        if case .string(let c)? = answer?["error"]?["code"], case .string(let m)? = answer?["error"]?["message"] { (code, message) = (c, m) }
        if code == "attachmentDamaged" { return SyncError(.attachmentDamaged, message) }
        if status == 429 || status >= 500 { return SyncError(.transient, "the server answered \(status): \(message)") }
        return error(status: status, code: code, message: message)
    }
}
