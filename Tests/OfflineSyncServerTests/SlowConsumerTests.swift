import Foundation
import NIOCore
import NIOWebSocket
import OfflineSync
import OfflineSyncCommandSupport
@testable import OfflineSyncServer
import OfflineSyncTestSupport
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A change channel opened on a raw socket that never reads what the server sends: a
/// suspended app, a stalled network.
struct DeafChannel {
    typealias Carrier = LoopbackSocket.ChangeChannelCarrier

    let socket: LoopbackSocket

    /// Connects with a small receive buffer (so the server's writes stall soon), sends the
    /// request that opens the channel with `token`, and reads nothing.
    init(port: Int, token: String, carrier: Carrier = .webSocket) throws {
        socket = try LoopbackSocket.deafChannel(port: port, token: token, carrier: carrier, receiveBuffer: 4096)
    }

    /// Reads what the server left in the socket until the connection ends; `true` when it
    /// ended (the server closed it), `false` when nothing more came for `quiet`.
    func drainsToEnd(quiet: Duration = .seconds(10)) async throws -> Bool {
        try await offThePool { [socket] in socket.readToEnd(quiet: quiet).ended }
    }

    func hangUp() { socket.hangUp() }
}

@Suite("Server: change channels whose client stops reading")
struct SlowConsumerTests {
    static func scrape(_ live: LiveServer) async throws -> PrometheusText {
        try PrometheusText(try await http(.GET, live.baseURL + "/metrics", headers: [("X-Admin-Key", testAdminKey)]).text)
    }

