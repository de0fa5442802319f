import Foundation
import Hummingbird
import HTTPTypes
import NIOCore
import OfflineSync
import OfflineSyncService

// Attachments over HTTP: uploads speak the IETF resumable-upload protocol
// (draft-ietf-httpbis-resumable-upload, interop versions 3, 5 and 6, the ones swift-nio-extras'
// NIOResumableUpload accepts), downloads are plain GETs with `Range`. Every route needs a
// token; every "not yours" is the same 404 as "not there".
//
// - `OPTIONS /v1/attachments`: the limits (`Upload-Limit: max-size=…`).
// - `POST /v1/attachments/{sha256}`: upload creation (`Upload-Complete`, optional
//   `Upload-Length`, the first bytes as the body); 201 with `Location` while incomplete.
// - `HEAD /v1/attachments/{sha256}/upload`: offset retrieval (204, `Upload-Offset`, `Upload-Complete`).
// - `PATCH /v1/attachments/{sha256}/upload`: append at `Upload-Offset` (409 with the server's
//   offset when it differs).
// - `DELETE /v1/attachments/{sha256}/upload`: cancel an unfinished upload.
// - `GET`/`HEAD /v1/attachments/{sha256}`: the bytes, with RFC 9110's single ranges and
//   conditional requests (`DownloadAnswer`), served as the media type a row the caller may
//   read declares (`AttachmentMediaType`), in a sandbox.

extension Routes {
    static let interopVersion = HTTPField.Name("Upload-Draft-Interop-Version")!
    static let uploadComplete = HTTPField.Name("Upload-Complete")!
    static let uploadIncomplete = HTTPField.Name("Upload-Incomplete")!
    static let uploadOffset = HTTPField.Name("Upload-Offset")!
    static let uploadLength = HTTPField.Name("Upload-Length")!
    static let uploadLimit = HTTPField.Name("Upload-Limit")!
    static let supportedInteropVersions: Set<Int> = [3, 5, 6]
    /// Bytes handed to the connection at a time when a download is sent.
    static let downloadSlice = 64 << 10
    /// The `Content-Security-Policy` of every download. A file is served with the media type
    /// a row declared, and a browser that opened an HTML or SVG file from this origin would
    /// run its scripts here (where the console lives): `sandbox` gives the document an opaque
    /// origin with no scripts, forms or plugins, and `default-src 'none'` lets it load nothing.
    /// A browser shows an image, plays audio or video and displays text under it as usual.
    static let downloadPolicy = "sandbox; default-src 'none'"
    /// Bytes gathered from a request body before they are stored as one piece.
    static var attachmentPiece: Int { OfflineSyncService.attachmentPiece }

    func addAttachments(to router: Router<SyncRequestContext>) {
        router.on("v1/attachments", method: .options) { request, context in try attachmentOptions(request, context) }
        router.post("v1/attachments/:hash") { request, context in try await withUploadLimit { try await createUpload(request, context) } }
        router.head("v1/attachments/:hash/upload") { request, context in try await uploadOffset(request, context) }
        router.patch("v1/attachments/:hash/upload") { request, context in try await withUploadLimit { try await appendUpload(request, context) } }
        router.delete("v1/attachments/:hash/upload") { request, context in try await cancelUpload(request, context) }
        router.get("v1/attachments/:hash") { request, context in try await download(request, context, head: false) }
        router.head("v1/attachments/:hash") { request, context in try await download(request, context, head: true) }
    }

    private func attachmentOptions(_ request: Request, _ context: SyncRequestContext) throws -> Response {
        _ = try context.requireClaims()
        let version = try Self.interopVersion(request.headers) ?? 6
        return Response(status: .ok, headers: [Self.interopVersion: String(version), Self.uploadLimit: uploadLimitValue])
    }

    /// The `Upload-Limit` field's value: the largest file, and the smallest (none).
    private var uploadLimitValue: String { "max-size=\(service.attachmentLimits.maximumSize), min-size=0" }

