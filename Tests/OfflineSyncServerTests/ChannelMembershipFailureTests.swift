import Foundation
import OfflineSync
import OfflineSyncCommandSupport
@testable import OfflineSyncServer
import OfflineSyncTestSupport
import Testing

/// A change channel that cannot read its identity's groups closes, so its client reconnects
/// and catches up, rather than stay open deaf to those groups; the server counts it.
@Suite("Server: a change channel whose groups cannot be read closes, and is counted")
struct ChannelMembershipFailureTests {
    /// The server's WebSocket close frame for such a channel: unmasked, FIN and opcode 8, the
    /// status 1011 ("unexpected condition") and the reason.
    static let closeFrame: [UInt8] = {
        let reason = Array(Routes.groupsUnreadableCloseReason.utf8)
        return [0x88, UInt8(2 + reason.count), 0x03, 0xF3] + reason
    }()

    /// The last chunk of a chunked response (after the previous chunk's line end): an event
    /// stream that ended.
    static let streamEnd = Array("\r\n0\r\n\r\n".utf8)

    /// Reads `socket` until what arrived contains `marker` (or the peer ends the connection,
    /// or 20 seconds pass), off the cooperative pool, and returns everything read.
    static func read(_ socket: LoopbackSocket, until marker: [UInt8]) async throws -> [UInt8] {
        try await offThePool { socket.receive(until: marker, within: .seconds(20)) }
    }

    /// `offline_sync_channel_membership_failures_total` now.
    static func failures(_ live: LiveServer) throws -> Double {
        try PrometheusText(String(decoding: live.server.metrics.exposition(), as: UTF8.self))
            .value("offline_sync_channel_membership_failures_total")
    }

    @Test("the store fails under a live channel: re-reading its groups closes it (1011, or the event stream ends) and counts it; one opened meanwhile is never subscribed",
          arguments: LoopbackSocket.ChangeChannelCarrier.allCases)
    func closesAndCounts(_ carrier: LoopbackSocket.ChangeChannelCarrier) async throws {
        // Shared lists: reading bob's groups reads the store.
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: true), groupFanoutLimit: 2) { live in
            let token = try await live.token("bob")
            let port = live.running.port
            let end = carrier == .webSocket ? Self.closeFrame : Self.streamEnd
            let channel = try LoopbackSocket(port: port)
            defer { channel.hangUp() }
            try channel.send(LoopbackSocket.changeChannelRequest(port: port, token: token, carrier: carrier))
            let opened = try await Self.read(channel, until: Array(NoticeRelay.subscribed.utf8))
            #expect(opened.contains(Array(NoticeRelay.subscribed.utf8)))
            #expect(try Self.failures(live) == 0)

            // The store fails; then bob's groups change, as a push that adds him to a list
            // announces, and his channel re-reads them. Before the fix the failed read was
            // dropped (`try?`): the channel stayed open, deaf to his groups, and nothing counted it.
            try await live.store.close()
            await live.server.feed.publish([ChangeNotice(groupsChangedFor: "bob")])
            // The chunk before the last one ended with its line end, which may have come
            // with "subscribed": read until the last chunk, then look at both together.
            let closed = Array(opened.suffix(2)) + (try await Self.read(channel, until: carrier == .webSocket ? end : Array(end.dropFirst(2))))
            #expect(closed.contains(end), "the channel stayed open: \(String(decoding: closed.suffix(64), as: UTF8.self))")
            #expect(try Self.failures(live) == 1)

            // A channel opened while the groups cannot be read closes at once, before
            // "subscribed": its client, not caught up, tries again after its backoff.
            let late = try LoopbackSocket(port: port)
            defer { late.hangUp() }
            try late.send(LoopbackSocket.changeChannelRequest(port: port, token: token, carrier: carrier))
            let answer = try await Self.read(late, until: end)
            #expect(answer.contains(end), "\(String(decoding: answer.suffix(64), as: UTF8.self))")
            #expect(!answer.contains(Array("subscribed".utf8)), "a channel that cannot hear its groups was subscribed")
            #expect(try Self.failures(live) == 2)
        }
    }
}