    @Test("a channel whose writes stall is closed after the write timeout, with its notices merged per table meanwhile; a channel that reads hears every table",
          .serialized, arguments: DeafChannel.Carrier.allCases)
    func stalledWritesCloseTheChannel(carrier: DeafChannel.Carrier) async throws {
        try await LiveServer.with(configure: {
            $0.changeChannelWriteTimeout = .seconds(1)
            $0.changeChannelPingInterval = .seconds(3600)
        }) { live in
            let port = try #require(URL(string: live.baseURL)?.port)
            let deaf = try DeafChannel(port: port, token: try await live.token("alice"), carrier: carrier)
            defer { deaf.hangUp() }
            let listening = EventLog(try await live.remote("alice").changes())
            #expect(await listening.waitFor(.subscribed))
            #expect(try await eventually(timeout: .seconds(30)) { try await Self.scrape(live).value("offline_sync_websockets_connected") == 2 })

            // The notices a push of a hundred long-named tables announces, published on the
            // server's own feed as a push does after its commit (pushing them through the store
            // would load the whole suite for as long as the socket takes to fill): 15 KB a
            // round, so the deaf socket's buffers (the kernel's, then NIO's) fill in a few
            // hundred rounds.
            let tables = (0..<100).map { String(format: "notes_for_a_client_that_never_reads_its_socket_%03d_", $0) + String(repeating: "x", count: 70) }
            var rounds = 0
            let started = ContinuousClock.now
            while try await Self.scrape(live).value("offline_sync_slow_channels_closed_total") == 0 {
                guard ContinuousClock.now - started < .seconds(240) else {
                    Issue.record("the deaf \(carrier.rawValue) was not closed after \(rounds) rounds of notices")
                    return
                }
                for _ in 0..<10 {
                    await live.server.feed.publish(tables.map { ChangeNotice(identity: "alice", table: $0) })
                    rounds += 1
                    // Time for the channels to write the round out, so most rounds are not merged.
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            let metrics = try await Self.scrape(live)
            #expect(metrics.value("offline_sync_slow_channels_closed_total") == 1)
            #expect(metrics.value("offline_sync_notices_coalesced_total") > 0, "notices for a stalled channel's tables were not merged")
            #expect(try await eventually(timeout: .seconds(30)) { try await Self.scrape(live).value("offline_sync_websockets_connected") == 1 })
            #expect(try await deaf.drainsToEnd(), "the deaf channel's connection is still open")

            // The channel that reads still hears a push.
            _ = try await live.remote("alice").push([PushOperation(id: "op-last", table: "last", itemId: "x", kind: .insert,
                                                    item: Record(id: "x", fields: [:]), baseVersion: nil)])
            #expect(await listening.waitFor(.changed(table: "last")))
            await listening.stop()
        }
    }

    @Test("a WebSocket channel that answers no ping is closed by the next ping, before any notice")
    func unansweredPingClosesTheChannel() async throws {
        try await LiveServer.with(configure: {
            $0.changeChannelWriteTimeout = .seconds(3600)
            $0.changeChannelPingInterval = .seconds(2)
        }) { live in
            let port = try #require(URL(string: live.baseURL)?.port)
            let deaf = try DeafChannel(port: port, token: try await live.token("alice"))
            defer { deaf.hangUp() }
            // A client that reads answers the pings and stays.
            let listening = EventLog(try await live.remote("alice").changes())
            #expect(await listening.waitFor(.subscribed))
            #expect(try await eventually(timeout: .seconds(30)) { try await Self.scrape(live).value("offline_sync_websockets_connected") == 2 })
            #expect(try await deaf.drainsToEnd(quiet: .seconds(30)), "the deaf channel's connection is still open")
            #expect(try await eventually(timeout: .seconds(30)) { try await Self.scrape(live).value("offline_sync_websockets_connected") == 1 })
            // Past several ping periods, the reading client (which answers the pings) still
            // hears a change. A stall of the whole test process past a ping period could close
            // it too; it then reconnects, so the write is repeated until it is heard.
            try await Task.sleep(for: .seconds(5))
            let alice = try await live.remote("alice")
            var heard = false
            for attempt in 0..<6 where !heard {
                _ = try await alice.push([PushOperation(id: "op-\(attempt)", table: "notes", itemId: "n\(attempt)", kind: .insert,
                                                        item: Record(id: "n\(attempt)", fields: [:]), baseVersion: nil)])
                heard = await listening.waitFor(.changed(table: "notes"), timeout: .seconds(10))
            }
            #expect(heard, "the reading channel heard no change")
            #expect(try await Self.scrape(live).value("offline_sync_websockets_connected") == 1)
            await listening.stop()
        }
    }
}

@Suite("Server: a channel's waiting notices")
struct PendingNoticesTests {
    @Test("notices wait one per table, in first-arrival order; a merged notice of two origins keeps none; a dataset keeps its newest count")
    func mergesPerTable() async {
        let merges = Counter()
        let pending = PendingNotices(merged: { merges.add() })
        pending.add(ChangeNotice(.identity("a"), .table("t1"), origin: "c1"))
        pending.add(ChangeNotice(.identity("a"), .table("t2"), origin: "c1"))
        pending.add(ChangeNotice(.identity("a"), .table("t1"), origin: "c1"))
        pending.add(ChangeNotice(.identity("a"), .table("t2"), origin: "c2"))
        let first = DatasetNotification(identityPoolId: "p", identityId: "a", datasetName: "d", syncCount: 1)
        let second = DatasetNotification(identityPoolId: "p", identityId: "a", datasetName: "d", syncCount: 2)
        pending.add(ChangeNotice(dataset: first))
        pending.add(ChangeNotice(dataset: second))
        guard case .notices(let notices) = await pending.next() else { Issue.record("no notices"); return }
        #expect(merges.value == 3)
        #expect(notices == [ChangeNotice(.identity("a"), .table("t1"), origin: "c1"), ChangeNotice(.identity("a"), .table("t2")),
                            ChangeNotice(dataset: second)])
        // A table whose name differs only in Unicode normalisation is another table.
        pending.add(ChangeNotice(identity: "a", table: "caf\u{E9}"))
        pending.add(ChangeNotice(identity: "a", table: "cafe\u{301}"))
        guard case .notices(let two) = await pending.next() else { Issue.record("no notices"); return }
        #expect(two.count == 2)
        #expect(merges.value == 3)
    }

    @Test("with many tables waiting, each still waits once, in first-arrival order, and a later notice of any of them merges")
    func mergesAmongManyTables() async {
        let merges = Counter()
        let pending = PendingNotices(merged: { merges.add() })
        let tables = (0..<40).map { "t\($0)" }
        for table in tables { pending.add(ChangeNotice(identity: "a", table: table)) }
        for table in tables.reversed() { pending.add(ChangeNotice(identity: "a", table: table)) }
        pending.add(ChangeNotice(identity: "a", table: "t41"))
        guard case .notices(let notices) = await pending.next() else { Issue.record("no notices"); return }
        #expect(notices.map(\.change) == (tables + ["t41"]).map { .table($0) })
        #expect(merges.value == 40)
        // Taken: the same tables wait anew, none merged into what was taken.
        for table in tables.prefix(10) + tables.prefix(10) { pending.add(ChangeNotice(identity: "a", table: table)) }
        guard case .notices(let again) = await pending.next() else { Issue.record("no notices"); return }
        #expect(again.map(\.change) == tables.prefix(10).map { .table($0) })
        #expect(merges.value == 50)
    }

