import Hummingbird
import HTTPTypes
import NIOCore
import OfflineSync
import OfflineSyncService
import OfflineSyncWire

extension Routes {
    // MARK: Page stream

    /// `POST /v2/pull`: the same request as `/v1/pull`, answered with a ``PageStream`` of up
    /// to ``SyncServer/Configuration/pagesPerStream`` pages. Each page is read in its own read
    /// transaction, as `/v1/pull` reads it, and written before the next is read, so the server
    /// holds one page however long the pull; while the client's connection is full, writing
    /// waits and nothing more is read.
    ///
    /// Everything that can be refused is refused before the stream begins, with the same
    /// status and body as `/v1/pull` (the first page is read first); a failure after that is a
    /// failure frame, since the 200 has gone.
    func pullStream(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let claims = try context.requireClaims()
        try Self.checkAcceptsPageStream(request.headers[values: .accept])
        let body = try await readJSON(request)
        let pull = try await decode { try Wire.pullRequest(body) }
        guard pull.limit <= configuration.maxPageSize else {
            throw APIError(.badRequest, .pageSizeExceeded, "'limit' may be at most \(configuration.maxPageSize)")
        }
        let first = try await pulled(claims: claims, pull)
        let pagesPerStream = configuration.pagesPerStream
        // A client that cannot pause a response it reads (URLSession) bounds its bytes.
        let byteLimit = request.headers[HTTPField.Name(PageStream.responseBytesHeader)!].flatMap { Int($0) }.map { max(1, $0) } ?? .max
        let headers: HTTPFields = [.contentType: "\(PageStream.mediaType); version=\(PageStream.version)"]
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            var pull = pull
            var out = PageStream.header
            var page = first
            var sent = 1
            var written = 0
            while true {
                PageStream.write(page, into: &out)
                written += out.count
                if page.endsPull || sent == pagesPerStream || written >= byteLimit { break }
                try await writer.write(ByteBuffer(bytes: out))
                out.removeAll(keepingCapacity: true)
                pull.cursor = page.nextCursor
                do {
                    // `call` answers a service error as `/v1/pull` would, and logs a 5xx.
                    page = try await pulled(claims: claims, pull)
                    sent += 1
                } catch {
                    let answer = error as? APIError ?? APIError.internalError
                    if !(error is APIError) { logger.error("page stream failed", metadata: ["error": "\(type(of: error))"]) }
                    PageStream.writeFailure(status: answer.status.code, error: answer.code, message: answer.message, into: &out)
                    try await writer.write(ByteBuffer(bytes: out))
                    try await writer.finish(nil)
                    return
                }
            }
            PageStream.writeEnd(into: &out)
            try await writer.write(ByteBuffer(bytes: out))
            try await writer.finish(nil)
        })
    }

    /// Refuses a request whose `Accept` does not name the page stream at a version this
    /// server writes: 406, saying which version it writes, so a client built for another
    /// format learns why instead of reading bytes it cannot understand.
    static func checkAcceptsPageStream(_ accept: [String]) throws {
        let wanted = "Accept: \(PageStream.mediaType); version=\(PageStream.version)"
        switch mediaVersion(of: PageStream.mediaType, in: accept, version: PageStream.version) {
        case .matching: return
        case .none:
            throw APIError(.notAcceptable, .notAcceptable, "POST /v2/pull answers only with the page stream: send \(wanted)")
        case .other(let versions):
            throw APIError(.notAcceptable, .unsupportedVersion,
                           "this server writes page stream version \(PageStream.version); the request accepts version \(versions.joined(separator: ", ")) (send \(wanted), or pull page by page with POST /v1/pull)")
        }
    }

    /// What a header's media types say of `type`: named at the version asked about, named at
    /// other versions only, or not named.
    enum MediaVersion: Equatable {
        case matching
        case other([String])
        case none
    }

    /// Reads `type`'s `version` parameter out of header `values` (comma-separated media
    /// types, each with `;`-separated parameters; names compared ignoring case).
    static func mediaVersion(of type: String, in values: [String], version: UInt8) -> MediaVersion {
        // The form our clients send, told without splitting and trimming (which go through
        // Foundation and cost a visible share of a small push).
        if values.count == 1, values[0].utf8.elementsEqual("\(type); version=\(version)".utf8) { return .matching }
        var versions: [String] = []
        for entry in values.flatMap({ $0.split(separator: ",") }) {
            let parts = entry.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let name = parts.first, name.lowercased() == type else { continue }
            let named = parts.dropFirst().first { $0.lowercased().hasPrefix("version=") }.map { String($0.dropFirst("version=".count)) }
            if named == String(version) { return .matching }
            versions.append(named ?? "(none)")
        }
        return versions.isEmpty ? .none : .other(versions)
    }
}
