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
    /// and its answer comes well within a request's deadline on a slow link); 4 MiB held whole
    /// over one that does not (its library keeps a copy of its own while it sends: an append
    /// holds about three times its size).
    public var attachmentRequestLimit: Int64 { transport.streamsRequestBodies ? 16 << 20 : 4 << 20 }

    /// The bytes one download request asks for: the transport's
    /// ``HTTPTransport/streamedResponseLimit`` over a transport that holds what arrives until
    /// it is read (`URLSessionTransport`: 4 MiB, asked for one range after the other), so a
    /// download holds at most that much however large the file and however slow the disk and
    /// the hash behind it; `nil` over one that reads only as fast as it is asked
    /// (AsyncHTTPClient, whose body streams with back-pressure), which asks for the rest of
    /// the file in one request.
    public var attachmentDownloadWindow: Int64? { transport.streamedResponseLimit.map { Int64(max(1, $0)) } }

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
        try await readFile(sha256, size: nil, from: offset, body)
    }

    /// Reads `attachment` from `offset` on as ``readAttachment(_:from:_:)`` does; every answer
    /// must say the remote's file has `attachment`'s size, checked before any of its bytes is
    /// handed over (``SyncError/Code/attachmentDamaged`` otherwise).
    public func readAttachment(_ attachment: Attachment, from offset: Int64,
                               _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        try await readFile(attachment.sha256, size: attachment.size, from: offset, body)
    }

    /// Reads the file from `offset` to its end: in ranges of ``attachmentDownloadWindow``, each
    /// asked for once the one before was read, or in one request for the rest. Every answer
    /// must agree on the file's size (`size`, when known) and its entity tag: a file is named
    /// by its hash, so its bytes cannot change between two requests.
    private func readFile(_ sha256: String, size: Int64?, from offset: Int64,
                          _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        var position = offset, known = size
        var tag: String?
        while true {
            if Task.isCancelled { throw SyncError(.cancelled, "the download was cancelled") }
            let last = attachmentDownloadWindow.map { position + $0 - 1 }
            guard let answer = try await readRange(sha256, from: position, through: last, size: known, tag: &tag, body) else {
                return false
            }
            position = answer.end
            known = answer.total
            if position >= answer.total { return true }
        }
    }

    /// One GET of bytes `first` through `last` of the file (to its end when `last` is `nil`),
    /// handed to `body` as they arrive. Returns where they ended and the file's size; `nil` when
    /// the remote has no such file for this identity. The answer's size must be `size` and its
    /// entity tag `tag`, when known (``SyncError/Code/attachmentDamaged`` otherwise); `tag`
    /// takes the answer's when it had none.
    ///
    /// A server, or a proxy, that serves no ranges answers `200` with the whole file. Over a
    /// transport that holds what arrives until it is read (``attachmentDownloadWindow``), that
    /// is taken only when its `Content-Length` says it fits the window; a larger one, or one
    /// of no announced length, would arrive as fast as the network carries it whatever the
    /// disk does, and is refused (``SyncError/Code/rejected``) before a byte is read. A `200`
    /// to a resumed download (`first > 0`) is read from its start: the bytes before `first`
    /// are the ones received before, and are skipped (the whole file's hash still checks them).
    private func readRange(_ sha256: String, from first: Int64, through last: Int64?, size: Int64?, tag: inout String?,
                           _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> (end: Int64, total: Int64)? {
        let name = "attachment \(sha256.prefix(12))…"
        var headers: [(String, String)] = []
        if first > 0 || last != nil { headers.append(("Range", "bytes=\(first)-\(last.map { String($0) } ?? "")")) }
        let response = try await attachmentRequest(.get, "/v1/attachments/\(sha256)", headers: headers)
        // The bytes this answer carries, the file's size (when the answer says them), and where
        // in the file the answer begins.
        let count: Int64?, total: Int64?, start: Int64
        switch response.status {
        case 404:
            return nil
        case 200:
            // The whole file: a server, or a proxy, that serves no ranges.
            count = response.header("Content-Length").flatMap { Int64($0) }
            total = count
            start = 0
            if let window = attachmentDownloadWindow, count.map({ $0 > window }) ?? true {
                let length = count.map { "its \($0) bytes" } ?? "a length it does not announce"
                throw SyncError(.rejected, "the server answered a range request of \(name) with the whole file (\(length)): over this transport a download takes at most \(window) bytes per request, so a server or proxy that ignores Range cannot serve a larger file")
            }
        case 206:
            guard let answer = response.header("Content-Range").flatMap({ ContentRange($0) }), let range = answer.range,
                  range.lowerBound == first, last.map({ range.upperBound <= $0 }) ?? true else {
                throw SyncError(.transient, "the server's answer to a range request of \(name) does not carry the range asked for")
            }
            count = range.upperBound - range.lowerBound + 1
            total = answer.complete
            start = first
        case 416:
            // No byte from `first` on: the file is whole here when the server says it has `first` bytes.
            guard let answer = response.header("Content-Range").flatMap({ ContentRange($0) }), answer.range == nil,
                  answer.complete == first else { throw try await Self.attachmentFailure(response) }
            count = 0
            total = first
            start = first
        default:
            throw try await Self.attachmentFailure(response)
        }
        try Self.check(name, size: size, answered: total)
        if let total, total < first {
            throw SyncError(.attachmentDamaged, "the remote's file of \(name) has \(total) bytes, fewer than the \(first) received before")
        }
        if let answered = response.header("ETag") {
            if let tag, tag != answered { throw SyncError(.attachmentDamaged, "the remote's file of \(name) changed between two requests") }
            tag = answered
        }
        var received: Int64 = 0
        do {
            while let piece = try await response.body.next() {
                guard !piece.isEmpty else { continue }
                if let count, received + Int64(piece.count) > count {
                    throw SyncError(.attachmentDamaged, "the remote sent more bytes of \(name) than its answer announced")
                }
                // Where `piece` begins in the file: a whole file's bytes before `first` were received before.
                let at = start + received
                received += Int64(piece.count)
                if at >= first {
                    try await body(piece)
                } else if start + received > first {
                    try await body(Array(piece[Int(first - at)...]))
                }
            }
        } catch let error as SyncError {
            throw error
        } catch {
            if Task.isCancelled { throw SyncError(.cancelled, "the download was cancelled") }
            throw SyncError(.transient, "the download of \(sha256.prefix(12))… broke off: \(describe(error))")
        }
        if let count, received < count {
            throw SyncError(.transient, "the download of \(sha256.prefix(12))… broke off after \(received) of \(count) bytes")
        }
        let end = start + received
        // A whole file of no announced length is as long as what came.
        if total == nil {
            try Self.check(name, size: size, answered: end)
            if end < first {
                throw SyncError(.attachmentDamaged, "the remote's file of \(name) has \(end) bytes, fewer than the \(first) received before")
            }
        }
        return (end, total ?? end)
    }

    /// Throws ``SyncError/Code/attachmentDamaged`` when the remote's file is not of the size
    /// known for it.
    private static func check(_ name: String, size: Int64?, answered: Int64?) throws {
        guard let size, let answered, size != answered else { return }
        throw SyncError(.attachmentDamaged, "the remote's file of \(name) has \(answered) bytes, not the \(size) its reference says")
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
