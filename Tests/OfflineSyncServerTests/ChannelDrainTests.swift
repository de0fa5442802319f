import Foundation
import OfflineSync
import OfflineSyncCommandSupport
@testable import OfflineSyncServer
import OfflineSyncTestSupport
import Testing

@Suite("Server: a change channel opened while the server sends its channels away")
struct ChannelDrainTests {
    /// Reads `socket` until what arrived contains `marker` (or the peer ends the connection,
    /// or a minute passes), off the cooperative pool, and returns everything read.
    static func read(_ socket: LoopbackSocket, until marker: [UInt8]) async throws -> [UInt8] {
        try await offThePool { socket.receive(until: marker, within: .seconds(60)) }
    }

    /// The server's WebSocket close frame when it goes away: unmasked, FIN and opcode 8, the
    /// status 1001 ("going away") and the reason.
    static let goingAwayFrame: [UInt8] = {
        let reason = Array("server shutting down".utf8)
        return [0x88, UInt8(2 + reason.count), 0x03, 0xE9] + reason
    }()

    @Test("over a WebSocket: 1001 at once and never 'subscribed', so the client catches up only where it is kept")
    func webSocket() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice")
            let port = live.running.port
            // Control: the same request, before, is subscribed, and then sent away with 1001.
            let before = try LoopbackSocket(port: port)
            defer { before.hangUp() }
            try before.send(LoopbackSocket.changeChannelRequest(port: port, token: token))
            let subscribed = try await Self.read(before, until: Array(NoticeRelay.subscribed.utf8))
            #expect(subscribed.contains(Array(NoticeRelay.subscribed.utf8)))

            // What the drain service does once the drain period ends; the listener stays open.
            live.server.channels.goAway()
            #expect(try await Self.read(before, until: Self.goingAwayFrame).contains(Self.goingAwayFrame))

            let after = try LoopbackSocket(port: port)
            defer { after.hangUp() }
            try after.send(LoopbackSocket.changeChannelRequest(port: port, token: token))
            let answer = try await Self.read(after, until: Self.goingAwayFrame)
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 101"))
            #expect(answer.contains(Self.goingAwayFrame), "\(answer.suffix(16))")
            #expect(!answer.contains(Array("subscribed".utf8)), "a channel the server is sending away is never subscribed")
        }
    }

    @Test("over an event stream: the 'goingAway' message at once and never 'subscribed'")
    func eventStream() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice")
            let port = live.running.port
            live.server.channels.goAway()
            let socket = try LoopbackSocket(port: port)
            defer { socket.hangUp() }
            try socket.send(LoopbackSocket.changeChannelRequest(port: port, token: token, carrier: .eventStream))
            // Each message is written in order, so a "subscribed" would come before this one.
            let last = "data: " + NoticeRelay.goingAway + "\n\n"
            let answer = String(decoding: try await Self.read(socket, until: Array(last.utf8)), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 200"))
            #expect(answer.contains(last), "\(answer.suffix(120))")
            #expect(!answer.contains("subscribed"))
        }
    }
}
