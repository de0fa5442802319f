import Foundation
import OfflineSync
#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to the server on loopback: a change channel that is opened and then
/// never read (a suspended app, a stalled network), and the one-shot scrape of `/metrics`.
struct LoopbackSocket: Sendable {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SyncError(.transient, "socket failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw SyncError(.transient, "connect failed: errno \(errno)")
        }
    }

    /// Opens a WebSocket change channel with `token` and reads nothing of it.
    static func deafChannel(port: Int, token: String) throws -> LoopbackSocket {
        let socket = try LoopbackSocket(port: port)
        try socket.send("GET /v1/changes HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer \(token)\r\n\r\n")
        return socket
    }

    /// The change channels the server has open now: its `offline_sync_websockets_connected`
    /// gauge, scraped with the admin key (`nil` when the scrape fails).
    static func openChannels(port: Int, adminKey: String) async -> Int? {
        try? await Task.detached {
            let socket = try LoopbackSocket(port: port)
            defer { socket.hangUp() }
            try socket.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\nX-Admin-Key: \(adminKey)\r\n\r\n")
            let text = String(decoding: socket.readToEnd(quiet: .seconds(10)).bytes, as: UTF8.self)
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("offline_sync_websockets_connected ") }),
                  let value = Double(line.split(separator: " ").last ?? "") else { return nil as Int? }
            return Int(value)
        }.value
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { throw SyncError(.transient, "write failed: errno \(errno)") }
            offset += written
        }
    }

    /// Reads until the peer ends the connection (`ended`), or until nothing has come for `quiet`.
    func readToEnd(quiet: Duration) -> (bytes: [UInt8], ended: Bool) {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(quiet.components.seconds * 1000 + quiet.components.attoseconds / 1_000_000_000_000_000)
        while true {
            guard poll(&descriptor, 1, milliseconds) > 0 else { return (result, false) }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { return (result, true) }   // end of stream, or reset
            result += buffer[0..<count]
        }
    }

    func hangUp() { close(fd) }
}

/// The server's resident memory, sampled until stopped: its peak over a phase.
final class MemorySampler: Sendable {
    private let task: Task<Int, Never>

    init(every period: Duration = .milliseconds(50), _ read: @escaping @Sendable () -> Int?) {
        task = Task {
            var peak = read() ?? 0
            while !Task.isCancelled {
                try? await Task.sleep(for: period)
                peak = max(peak, read() ?? 0)
            }
            return peak
        }
    }

    /// Stops sampling; the highest value read.
    func stop() async -> Int {
        task.cancel()
        return await task.value
    }
}