    @Test("a reader waits for the next notice; finishing or cancelling ends its wait; past the limit the channel is over")
    func waitsFinishesAndOverflows() async {
        let pending = PendingNotices(limit: 3)
        let reader = Task { await pending.next() }
        pending.add(ChangeNotice(identity: "a", table: "t"))
        guard case .notices(let notices) = await reader.value else { Issue.record("the reader got no notice"); return }
        #expect(notices.count == 1)

        let cancelled = Task { await pending.next() }
        cancelled.cancel()
        guard case .finished = await cancelled.value else { Issue.record("a cancelled reader kept waiting"); return }

        for table in ["t1", "t2", "t3", "t4"] { pending.add(ChangeNotice(identity: "a", table: table)) }
        guard case .over = await pending.next() else { Issue.record("four tables fit a limit of three"); return }

        let finished = PendingNotices()
        let waiting = Task { await finished.next() }
        finished.finish()
        guard case .finished = await waiting.value else { Issue.record("finishing did not end the wait"); return }
        finished.add(ChangeNotice(identity: "a", table: "t"))
        guard case .finished = await finished.next() else { Issue.record("a finished channel took a notice"); return }
    }

    @Test("a writer is woken when a notice reaches an empty queue, not for each notice; once the channel ended it takes nothing")
    func wakesAWriter() {
        let pending = PendingNotices(limit: 3)
        pending.add(ChangeNotice(identity: "a", table: "t1"))
        let wakes = Counter()
        // Registered with a notice waiting: woken at once.
        pending.wake { wakes.add() }
        #expect(wakes.value == 1)
        pending.add(ChangeNotice(identity: "a", table: "t2"))
        pending.add(ChangeNotice(identity: "a", table: "t1"))
        #expect(wakes.value == 1)
        guard case .notices(let notices) = pending.take() else { Issue.record("no notices"); return }
        #expect(notices.map(\.table) == ["t1", "t2"])
        #expect(pending.take().map { _ in true } == nil, "nothing waits")
        pending.add(ChangeNotice(identity: "a", table: "t3"))
        #expect(wakes.value == 2)
        // Ended with a notice waiting: the writer is woken and takes nothing more.
        pending.finish()
        #expect(wakes.value == 3)
        guard case .finished = pending.take() else { Issue.record("a finished channel gave notices"); return }

        let over = PendingNotices(limit: 2)
        let overWakes = Counter()
        over.wake { overWakes.add() }
        for table in ["t1", "t2", "t3"] { over.add(ChangeNotice(identity: "a", table: table)) }
        #expect(overWakes.value == 2)
        guard case .over = over.take() else { Issue.record("three tables fit a limit of two"); return }
    }
}

@Suite("Server: notice frames written past the WebSocket encoder")
struct NoticeFrameTests {
    @Test("a text frame carries its length in 7 bits, or 16 or 64 after 126 or 127, and reads back as the same message")
    func encodesLengths() {
        let allocator = ByteBufferAllocator()
        for (length, header) in [(5, [0x81, 5]), (125, [0x81, 125]), (126, [0x81, 126, 0, 126]), (200, [0x81, 126, 0, 200]),
                                 (70_000, [0x81, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70])] as [(Int, [UInt8])] {
            let message = String(repeating: "é", count: length / 2) + (length % 2 == 1 ? "x" : "")
            #expect(message.utf8.count == length)
            let frame = NoticeLoop.textFrame(message, allocator: allocator)
            #expect(Array(frame.readableBytesView.prefix(header.count)) == header, "\(length) bytes")
            #expect(frame.readableBytes == header.count + length)
            let decoded = NoticeLoop.decodedTextFrame(frame)
            #expect(decoded.fin && decoded.opcode == .text && decoded.maskKey == nil)
            #expect(String(buffer: decoded.data) == message)
        }
    }
}

private final class Counter: Sendable {
    private let count = Atomic(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
