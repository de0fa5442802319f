import HummingbirdCore
import Logging
import NIOCore

/// The server's connections, each behind a ``SilentConnectionGuard``.
///
/// Until a connection's first request arrives, the HTTP/WebSocket upgrade pipeline has none of
/// Hummingbird's connection handling: it neither hears that the server is shutting down nor
/// times out. A client that connected and sent nothing (a pre-opened pooled connection, a
/// mobile link that dropped after the handshake, a port scanner) then kept a graceful shutdown
/// waiting for as long as the socket stayed open, past the shutdown's grace period.
struct GuardedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let firstByteTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(SilentConnectionGuard(firstByteTimeout: firstByteTimeout), position: .first)
        }.flatMap { base.setup(channel: channel, logger: logger) }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Closes a connection that has sent no byte when the server begins to shut down, or once
/// `firstByteTimeout` has passed; from its first byte on, it only passes everything along.
final class SilentConnectionGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let firstByteTimeout: TimeAmount
    private var heard = false
    private var timer: Scheduled<Void>?

    init(firstByteTimeout: TimeAmount) {
        self.firstByteTimeout = firstByteTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !heard {
            heard = true
            disarm()
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, !heard {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil, !heard else { return }
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: firstByteTimeout) { channel.close(promise: nil) }
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}
