import Foundation
import OfflineSyncCommandSupport
import OfflineSyncTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP server on plain loopback sockets that serves one file the way a server or a proxy
/// that does not honour `Range` may, which an HTTP framework will not do: every request gets
/// one answer (``Answer``), then its connection is closed. It records each request's head.
final class RawFileServer: Sendable {
    /// How every request is answered.
    enum Answer: Sendable {
        /// `200` with the whole file and its `Content-Length`, whatever `Range` asked for.
        case whole
        /// `206` with the `Content-Range` of the range asked for and no `Content-Length`, then
        /// `extra` bytes more than that range before the connection closes.
        case overlong(extra: Int)
    }

    private struct State: Sendable {
        /// The connections being answered (shut down by ``stop()``).
        var connections: [Int32] = []
        var requests: [String] = []
        var stopped = false
    }

    let port: Int
    private let listener: LoopbackSocket
    private let state = Box(State())

    /// The heads of the requests so far.
    var requests: [String] { state.value.requests }

    /// Serves a file of `size` bytes; `content(offset, count)` gives `count` of them from
    /// `offset` (or from anywhere, for a test that reads none of them).
    init(size: Int, answer: Answer, content: @escaping @Sendable (_ offset: Int, _ count: Int) -> [UInt8]) throws {
        let (listener, port) = try LoopbackSocket.listening()
        self.listener = listener
        self.port = port
        let state = self.state
        Thread.detachNewThread {
            while let connection = listener.acceptConnection() {
                let kept = state.withLock { state -> Bool in
                    guard !state.stopped else { return false }
                    state.connections.append(connection.fd)
                    return true
                }
                guard kept else {
                    connection.hangUp()
                    return
                }
                Thread.detachNewThread {
                    RawFileServer.serve(connection, size: size, answer: answer, content: content, state: state)
                }
            }
        }
    }

    deinit { listener.hangUp() }

    /// Bytes that nobody checks: a pattern, the same from any offset (at most 64 KiB at a
    /// time, as the server asks for them).
    static let pattern: @Sendable (Int, Int) -> [UInt8] = { _, count in Array(RawFileServer.patternChunk.prefix(count)) }
    private static let patternChunk: [UInt8] = (0..<(1 << 16)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    /// Stops accepting and ends every connection being answered.
    func stop() {
        shutdown(listener.fd, Int32(SHUT_RDWR))
        state.withLock { state in
            state.stopped = true
            // Under the lock: a connection closes itself only once it has left the list, so
            // no descriptor shut down here has been closed and reused.
            for descriptor in state.connections { shutdown(descriptor, Int32(SHUT_RDWR)) }
            state.connections = []
        }
    }

    private static func serve(_ connection: LoopbackSocket, size: Int, answer: Answer,
                              content: @Sendable (Int, Int) -> [UInt8], state: Box<State>) {
        defer {
            state.withLock { state in state.connections.removeAll { $0 == connection.fd } }
            connection.hangUp()
        }
        let head = String(decoding: connection.receive(until: Array("\r\n\r\n".utf8), within: .seconds(30)), as: UTF8.self)
        state.withLock { $0.requests.append(head) }
        // The range asked for, if any: `Range: bytes=first-[last]`.
        var first = 0, last = size - 1
        for line in head.components(separatedBy: "\r\n") where line.lowercased().hasPrefix("range:") {
            let spec = line.dropFirst("range:".count).trimmingCharacters(in: .whitespaces)
            guard spec.hasPrefix("bytes=") else { continue }
            let bounds = spec.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
            if let from = bounds.first.flatMap({ Int($0) }) { first = from }
            if bounds.count > 1, let to = Int(bounds[1]) { last = min(to, size - 1) }
        }
        // The status line's end and the header that goes with it; the bytes sent and from where.
        let status: String, from: Int, count: Int
        switch answer {
        case .whole:
            status = "200 OK\r\nContent-Length: \(size)"
            from = 0
            count = size
        case .overlong(let extra):
            status = "206 Partial Content\r\nContent-Range: bytes \(first)-\(last)/\(size)"
            from = first
            count = last - first + 1 + extra
        }
        do {
            try connection.send("HTTP/1.1 \(status)\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n")
            var sent = 0
            while sent < count {
                let piece = content(from + sent, min(count - sent, 1 << 16))
                guard !piece.isEmpty else { return }
                try connection.send(piece)
                sent += piece.count
            }
        } catch {
            // The client went away (it refused the answer, or cut it): nothing more to send.
        }
    }
}
