import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain TCP socket on loopback, for what an HTTP client library will not do: a client
/// that stops reading, a request sent at a controlled pace, a balancer's relay.
package struct LoopbackSocket: Sendable {
    /// The socket's descriptor; ``hangUp()`` closes it.
    package let fd: Int32

    /// Connects to `port` on 127.0.0.1; with `receiveBuffer`, the socket's receive buffer is
    /// set to that many bytes before it connects (so the window it offers stays that small).
    package init(port: Int, receiveBuffer: Int32? = nil) throws {
        fd = Self.tcpSocket()
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EMFILE) }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = Self.address(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .ECONNREFUSED)
        }
    }

    private init(descriptor: Int32) { fd = descriptor }

    /// A socket listening on a free loopback port, and the port.
    package static func listening() throws -> (socket: LoopbackSocket, port: Int) {
        let descriptor = tcpSocket()
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EMFILE) }
        var address = address(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 1024) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        return (LoopbackSocket(descriptor: descriptor), Int(UInt16(bigEndian: address.sin_port)))
    }

    /// The next connection to this listening socket (``listening()``); `nil` once the
    /// listener is shut down or closed. Blocks its thread: call it off Swift's pool.
    package func acceptConnection() -> LoopbackSocket? {
        while true {
            let descriptor = accept(fd, nil, nil)
            if descriptor >= 0 {
                #if !os(Linux)
                Self.noSignalOnBrokenPipe(descriptor)
                #endif
                return LoopbackSocket(descriptor: descriptor)
            }
            if errno == EINTR || errno == ECONNABORTED { continue }
            return nil
        }
    }

    /// A new TCP socket's descriptor, or -1 with `errno` set. glibc imports `SOCK_STREAM` as a
    /// `__socket_type` case, Darwin as an `Int32`. On Darwin the socket is also kept from raising
    /// SIGPIPE (`SO_NOSIGPIPE`), as glibc's sends do with `MSG_NOSIGNAL`.
    private static func tcpSocket() -> Int32 {
        #if os(Linux)
        return socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        if descriptor >= 0 { noSignalOnBrokenPipe(descriptor) }
        return descriptor
        #endif
    }

    #if !os(Linux)
    /// Makes writes to `descriptor` fail with `EPIPE` rather than raise SIGPIPE once the peer
    /// has gone (Darwin's `SO_NOSIGPIPE`; glibc's sends pass `MSG_NOSIGNAL` instead).
    static func noSignalOnBrokenPipe(_ descriptor: Int32) {
        var on: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
    }
    #endif

    private static func address(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        #if !os(Linux)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// What carries a change channel (`GET /v1/changes`).
    package enum ChangeChannelCarrier: String, CaseIterable, Sendable {
        case webSocket = "WebSocket", eventStream = "event stream"
    }

    /// The request that opens a change channel with `token`: a WebSocket upgrade, or an
    /// event stream.
    package static func changeChannelRequest(port: Int, token: String, carrier: ChangeChannelCarrier = .webSocket) -> String {
        let opening = switch carrier {
        case .webSocket:
            "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        case .eventStream:
            "Accept: text/event-stream\r\n"
        }
        return "GET /v1/changes HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n" + opening + "Authorization: Bearer \(token)\r\n\r\n"
    }

    /// Opens a change channel with `token` and reads nothing of it (a suspended app, a
    /// stalled network); with `receiveBuffer`, the server's writes stall sooner.
    package static func deafChannel(port: Int, token: String, carrier: ChangeChannelCarrier = .webSocket,
                                    receiveBuffer: Int32? = nil) throws -> LoopbackSocket {
        let socket = try LoopbackSocket(port: port, receiveBuffer: receiveBuffer)
        try socket.send(changeChannelRequest(port: port, token: token, carrier: carrier))
        return socket
    }

    /// Writes all of `text`.
    package func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    /// Writes all of `bytes`. A peer that has gone makes it throw `EPIPE` (never SIGPIPE,
    /// which would end the process: ``sendSome(_:_:_:)``).
    package func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Self.sendSome(fd, $0.baseAddress!, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPIPE) }
            offset += written
        }
    }

    /// One `send` that never raises SIGPIPE when the peer has gone: glibc's `MSG_NOSIGNAL`;
    /// on Darwin the socket's `SO_NOSIGPIPE`, set when it was made (``tcpSocket()``) or
    /// accepted (``acceptConnection()``, the balancer's accept loop).
    static func sendSome(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        #if os(Linux)
        return Glibc.send(descriptor, bytes, count, Int32(MSG_NOSIGNAL))
        #else
        return Darwin.send(descriptor, bytes, count, 0)
        #endif
    }

    /// Reads until the peer ends the connection (`ended`: end of stream, or a reset), or
    /// until nothing has come for `quiet`. Blocks its thread: call it off Swift's pool.
    package func readToEnd(quiet: Duration) -> (bytes: [UInt8], ended: Bool) {
        var result: [UInt8] = []
        while true {
            switch readOnce(into: &result, waiting: quiet) {
            case .read: continue
            case .quiet: return (result, false)
            case .ended: return (result, true)
            }
        }
    }

    /// Reads until what arrived contains `marker`, the peer ends the connection, or `limit`
    /// passes; returns everything read. Blocks its thread: call it off Swift's pool.
    package func receive(until marker: [UInt8], within limit: Duration) -> [UInt8] {
        var result: [UInt8] = []
        let deadline = ContinuousClock.now + limit
        while !result.contains(marker) {
            let left = deadline - .now
            guard left > .zero, readOnce(into: &result, waiting: left) == .read else { break }
        }
        return result
    }

    /// What one wait for bytes came to.
    private enum ReadOutcome { case read, quiet, ended }

    /// Waits up to `wait` for bytes and appends what one read returns to `result`.
    private func readOnce(into result: inout [UInt8], waiting wait: Duration) -> ReadOutcome {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        // Rounded up, so a wait under a millisecond still waits.
        let milliseconds = Int32(clamping: wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000 + 1)
        var ready: Int32
        repeat { ready = poll(&descriptor, 1, milliseconds) } while ready < 0 && errno == EINTR
        guard ready > 0 else { return .quiet }
        // Read straight into room at the end of `result`, then drop what the read left unused.
        let start = result.count, room = 65536
        result += repeatElement(0, count: room)
        var count: Int
        repeat {
            count = result.withUnsafeMutableBytes { read(fd, $0.baseAddress! + start, room) }
        } while count < 0 && errno == EINTR
        result.removeLast(room - max(count, 0))
        return count > 0 ? .read : .ended
    }

    /// Closes the socket.
    package func hangUp() { close(fd) }
}

