import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import OfflineSyncTestSupport
import Testing

/// A reverse proxy on a loopback port that is configured neither for WebSockets nor for
/// streaming: it answers every WebSocket upgrade with a bare 400, and passes other `GET` and
/// `POST` requests on with their token, type and `Accept`, each answer only once it is whole,
/// as a buffering proxy does. The change channel's event stream is an answer that never ends:
/// with ``EventStream/held`` the proxy holds it until ``stop()`` (the client never gets its
/// head), with ``EventStream/plain`` it answers it itself with a plain JSON `200`, and with
/// ``EventStream/streamed`` it passes it through as it comes.
struct UpgradeRefusingProxy {
    /// What the proxy does with a request for an event stream (`Accept: text/event-stream`).
    enum EventStream: Sendable, CustomTestStringConvertible {
        /// Waits for the whole answer, which never comes.
        case held
        /// Answers `200` with `{}` as `application/json`: not an event stream.
        case plain
        /// Passes it through, each piece as it comes: the channel opens as an event stream.
        case streamed

        var testDescription: String {
            switch self {
            case .held: "held"
            case .plain: "answered plainly"
            case .streamed: "streamed through"
            }
        }
    }

    let app: LoopbackApp
    private let released: Gate
    private let upgrades: Box<Int>

    var url: String { "http://127.0.0.1:\(app.port)" }
    /// How many WebSocket upgrades it refused.
    var refusedUpgrades: Int { upgrades.value }

    static func start(target: String, eventStream: EventStream) async throws -> UpgradeRefusingProxy {
        let released = Gate(), upgrades = Box(0)
        let router = Router()
        let forward: @Sendable (Request, HTTPRequest.Method) async throws -> Response = { request, method in
            if request.headers[.upgrade] != nil {
                upgrades.withLock { $0 += 1 }
                return Response(status: .badRequest)
            }
            if (request.headers[.accept] ?? "").contains("text/event-stream") {
                switch eventStream {
                case .held:
                    await released.wait()
                    return Response(status: .badGateway)
                case .plain:
                    return Response(status: .ok, headers: [.contentType: "application/json"],
                                    body: .init(byteBuffer: ByteBuffer(string: "{}")))
                case .streamed:
                    var outgoing = HTTPClientRequest(url: target + request.uri.description)
                    outgoing.method = .GET
                    for field in request.headers where [.authorization, .accept].contains(field.name) {
                        outgoing.headers.add(name: field.name.rawName, value: field.value)
                    }
                    // The deadline covers the answer's head only: the stream runs on.
                    let answer = try await HTTPClient.shared.execute(outgoing, timeout: .seconds(60))
                    var headers: HTTPFields = [:]
                    if let type = answer.headers.first(name: "Content-Type") { headers[.contentType] = type }
                    return Response(status: .init(code: Int(answer.status.code)), headers: headers,
                                    body: ResponseBody(asyncSequence: answer.body))
                }
            }
            var outgoing = HTTPClientRequest(url: target + request.uri.description)
            outgoing.method = method == .get ? .GET : .POST
            for field in request.headers where [.authorization, .contentType, .accept].contains(field.name) {
                outgoing.headers.add(name: field.name.rawName, value: field.value)
            }
            if method == .post { outgoing.body = .bytes(try await request.body.collect(upTo: 64 << 20)) }
            let answer = try await HTTPClient.shared.execute(outgoing, timeout: .seconds(60))
            let bytes = try await answer.body.collect(upTo: 64 << 20)
            var headers: HTTPFields = [:]
            if let type = answer.headers.first(name: "Content-Type") { headers[.contentType] = type }
            return Response(status: .init(code: Int(answer.status.code)), headers: headers, body: .init(byteBuffer: bytes))
        }
        router.get("**") { request, _ in try await forward(request, .get) }
        router.post("**") { request, _ in try await forward(request, .post) }
        return UpgradeRefusingProxy(app: try await LoopbackApp.start(router), released: released, upgrades: upgrades)
    }

    /// Lets every held answer go (as a 502) and stops the proxy.
    func stop() async {
        released.open()
        await app.stop()
    }
}
