import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import OfflineSyncTestSupport

/// A real reverse proxy on a loopback port. It forwards `GET` and `POST` requests with their
/// token, type, `Accept` and `Range`, streams each answer through as it arrives (with its
/// `Content-Type` and `Content-Range`), and breaks off the first `cuts` answers of the kind
/// it cuts after `cutAfter` bytes of their body: the connection is closed mid-body, as a
/// network failure would, or, with `stall`, the answer sends nothing more until ``stop()``,
/// as a hung server would. It counts the requests per path and records the `Range` of each
/// request of the kind it cuts.
struct CuttingProxy {
    /// The answers a proxy may cut.
    enum Kind: Sendable {
        /// `POST /v2/pull`, the page stream.
        case pageStream
        /// `GET /v1/attachments/…`, attachment downloads.
        case attachmentDownloads

        func matches(_ method: HTTPRequest.Method, _ path: String) -> Bool {
            switch self {
            case .pageStream: method == .post && path == "/v2/pull"
            case .attachmentDownloads: method == .get && path.hasPrefix("/v1/attachments/")
            }
        }
    }

    let running: Task<Void, any Error>
    let port: Int
    private let requests: Box<[String: Int]>
    private let recordedRanges: Box<[String]>
    private let released: Gate

    struct Cut: Error {}

    static func start(target: String, cuts: Int, cutAfter: Int, stall: Bool = false,
                      cutting kind: Kind = .pageStream) async throws -> CuttingProxy {
        let requests = Box<[String: Int]>([:])
        let ranges = Box<[String]>([])
        let released = Gate()
        let router = Router()
        let forward: @Sendable (Request, HTTPRequest.Method) async throws -> Response = { request, method in
            let path = request.uri.path
            requests.withLock { $0[path, default: 0] += 1 }
            let cut = kind.matches(method, path) && ranges.withLock { ranges -> Bool in
                ranges.append(request.headers[.range] ?? "")
                return ranges.count <= cuts
            }
            var outgoing = HTTPClientRequest(url: target + request.uri.description)
            outgoing.method = method == .get ? .GET : .POST
            for field in request.headers where [.authorization, .contentType, .accept, .range].contains(field.name) {
                outgoing.headers.add(name: field.name.rawName, value: field.value)
            }
            if method == .post { outgoing.body = .bytes(try await request.body.collect(upTo: 64 << 20)) }
            let answer = try await HTTPClient.shared.execute(outgoing, timeout: .seconds(30))
            var headers: HTTPFields = [:]
            if let type = answer.headers.first(name: "Content-Type") { headers[.contentType] = type }
            if let range = answer.headers.first(name: "Content-Range") { headers[.contentRange] = range }
            return Response(status: .init(code: Int(answer.status.code)), headers: headers, body: ResponseBody { writer in
                var sent = 0
                for try await chunk in answer.body {
                    if cut && sent + chunk.readableBytes > cutAfter {
                        try await writer.write(chunk.getSlice(at: chunk.readerIndex, length: cutAfter - sent)!)
                        if stall { await released.wait() }
                        throw Cut()   // Hummingbird closes the connection: the body breaks off
                    }
                    sent += chunk.readableBytes
                    try await writer.write(chunk)
                }
                try await writer.finish(nil)
            })
        }
        router.get("**") { request, _ in try await forward(request, .get) }
        router.post("**") { request, _ in try await forward(request, .post) }
        let app = try await LoopbackApp.start(router)
        return CuttingProxy(running: app.running, port: app.port, requests: requests, recordedRanges: ranges, released: released)
    }

    var url: String { "http://127.0.0.1:\(port)" }
    /// The requests to `path` so far.
    func count(_ path: String) -> Int { requests.withLock { $0[path, default: 0] } }
    /// The `Range` of each request of the kind this proxy cuts, in order (`""` for none).
    var ranges: [String] { recordedRanges.withLock { $0 } }

    func stop() {
        released.open()
        running.cancel()
    }
}
