import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import OfflineSync

/// Change channels that only read: a WebSocket per device, opened with the same handshake as
/// ``HTTPRemoteStore/changes(device:)`` (`GET /v1/changes`, a bearer token), whose frames are
/// read by one channel handler on an event loop of the load generator, with no task per
/// device. They answer the server's pings, and hand each text message to `received`, which
/// reads it with the client's own parser (``NativeRemote/channelMessage(_:)``).
///
/// Why not ``HTTPRemoteStore``: 10,000 of them take about 0.4 s of the generator's one core to
/// read one write's notices (about 40 µs each, in the client's tasks and streams), as long as
/// the server's whole round, so a latency measured through them could not fall below that.
final class NoticeReaders: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let host: String
    private let port: Int

    /// Readers of the server at `base` (`http://host:port`), on `threads` event loops.
    init(base: String, threads: Int = 1) throws {
        guard let url = URL(string: base), let host = url.host, let port = url.port else {
            throw SyncError(.invalidValue, "\(base) is not an http://host:port address")
        }
        group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        self.host = host
        self.port = port
    }

    /// Opens one channel with `token`; `received` gets each text message (the first is
    /// `{"type":"subscribed"}`), on the reader's event loop. Returns when the handshake is
    /// done; throws when the server refuses it.
    func open(token: String, received: @escaping @Sendable (ByteBuffer) -> Void) async throws {
        let (host, port) = (self.host, self.port)
        let upgraded: EventLoopFuture<Bool> = try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOTypedWebSocketClientUpgrader<Bool>(maxFrameSize: 1 << 16) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(ReadingHandler(received: received))
                            return true
                        }
                    }
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "\(host):\(port)")
                    headers.add(name: "Authorization", value: "Bearer \(token)")
                    headers.add(name: "Content-Length", value: "0")
                    let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/v1/changes", headers: headers)
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<Bool>(
                        upgradeRequestHead: head, upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(false) })
                    var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                    // The server's first frame may come in the same read as its 101 answer.
                    pipeline.leftOverBytesStrategy = .forwardBytes
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
                }
            }
        guard try await upgraded.get() else {
            throw SyncError(.rejected, "the server refused a change channel's handshake")
        }
    }

    /// Closes every channel and stops the event loops.
    func shutDown() async {
        try? await group.shutdownGracefully()
    }

    /// Hands text frames on, answers pings, closes on a close frame.
    private final class ReadingHandler: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame

        let received: @Sendable (ByteBuffer) -> Void

        init(received: @escaping @Sendable (ByteBuffer) -> Void) {
            self.received = received
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.opcode {
            case .text:
                received(frame.unmaskedData)
            case .ping:
                // A client's frames are masked (RFC 6455 §5.3): the encoder masks with this key.
                let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
                context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            case .connectionClose:
                context.close(promise: nil)
            default:
                break
            }
        }
    }
}
