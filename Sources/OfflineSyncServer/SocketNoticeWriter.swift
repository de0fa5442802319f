import NIOCore
import NIOWebSocket
import OfflineSync
import Synchronization

/// Writes a WebSocket change channel's notices from its connection's event loop, with no
/// task per channel: a notice that reaches an idle channel's ``PendingNotices`` puts the
/// channel on its event loop's ready list (``NoticeLoops``), and one job on that loop writes
/// every ready channel's frames and flushes each socket once.
///
/// The frames go into the connection's channel pipeline, below the WebSocket handler's own
/// writer (its pings and its close frame), so both reach the socket in the order the event
/// loop takes them. One batch per channel is in flight at a time: notices that arrive
/// while it is (the socket's buffers are full, the client reads slowly) are merged per table
/// in ``PendingNotices`` and written when it completes, and a batch that stays in flight past
/// the write timeout is found by ``SlowChannelSweep``, which closes the connection.
final class SocketNoticeWriter: Sendable {
    private struct State {
        /// On the loop's ready list, or about to be.
        var scheduled = false
        /// A batch was written and its last frame has not reached the socket yet.
        var inFlight = false
        /// Messages worked out off the loop (a dataset's notice needs the store), to write next.
        var messages: [String] = []
        /// Why the notices ended, once they did: what ``deliver(_:into:)`` awaits.
        var ended: Ending?
        var waiter: CheckedContinuation<Ending, Never>?
    }

    /// Why a channel's notices ended.
    enum Ending: Sendable {
        /// The relay closed, the server went away, the channel fell too far behind, or the
        /// waiting task was cancelled.
        case closed
        /// The caller's token expired: the channel should close with 4401.
        case tokenExpired
        /// A read of the caller's groups failed (``NoticeRelay/hasFailed``): the channel
        /// should close with 1011, and its client reconnects and catches up.
        case failed
    }

    /// The relay, for what is rare (a dataset's notice). What every notice needs is held
    /// apart below: reading it through the relay copied the relay and its routes per write.
    private let relay: NoticeRelay
    private let pending: PendingNotices
    private let client: String?
    private let open: OpenChannel
    private let metrics: ServerMetrics
    private let channel: any Channel
    private let loop: NoticeLoop
    private let state = Mutex(State())
    /// Where encoded frames enter the pipeline: the context of its WebSocket frame encoder,
    /// whose writes go to the handlers between it and the socket (TLS, when there is one).
    /// Looked up on the loop at the first write; `nil` inside when the pipeline has none.
    private let entry: NIOLoopBoundBox<ChannelHandlerContext??>

    private init(relay: NoticeRelay, channel: any Channel, loop: NoticeLoop) {
        self.relay = relay
        pending = relay.connection.pending
        client = relay.client
        open = relay.open
        metrics = relay.routes.server.metrics
        self.channel = channel
        self.loop = loop
        entry = .makeEmptyBox(valueType: ChannelHandlerContext?.self, eventLoop: channel.eventLoop)
    }

    /// Writes `relay`'s notices into `channel`, a WebSocket's connection, until they end (the
    /// relay closed, the server went away, the channel fell too far behind, the calling task
    /// was cancelled, a read of the caller's groups failed) or the caller's token expires,
    /// which an event-loop timer tells (no task sleeps for it). The channel's first message
    /// must have been written before.
    static func deliver(_ relay: NoticeRelay, into channel: any Channel) async -> Ending {
        guard let remaining = relay.millisecondsToExpiry else { return .tokenExpired }
        let writer = SocketNoticeWriter(relay: relay, channel: channel,
                                        loop: relay.routes.server.noticeLoops.loop(for: channel.eventLoop))
        let expiry = channel.eventLoop.scheduleTask(in: .milliseconds(remaining)) {
            writer.end(.tokenExpired)
        }
        defer { expiry.cancel() }
        relay.connection.pending.wake { [weak writer] in writer?.schedule() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Ending, Never>) in
                let ended = writer.state.withLock { state -> Ending? in
                    if state.ended == nil { state.waiter = continuation }
                    return state.ended
                }
                if let ended { continuation.resume(returning: ended) }
            }
        } onCancel: {
            writer.end(.closed)
        }
    }

    /// Puts the channel on its loop's ready list, unless it is on it.
    private func schedule() {
        let first = state.withLock { state -> Bool in
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if first { loop.ready(self) }
    }

    /// Ends the writer, for `reason` unless it ended already: what ``deliver(_:into:)`` awaits returns.
    private func end(_ reason: Ending = .closed) {
        let waiter = state.withLock { state -> (CheckedContinuation<Ending, Never>, Ending)? in
            if state.ended == nil { state.ended = reason }
            return state.waiter.take().map { ($0, state.ended ?? reason) }
        }
        if let (waiter, ending) = waiter { waiter.resume(returning: ending) }
    }

    /// On the channel's event loop: writes what waits, unless a batch is in flight (its
    /// completion calls this again).
    fileprivate func write() {
        let messages = state.withLock { state -> [String]? in
            state.scheduled = false
            guard !state.inFlight, state.ended == nil else { return nil }
            defer { state.messages = [] }
            return state.messages
        }
        guard let messages else { return }
        var frames: [ByteBuffer] = []
        switch pending.take() {
        case nil:
            break
        case .finished:
            end()
            return
        case .over:
            if open.abort() { metrics.slowChannelClosed() }
            end()
            return
        case .failed:
            end(.failed)
            return
        case .notices(let notices):
            for notice in notices {
                switch NoticeRelay.immediateMessage(for: notice, client: client) {
                case .frame(let table):
                    frames.append(loop.frame(table: table, allocator: channel.allocator))
                case .later:
                    Task { [self] in
                        guard let message = await relay.message(for: notice) else { return }
                        state.withLock { $0.messages.append(message) }
                        schedule()
                    }
                case .none:
                    break
                }
            }
        }
        for message in messages { frames.append(NoticeLoop.textFrame(message, allocator: channel.allocator)) }
        guard !frames.isEmpty else { return }
        state.withLock { $0.inFlight = true }
        open.beginWrite()
        let promise = channel.eventLoop.makePromise(of: Void.self)
        if entry.value == nil {
            entry.value = .some(try? channel.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self))
        }
        if case .some(.some(let encoder)) = entry.value {
            for (index, frame) in frames.enumerated() {
                encoder.write(NIOAny(frame), promise: index == frames.count - 1 ? promise : nil)
            }
            encoder.flush()
        } else {
            // No encoder to write past: the frames are decoded again and go in whole.
            for (index, frame) in frames.enumerated() {
                channel.write(NoticeLoop.decodedTextFrame(frame), promise: index == frames.count - 1 ? promise : nil)
            }
            channel.flush()
        }
        let count = frames.count
        promise.futureResult.whenComplete { [self] result in
            open.endWrite()
            state.withLock { $0.inFlight = false }
            guard case .success = result else { return }
            metrics.noticeSent(count: count)
            write()
        }
    }
}

