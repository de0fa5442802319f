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
        /// The notices ended: what ``delivered()`` awaits.
        var ended = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let relay: NoticeRelay
    private let channel: any Channel
    private let loop: NoticeLoop
    private let state = Mutex(State())

    private init(relay: NoticeRelay, channel: any Channel, loop: NoticeLoop) {
        self.relay = relay
        self.channel = channel
        self.loop = loop
    }

    /// Writes `relay`'s notices into `channel`, a WebSocket's connection, until they end (the
    /// relay closed, the server went away, the channel fell too far behind) or the calling task
    /// is cancelled. The channel's first message must have been written before.
    static func deliver(_ relay: NoticeRelay, into channel: any Channel) async {
        let writer = SocketNoticeWriter(relay: relay, channel: channel,
                                        loop: relay.routes.server.noticeLoops.loop(for: channel.eventLoop))
        relay.connection.pending.wake { [weak writer] in writer?.schedule() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ended = writer.state.withLock { state -> Bool in
                    if !state.ended { state.waiter = continuation }
                    return state.ended
                }
                if ended { continuation.resume() }
            }
        } onCancel: {
            writer.end()
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

    /// Ends the writer: what ``deliver(_:into:)`` awaits returns.
    private func end() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.ended = true
            return state.waiter.take()
        }
        waiter?.resume()
    }

    /// On the channel's event loop: writes what waits, unless a batch is in flight (its
    /// completion calls this again).
    fileprivate func write() {
        let messages = state.withLock { state -> [String]? in
            state.scheduled = false
            guard !state.inFlight, !state.ended else { return nil }
            defer { state.messages = [] }
            return state.messages
        }
        guard var messages else { return }
        var frames: [ByteBuffer] = []
        switch relay.connection.pending.take() {
        case nil:
            break
        case .finished:
            end()
            return
        case .over:
            if relay.open.abort() { relay.routes.server.metrics.slowChannelClosed() }
            end()
            return
        case .notices(let notices):
            for notice in notices {
                switch relay.immediateMessage(for: notice) {
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
        for message in messages.drain() { frames.append(channel.allocator.buffer(string: message)) }
        guard !frames.isEmpty else { return }
        state.withLock { $0.inFlight = true }
        relay.open.beginWrite()
        let promise = channel.eventLoop.makePromise(of: Void.self)
        for (index, data) in frames.enumerated() {
            channel.write(WebSocketFrame(fin: true, opcode: .text, data: data),
                          promise: index == frames.count - 1 ? promise : nil)
        }
        channel.flush()
        let count = frames.count
        promise.futureResult.whenComplete { [self] result in
            relay.open.endWrite()
            state.withLock { $0.inFlight = false }
            guard case .success = result else { return }
            relay.routes.server.metrics.noticeSent(count: count)
            write()
        }
    }
}

private extension Array {
    /// Empties the array, returning what it held.
    mutating func drain() -> [Element] {
        defer { self = [] }
        return self
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

/// One event loop's writers with notices to write, and the frames' payloads, shared by every
/// channel of the loop: a notice of one table to 10,000 channels is encoded once, and each
/// socket is handed the same bytes.
final class NoticeLoop: Sendable {
    private let eventLoop: any EventLoop
    private let waiting = Mutex<[SocketNoticeWriter]>([])
    /// Touched on the loop only.
    private let payloads: NIOLoopBoundBox<[ExactString: ByteBuffer]>

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        payloads = .makeBoxSendingValue([:], eventLoop: eventLoop)
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
        for writer in waiting.withLock({ $0.drain() }) { writer.write() }
    }

    /// The message telling a client that `table` changed.
    func frame(table: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        let key = ExactString(table)
        if let payload = payloads.value[key] { return payload }
        if payloads.value.count >= 1024 { payloads.value = [:] }
        let payload = allocator.buffer(string: NoticeRelay.changeMessage(table: table))
        payloads.value[key] = payload
        return payload
    }
}