    /// Runs an upload route, adding `Upload-Limit` to a 413 (the size limit or the quota), as
    /// the resumable-upload draft asks, so a client learns the limit from the refusal itself.
    private func withUploadLimit(_ body: () async throws -> Response) async throws -> Response {
        do { return try await body() } catch var error as APIError where error.status == .contentTooLarge {
            error.headers[Self.uploadLimit] = uploadLimitValue
            throw error
        }
    }

    private func createUpload(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let claims = try context.requireClaims()
        let hash = try context.parameters.require("hash")
        let version = try Self.interopVersion(request.headers) ?? 6
        guard let complete = Self.uploadComplete(request.headers, version: version) else {
            throw APIError(.badRequest, .invalidRequest, "an upload creation carries Upload-Complete (?0 or ?1)")
        }
        if let offset = Self.structuredInteger(request.headers[Self.uploadOffset]), offset != 0 {
            throw APIError(.badRequest, .invalidRequest, "an upload creation starts at offset 0")
        }
        var length = Self.structuredInteger(request.headers[Self.uploadLength])
        if length == nil, complete, let contentLength = request.headers[.contentLength].flatMap(Int64.init) { length = contentLength }
        if complete, let length, length >= 0, length <= Int64(Self.attachmentPiece) {
            return try await storeWhole(request, claims: claims, hash: hash, length: Int(length), version: version)
        }
        let state = try await call { try await service.beginAttachmentUpload(claims: claims, hash: hash, length: length) }
        var headers = Self.uploadHeaders(state, version: version)
        headers[.location] = "/v1/attachments/\(hash)/upload"
        if state.complete { return Response(status: .ok, headers: headers) }
        guard state.offset == 0 else { return Response(status: .conflict, headers: Self.uploadHeaders(state, version: version)) }
        let finished = try await receive(request, claims: claims, hash: hash, from: 0, complete: complete, version: version)
        headers = Self.uploadHeaders(finished, version: version)
        headers[.location] = "/v1/attachments/\(hash)/upload"
        return Response(status: finished.complete ? .ok : .created, headers: headers)
    }

