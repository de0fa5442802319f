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
    /// The base's value, and whether the connection spoke before it ended.
    struct Value: ServerChildChannelValue {
        let base: Base.Value
        let firstByte: EventLoopFuture<Bool>
        var channel: any Channel { base.channel }
    }

    let base: Base
    let firstByteTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let firstByte = channel.eventLoop.makePromise(of: Bool.self)
        let ready = channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(SilentConnectionGuard(firstByteTimeout: firstByteTimeout, firstByte: firstByte),
                                                           position: .first)
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
        // A setup that failed (a connection closed at once) leaves no promise unanswered; a
        // second answer from the guard is ignored.
        ready.whenFailure { _ in firstByte.succeed(false) }
        return ready.map { Value(base: $0, firstByte: firstByte.futureResult) }
    }

    /// Hands the connection on once it has spoken. One that ended silent (closed by the guard
    /// or by its client) is not: its HTTP setup never finished, and Hummingbird would log that
    /// at error level, once for every idle socket a shutdown closes.
    func handle(value: Value, logger: Logger) async {
        guard (try? await value.firstByte.get()) == true else { return }
        await base.handle(value: value.base, logger: logger)
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
    /// `true` at the connection's first byte, `false` when it ends without one.
    private let firstByte: EventLoopPromise<Bool>
    private var settled = false

    init(firstByteTimeout: TimeAmount, firstByte: EventLoopPromise<Bool>) {
        self.firstByteTimeout = firstByteTimeout
        self.firstByte = firstByte
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
        settle(heard)
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        settle(heard)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !heard {
            heard = true
            disarm()
            settle(true)
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

    private func settle(_ spoke: Bool) {
        guard !settled else { return }
        settled = true
        firstByte.succeed(spoke)
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}