/// Each event loop's ready list of WebSocket notice writers (``SocketNoticeWriter``), kept
/// for the server's life: there are as many as the server has event loops.
final class NoticeLoops: Sendable {
    private let loops = Mutex<[ObjectIdentifier: NoticeLoop]>([:])

    /// `eventLoop`'s ready list.
    func loop(for eventLoop: any EventLoop) -> NoticeLoop {
        loops.withLock { loops in
            if let loop = loops[ObjectIdentifier(eventLoop)] { return loop }
            let loop = NoticeLoop(eventLoop)
            loops[ObjectIdentifier(eventLoop)] = loop
            return loop
        }
    }
}

/// One event loop's writers with notices to write, and the encoded frames, shared by every
/// channel of the loop: a notice of one table to 10,000 channels is encoded once, frame header
/// included, and each socket is handed the same bytes.
final class NoticeLoop: Sendable {
    private let eventLoop: any EventLoop
    private let waiting = Mutex<[SocketNoticeWriter]>([])
    /// The encoded change frames, by table; touched on the loop only.
    private let frames: NIOLoopBoundBox<[ExactString: ByteBuffer]>

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        frames = .makeBoxSendingValue([:], eventLoop: eventLoop)
    }

    /// Queues `writer`; the first writer queued since the loop last ran schedules a run.
    func ready(_ writer: SocketNoticeWriter) {
        let first = waiting.withLock { waiting -> Bool in
            waiting.append(writer)
            return waiting.count == 1
        }
        if first { eventLoop.execute { self.run() } }
    }

    private func run() {
        let writers = waiting.withLock { waiting in
            defer { waiting = [] }
            return waiting
        }
        for writer in writers { writer.write() }
    }

    /// The frame telling a client that `table` changed, encoded.
    func frame(table: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        let key = ExactString(table)
        if let frame = frames.value[key] { return frame }
        if frames.value.count >= 1024 { frames.value = [:] }
        let frame = Self.textFrame(NoticeRelay.changeMessage(table: table), allocator: allocator)
        frames.value[key] = frame
        return frame
    }

    /// `message` as a server's WebSocket text frame (RFC 6455 §5.2): final, unmasked, the
    /// length in 7 bits, or 16 or 64 after the marker 126 or 127.
    static func textFrame(_ message: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        let length = message.utf8.count
        var frame = allocator.buffer(capacity: length + 10)
        frame.writeInteger(UInt8(0x81))
        switch length {
        case ..<126: frame.writeInteger(UInt8(length))
        case ..<65_536: frame.writeInteger(UInt8(126)); frame.writeInteger(UInt16(length))
        default: frame.writeInteger(UInt8(127)); frame.writeInteger(UInt64(length))
        }
        frame.writeString(message)
        return frame
    }

    /// A frame made by ``textFrame(_:allocator:)``, as the frame the encoder takes.
    static func decodedTextFrame(_ encoded: ByteBuffer) -> WebSocketFrame {
        var frame = encoded
        frame.moveReaderIndex(forwardBy: 1)
        let marker = frame.readInteger(as: UInt8.self) ?? 0
        switch marker {
        case 126: _ = frame.readInteger(as: UInt16.self)
        case 127: _ = frame.readInteger(as: UInt64.self)
        default: break
        }
        return WebSocketFrame(fin: true, opcode: .text, data: frame)
    }
}