    /// A whole small file in one request: its body (at most a piece) is read, then stored,
    /// checked and finished in one transaction.
    private func storeWhole(_ request: Request, claims: Claims, hash: String, length: Int, version: Int) async throws -> Response {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length)
        for try await buffer in request.body {
            server.metrics.attachmentBytes("received", buffer.readableBytes)
            guard bytes.count + buffer.readableBytes <= length else {
                throw APIError(.badRequest, .invalidRequest, "the body is longer than the upload's declared length of \(length)")
            }
            buffer.withUnsafeReadableBytes { bytes.append(contentsOf: $0) }
        }
        guard bytes.count == length else {
            throw APIError(.badRequest, .invalidRequest, "the body has \(bytes.count) bytes, short of the upload's declared length of \(length); nothing was kept")
        }
        let received = bytes
        let state = try await call { try await service.storeAttachment(claims: claims, hash: hash, bytes: received) }
        var headers = Self.uploadHeaders(state, version: version)
        headers[.location] = "/v1/attachments/\(hash)/upload"
        return Response(status: state.complete ? .ok : .conflict, headers: headers)
    }

    private func uploadOffset(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let claims = try context.requireClaims()
        let hash = try context.parameters.require("hash")
        let version = try Self.interopVersion(request.headers) ?? 6
        guard let (state, length) = try await call({ try await service.attachmentUploadProgress(claims: claims, hash: hash) }) else {
            return Self.attachmentNotFound
        }
        var headers = Self.uploadHeaders(state, version: version)
        if let length { headers[Self.uploadLength] = String(length) }
        headers[.cacheControl] = "no-store"
        return Response(status: .noContent, headers: headers)
    }

    private func appendUpload(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let claims = try context.requireClaims()
        let hash = try context.parameters.require("hash")
        let version = try Self.interopVersion(request.headers) ?? 6
        guard let offset = Self.structuredInteger(request.headers[Self.uploadOffset]) else {
            throw APIError(.badRequest, .invalidRequest, "an append carries Upload-Offset")
        }
        if version >= 6, request.headers[.contentType] != "application/partial-upload" {
            throw APIError(.badRequest, .invalidRequest, "an append carries Content-Type: application/partial-upload")
        }
        let complete = Self.uploadComplete(request.headers, version: version) ?? true
        guard let state = try await call({ try await service.attachmentUploadState(claims: claims, hash: hash) }) else { return Self.attachmentNotFound }
        guard !state.complete, state.offset == offset else {
            return Response(status: .conflict, headers: Self.uploadHeaders(state, version: version))
        }
        let finished = try await receive(request, claims: claims, hash: hash, from: offset, complete: complete, version: version)
        return Response(status: finished.complete ? .ok : .noContent, headers: Self.uploadHeaders(finished, version: version))
    }

    private func cancelUpload(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let claims = try context.requireClaims()
        let hash = try context.parameters.require("hash")
        guard try await call({ try await service.cancelAttachmentUpload(claims: claims, hash: hash) }) else { return Self.attachmentNotFound }
        return Response(status: .noContent)
    }

    /// Stores the request's body from `offset` in pieces of ``attachmentPiece``, then, when
    /// the client says it is complete, checks and finishes the upload. A body cut off keeps
    /// every whole piece stored before the cut.
    private func receive(_ request: Request, claims: Claims, hash: String, from offset: Int64, complete: Bool,
                         version: Int) async throws -> AttachmentUploadState {
        var position = offset
        var pending: [UInt8] = []
        pending.reserveCapacity(Self.attachmentPiece)
        func store() async throws {
            guard !pending.isEmpty else { return }
            let bytes = pending
            position = try await call { try await service.appendAttachment(claims: claims, hash: hash, offset: position, bytes: bytes) }
            pending.removeAll(keepingCapacity: true)
        }
        var body = request.body.makeAsyncIterator()
        while true {
            let next: ByteBuffer?
            do {
                next = try await body.next()
            } catch {
                // The client stopped sending (a killed app, a lost network): what arrived is
                // stored for it to resume from. That is the client's doing, answered (to nobody)
                // and counted as a 400, not a server error.
                try await store()
                throw APIError(.badRequest, .invalidRequest, "the upload's body was cut off; what arrived is kept, up to offset \(position)")
            }
            guard var buffer = next else { break }
            server.metrics.attachmentBytes("received", buffer.readableBytes)
            while buffer.readableBytes > 0 {
                let take = min(buffer.readableBytes, Self.attachmentPiece - pending.count)
                buffer.withUnsafeReadableBytes { pending.append(contentsOf: $0.prefix(take)) }
                buffer.moveReaderIndex(forwardBy: take)
                if pending.count == Self.attachmentPiece { try await store() }
            }
        }
        try await store()
        guard complete else { return AttachmentUploadState(offset: position, complete: false) }
        return try await call { try await service.finishAttachmentUpload(claims: claims, hash: hash) }
    }

    private func download(_ request: Request, _ context: SyncRequestContext, head: Bool) async throws -> Response {
        let claims = try context.requireClaims()
        let hash = try context.parameters.require("hash")
        guard let file = try await call({ try await service.readableAttachment(claims: claims, hash: hash) }) else { return Self.attachmentNotFound }
        let size = file.size, etag = "\"\(hash)\""
        let answer = DownloadAnswer.decide(range: request.headers[.range], ifRange: request.headers[.ifRange],
                                           ifMatch: request.headers[.ifMatch], ifNoneMatch: request.headers[.ifNoneMatch],
                                           etag: etag, size: size, rangeApplies: !head)
        var headers: HTTPFields = [
            .acceptRanges: "bytes", .eTag: etag, .cacheControl: "private, max-age=31536000, immutable",
            .xContentTypeOptions: "nosniff", .contentSecurityPolicy: Self.downloadPolicy,
        ]
        let status: HTTPResponse.Status, first: Int64, count: Int64
        switch answer {
        case .notModified:
            return Self.notModified(headers, size: size)
        case .preconditionFailed:
            headers[.contentLength] = "0"
            return Response(status: .preconditionFailed, headers: headers)
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(size)"
            headers[.contentLength] = "0"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        case .whole:
            (status, first, count) = (.ok, 0, size)
        case .partial(let from, let last):
            (status, first, count) = (.partialContent, from, last - from + 1)
            headers[.contentRange] = "bytes \(from)-\(last)/\(size)"
        }
        headers[.contentType] = file.contentType?.value ?? "application/octet-stream"
        headers[.contentDisposition] = file.contentType?.opensInline == true ? "inline" : "attachment"
        headers[.contentLength] = String(count)
        if head || count == 0 { return Response(status: status, headers: headers) }
        let routes = self
        return Response(status: status, headers: headers, body: ResponseBody { writer in
            var left = count
            try await routes.call { try await routes.service.readAttachment(file, from: first) { piece in
                // A stored piece goes out in slices, so the copy the connection holds stays
                // small while the client is slower than the store; a closed range stops
                // reading at its last byte.
                let take = Int(min(Int64(piece.count), left))
                for start in stride(from: 0, to: take, by: Self.downloadSlice) {
                    try await writer.write(ByteBuffer(bytes: piece[start..<min(take, start + Self.downloadSlice)]))
                }
                routes.server.metrics.attachmentBytes("sent", take)
                left -= Int64(take)
                return left > 0
            } }
            try await writer.finish(nil)
        })
    }

    /// A 304 with the headers a 200 would carry, `Content-Length` the file's size included:
    /// RFC 9110 (8.6) lets a 304 carry no `Content-Length` other than the 200's, and
    /// Hummingbird would otherwise give its empty body `Content-Length: 0` (it keeps one that
    /// is set). NIO's encoder leaves the field off a 304 on the wire, which the RFC allows too.
    static func notModified(_ headers: HTTPFields, size: Int64) -> Response {
        var headers = headers
        headers[.contentLength] = String(size)
        return Response(status: .notModified, headers: headers)
    }

    /// The same 404 for "no such file" and "not yours", with no body that could differ.
    static var attachmentNotFound: Response { Response(status: .notFound, headers: [.contentLength: "0"]) }

    static func uploadHeaders(_ state: AttachmentUploadState, version: Int) -> HTTPFields {
        var headers: HTTPFields = [interopVersion: String(version), uploadOffset: String(state.offset)]
        if version >= 5 { headers[uploadComplete] = state.complete ? "?1" : "?0" } else { headers[uploadIncomplete] = state.complete ? "?0" : "?1" }
        return headers
    }

    /// The request's interop version: `nil` when absent; 400 for one this server does not speak.
    static func interopVersion(_ headers: HTTPFields) throws -> Int? {
        guard let text = headers[interopVersion] else { return nil }
        guard let version = Int(text), supportedInteropVersions.contains(version) else {
            throw APIError(.badRequest, .unsupportedVersion, "this server speaks resumable-upload interop versions 3, 5 and 6")
        }
        return version
    }

    /// `Upload-Complete` (versions 5 and later) or the inverse of `Upload-Incomplete` (3).
    static func uploadComplete(_ headers: HTTPFields, version: Int) -> Bool? {
        if version >= 5 { return structuredBoolean(headers[uploadComplete]) }
        return structuredBoolean(headers[uploadIncomplete]).map { !$0 }
    }

    /// An RFC 8941 boolean item: `?1` or `?0` (``UploadFields/boolean(_:)``).
    static func structuredBoolean(_ text: String?) -> Bool? { text.flatMap(UploadFields.boolean) }

    /// An RFC 8941 non-negative integer item (``UploadFields/integer(_:)``).
    static func structuredInteger(_ text: String?) -> Int64? { text.flatMap(UploadFields.integer) }
}
