import Foundation
import OfflineSyncTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on a loopback port that accepts connections and never answers: a server
/// that hangs. Connections stay open until ``stop()``.
final class SilentServer: Sendable {
    let port: Int
    private let listener: Int32
    private let state = Box<(accepted: [Int32], stopped: Bool)>(([], false))

    init() throws {
        let (listener, port) = try loopbackSocket(listening: true)
        self.listener = listener
        self.port = port
        let thread = Thread { [state] in
            while true {
                let connection = accept(listener, nil, nil)
                if connection < 0 { return }
                let keep = state.withLock { state -> Bool in
                    if state.stopped { return false }
                    state.accepted.append(connection)
                    return true
                }
                if !keep { close(connection); return }
            }
        }
        thread.start()
    }

    /// How many connections were accepted so far.
    var accepted: Int { state.value.accepted.count }

    /// Closes the listener and every connection.
    func stop() {
        let connections = state.withLock { state -> [Int32] in
            state.stopped = true
            defer { state.accepted = [] }
            return state.accepted
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for connection in connections { close(connection) }
    }

}

/// A loopback port that refuses every connection for as long as it is held: bound, never
/// listening. A port bound, closed and then handed out could be taken meanwhile by a server
/// another test starts, and the "refused" connection would reach it (seen: a sync against the
/// "closed" port was answered by another test's server).
final class RefusingPort: Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        (descriptor, port) = try loopbackSocket(listening: false)
    }

    deinit { close(descriptor) }
}

/// A TCP socket bound to a free port on 127.0.0.1, listening or not, and its port.
func loopbackSocket(listening: Bool) throws -> (descriptor: Int32, port: Int) {
    let descriptor = socket(AF_INET, streamSocketType, 0)
    guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, length) == 0 && (!listening || listen(descriptor, 64) == 0) && getsockname(descriptor, $0, &length) == 0
        }
    }
    guard bound else {
        close(descriptor)
        throw POSIXError(.EADDRNOTAVAIL)
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}

#if os(Linux)
/// `SOCK_STREAM` as `socket(2)` takes it (glibc imports it as an enum case).
private let streamSocketType = Int32(SOCK_STREAM.rawValue)
#else
private let streamSocketType = SOCK_STREAM
#endif
