import OfflineSync
import OfflineSyncWire

extension NativeRemote {
    /// Opens a pull as the server's page stream (`POST /v2/pull`): the server reads the next
    /// page while this client decodes and stores the last, instead of waiting for each
    /// page's request. A server without the route (older, or with streaming turned off) is
    /// pulled one `POST /v1/pull` per page instead. A server that refuses this client's
    /// version of the stream (406 `unsupportedVersion`) is ``SyncError/Code/unsupported``;
    /// bytes that are not version 1 of the stream are refused as malformed
    /// (``SyncError/Code/transient``, as a malformed `/v1/pull` answer is), never misread.
    public func openPull(_ request: PullRequest) -> any PullStream {
        NativePullStream(remote: self, request: request)
    }
}

/// ``NativeRemote``'s page stream: one response carries many pages; when it ends before
/// the pull does (the server's per-response bound) or breaks off, the next request starts
/// from the last page's cursor, so no page is lost or read twice. A response that breaks off
/// is a failed attempt, retried with the remote's backoff up to its attempts; the count
/// starts again with every page read. A response the transport cut because this reader fell
/// too far behind it (``ResponseOverflow``: URLSession cannot pause a response) is asked
/// again at once from the last page: what a slow store costs is a request, never memory.
actor NativePullStream: PullStream {
    private let remote: NativeRemote
    private var request: PullRequest
    /// The response being read, with the watch that ends a read after `requestTimeout` of silence.
    private var body: (reader: any TransportBody, silence: SilenceWatch)?
    private var decoder = PageStreamDecoder()
    /// Pages read from the current response.
    private var pagesInResponse = 0
    private var finished = false
    private var fallback: PagedPullStream?
    private var failures = 0
    private var backoff: Backoff

    init(remote: NativeRemote, request: PullRequest) {
        self.remote = remote
        self.request = request
        self.backoff = Backoff(initial: remote.configuration.initialBackoff, maximum: remote.configuration.maxBackoff)
    }

    func next() async throws -> PullPage? {
        if let fallback { return try await fallback.next() }
        while !finished {
            if body == nil {
                switch try await open() {
                case .answered(let response):
                    body = (response.body, SilenceWatch(timeout: remote.configuration.requestTimeout))
                    decoder = PageStreamDecoder()
                    pagesInResponse = 0
                case .noSuchRoute:
                    let paged = PagedPullStream(remote: remote, request: request)
                    fallback = paged
                    return try await paged.next()
                }
            }
            do {
                if let page = try await nextPage() { return page }
            } catch let error as SyncError {
                body = nil
                throw error
            } catch {
                // The response broke off (reset, closed, silent too long): ask again from the
                // last page's cursor after the backoff, unless the attempts are spent.
                body = nil
                if Task.isCancelled { throw SyncError(.cancelled, "the request was cancelled") }
                // The transport cut a response its reader had fallen behind (it cannot pause
                // one): the pull goes on from the last page's cursor at once, as after a
                // response's end. Not a failure while each response gives a page.
                if error is ResponseOverflow, pagesInResponse > 0 {
                    remote.logger.debug("reopening the page stream the reader fell behind", metadata: ["reason": "\(remote.describe(error))"])
                    continue
                }
                failures += 1
                let failure = SyncError(.transient, "the page stream from /v2/pull broke off: \(remote.describe(error))")
                guard failures < remote.configuration.maxAttempts else { throw failure }
                remote.logger.debug("reopening the page stream", metadata: ["attempt": "\(failures)", "reason": "\(failure.message)"])
                do { try await Task.sleep(for: backoff.nextDelay()) } catch { throw SyncError(.cancelled, "the request was cancelled") }
            }
        }
        return nil
    }

    /// The next page of the current response; `nil` when the response ended cleanly (the
    /// pull goes on in a new one, or is finished). A malformed stream or a failure frame is
    /// a ``SyncError``; a connection that fails is thrown as it is.
    private func nextPage() async throws -> PullPage? {
        while true {
            let frame: PageStream.Frame?
            do {
                frame = try decoder.next()
            } catch let error as SyncError {
                throw SyncError(.transient, "the server's page stream is malformed: \(error.message)")
            }
            switch frame {
            case .page(let page)?:
                pagesInResponse += 1
                failures = 0
                backoff.reset()
                request.cursor = page.nextCursor
                if page.endsPull {
                    finished = true
                    body = nil
                }
                return page
            case .end?:
                body = nil
                guard pagesInResponse > 0 else {
                    throw SyncError(.transient, "the server's page stream is malformed: a response ended without a page")
                }
                return nil
            case .failure(let status, let code, let message)?:
                body = nil
                if status == 429 || status >= 500 {
                    throw StreamBrokeOff(reason: "the server answered \(status): \(message)")
                }
                throw NativeRemote.error(status: status, code: code, message: message)
            case nil:
                guard let chunk = try await nextChunk() else {
                    throw StreamBrokeOff(reason: "the response ended inside the stream, before its end frame")
                }
                chunk.withUnsafeBytes { decoder.append($0) }
            }
        }
    }

    /// The response's next bytes, or a failure when none come for the remote's request
    /// timeout (the response's deadline covers only its head, so a server that stops
    /// writing would otherwise hold the pull for ever). A silent read is left behind, not
    /// awaited: the response is dropped and asked for again.
    private func nextChunk() async throws -> [UInt8]? {
        guard let (reader, silence) = body else { return nil }
        return try await silence.race(Task.detached { try await reader.next() })
    }

    /// Sends the stream's request (with the remote's retries for failures before the stream begins).
    private func open() async throws -> NativeRemote.Exchange<TransportResponse> {
        let accept = "\(PageStream.mediaType); version=\(PageStream.version)"
        var headers = [("Accept", accept)]
        if let limit = remote.transport.streamedResponseLimit { headers.append((PageStream.responseBytesHeader, String(limit))) }
        // A legal response is the server's response bound plus one page, and a page may be as
        // large as a whole answer (``NativeRemote/Configuration/maxResponseBytes``): a cap
        // below that would cut a large page every time its reader is slower than the network.
        return try await remote.exchange(path: "/v2/pull", body: Wire.json(request).encoded, headers: headers,
                                         responseBufferLimit: remote.configuration.maxResponseBytes) { response in
            let type = response.header("Content-Type") ?? ""
            guard type.lowercased().hasPrefix(PageStream.mediaType) else {
                throw SyncError(.transient, "the server answered /v2/pull with '\(type)', not the page stream")
            }
            return response
        }
    }
}

/// A page stream's response that broke off or was answered with a failure worth retrying.
struct StreamBrokeOff: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}
