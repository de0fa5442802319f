import Foundation
import OfflineSyncCommandSupport
import Testing

@Suite("Loopback sockets")
struct LoopbackSocketTests {
    // Against `send` through `write(2)`: on Linux the first write after the peer's reset raised
    // SIGPIPE, which ends the whole test process.
    @Test("a send to a peer that has gone throws EPIPE or ECONNRESET, and raises no SIGPIPE")
    func sendToAPeerThatHasGone() throws {
        let (listener, port) = try LoopbackSocket.listening()
        defer { listener.hangUp() }
        let client = try LoopbackSocket(port: port)
        // The connection is queued already: this returns at once.
        let server = try #require(listener.acceptConnection())
        defer { server.hangUp() }
        client.hangUp()
        var failure: (any Error)?
        // The first sends may still land in the buffer, before the peer's reset comes back.
        for _ in 0..<1000 {
            do {
                try server.send([UInt8](repeating: 7, count: 1 << 16))
            } catch {
                failure = error
                break
            }
        }
        let code = (failure as? POSIXError)?.code
        #expect(code == .EPIPE || code == .ECONNRESET, "\(String(describing: failure))")
    }
}