/// A TCP load balancer on a loopback port, as an operator's sits in front of server
/// instances: each connection goes to the next backend in turn that accepts it (one that
/// refuses is skipped), and its bytes are copied both ways untouched, WebSocket upgrades
/// included. Two threads per connection: for tests and load tests of a few hundred clients.
///
/// With a `delay`, it stands for a network between hosts as well: every byte reaches the
/// other side `delay` after it was read (each way, so a round trip costs twice that), in
/// order and without holding up the bytes behind it, with at most ``delayedBytesLimit``
/// bytes in flight each way (then the reading side waits, as a full TCP window would).
/// Four threads per connection then.
package final class LoopbackBalancer: Sendable {
    /// The port clients connect to.
    package let port: Int
    private let listener: LoopbackSocket
    private let backends: Mutex<[Int]>
    private let turn = Atomic<Int>(0)
    private let delay: Duration

    /// The most bytes a delayed direction holds before it stops reading.
    package static let delayedBytesLimit = 4 << 20

    /// Starts accepting, routing to `backends` (ports on 127.0.0.1), each byte `delay` late
    /// each way.
    package init(backends: [Int], delay: Duration = .zero) throws {
        self.delay = delay
        self.backends = Mutex(backends)
        (listener, port) = try LoopbackSocket.listening()
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Routes new connections to `ports` from now on (open connections stay where they are).
    package func setBackends(_ ports: [Int]) { backends.withLock { $0 = ports } }

    /// Stops accepting.
    package func stop() { shutdown(listener.fd, Int32(SHUT_RDWR)) }

    deinit { listener.hangUp() }

    private func acceptLoop() {
        while true {
            let client = accept(listener.fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            #if !os(Linux)
            LoopbackSocket.noSignalOnBrokenPipe(client)
            #endif
            Thread.detachNewThread { [self] in relay(client) }
        }
    }

    /// Connects `client` to the first backend, from this connection's turn on, that accepts.
    private func relay(_ client: Int32) {
        let ports = backends.withLock { $0 }
        let first = turn.wrappingAdd(1, ordering: .relaxed).oldValue
        for offset in 0..<ports.count {
            guard let server = try? LoopbackSocket(port: ports[(first + offset) % ports.count]).fd else { continue }
            // Each read is sent on at once, as a proxy does: with Nagle's algorithm a request's
            // second small write would wait for the first's delayed acknowledgement.
            Self.sendAtOnce(client)
            Self.sendAtOnce(server)
            let done = DispatchGroup()
            done.enter()
            Thread.detachNewThread { [delay] in
                Self.copy(from: server, to: client, delay: delay)
                done.leave()
            }
            Self.copy(from: client, to: server, delay: delay)
            done.wait()
            close(server)
            close(client)
            return
        }
        close(client)
    }

    /// Turns Nagle's algorithm off on `socket` (`TCP_NODELAY`).
    private static func sendAtOnce(_ socket: Int32) {
        var on: Int32 = 1
        _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Copies until `source` ends or fails, then ends `destination`'s sending side; with a
    /// delay, through a ``DelayLine`` and a thread of its own that sends.
    private static func copy(from source: Int32, to destination: Int32, delay: Duration) {
        guard delay > .zero else { return copy(from: source, to: destination) }
        let line = DelayLine(delay: delay, limit: delayedBytesLimit)
        let sent = DispatchGroup()
        sent.enter()
        Thread.detachNewThread {
            while let chunk = line.next() {
                guard send(chunk, to: destination) else {
                    line.fail()
                    break
                }
            }
            shutdown(destination, Int32(SHUT_WR))
            sent.leave()
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0, line.put(Array(buffer[..<count])) else { break }
        }
        line.end()
        sent.wait()
        shutdown(source, Int32(SHUT_RD))
    }

    /// Sends all of `bytes`; false when the socket failed.
    private static func send(_ bytes: [UInt8], to destination: Int32) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let wrote = bytes.withUnsafeBytes { LoopbackSocket.sendSome(destination, $0.baseAddress! + sent, bytes.count - sent) }
            if wrote < 0, errno == EINTR { continue }
            guard wrote > 0 else { return false }
            sent += wrote
        }
        return true
    }

    /// Copies until `source` ends or fails, then ends `destination`'s sending side.
    private static func copy(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        outer: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            var sent = 0
            while sent < count {
                let wrote = buffer.withUnsafeBytes { LoopbackSocket.sendSome(destination, $0.baseAddress! + sent, count - sent) }
                if wrote < 0, errno == EINTR { continue }
                guard wrote > 0 else { break outer }
                sent += wrote
            }
        }
        shutdown(destination, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
    }
}

/// Chunks of one direction of a delayed connection, each handed out `delay` after it was
/// put in, in order; bounded: ``put(_:)`` waits while `limit` bytes are held.
final class DelayLine: @unchecked Sendable {
    // @unchecked Sendable: every stored property is read and written under `condition`.
    private let condition = NSCondition()
    private var chunks: [(due: ContinuousClock.Instant, bytes: [UInt8])] = []
    private var first = 0
    private var held = 0
    private var ended = false
    private var failed = false
    private let delay: Duration
    private let limit: Int

    init(delay: Duration, limit: Int) {
        self.delay = delay
        self.limit = limit
    }

    /// Adds a chunk read now; false once the sending side failed (stop reading).
    func put(_ bytes: [UInt8]) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while held >= limit, !failed { condition.wait() }
        guard !failed else { return false }
        chunks.append((ContinuousClock.now + delay, bytes))
        held += bytes.count
        condition.broadcast()
        return true
    }

    /// No more chunks: ``next()`` returns nil once the held ones are out.
    func end() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// The sending side failed: ``put(_:)`` refuses from now on.
    func fail() {
        condition.lock()
        failed = true
        condition.broadcast()
        condition.unlock()
    }

    /// The next chunk once it is due (sleeping until then), or nil after ``end()``.
    func next() -> [UInt8]? {
        condition.lock()
        while first == chunks.count, !ended { condition.wait() }
        guard first < chunks.count else {
            condition.unlock()
            return nil
        }
        let (due, bytes) = chunks[first]
        first += 1
        if first > 1024, first * 2 > chunks.count {
            chunks.removeFirst(first)
            first = 0
        }
        held -= bytes.count
        condition.broadcast()
        condition.unlock()
        let wait = due - ContinuousClock.now
        if wait > .zero { Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18) }
        return bytes
    }
}
