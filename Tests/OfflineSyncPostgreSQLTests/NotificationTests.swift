import Dispatch
import Foundation
import OfflineSync
@testable import OfflineSyncPostgreSQL
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// What a listening task received, with arrival times.
final class Inbox: Sendable {
    private struct State {
        var received: [(payload: String, at: ContinuousClock.Instant)] = []
        var failure: (any Error)?
        var done = false
    }
    private let state = Box(State())

    var payloads: [String] { state.value.received.map(\.payload) }
    var arrivals: [ContinuousClock.Instant] { state.value.received.map(\.at) }
    var error: (any Error)? { state.value.failure }
    var ended: Bool { state.value.done }

    func add(_ payload: String) { state.withLock { $0.received.append((payload, .now)) } }
    func end(_ error: (any Error)?) { state.withLock { $0.failure = error; $0.done = true } }

    /// Iterates `notifications` in a task of its own until it ends; cancel the task to stop.
    static func collecting(_ notifications: PostgreSQLNotifications) -> (Inbox, Task<Void, Never>) {
        let inbox = Inbox()
        let task = Task {
            do {
                for try await payload in notifications { inbox.add(payload) }
                inbox.end(nil)
            } catch {
                inbox.end(error)
            }
        }
        return (inbox, task)
    }
}


@Suite("PostgreSQLStore: LISTEN/NOTIFY across store instances", .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct NotificationTests {
    /// A channel name no other test uses.
    static func channel(_ name: String) -> String {
        "osync_" + name + "_" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
    }

    /// Runs one statement on a connection of its own (on a dispatch queue: libpq blocks) and
    /// returns its first row's first column as an integer, or `nil`.
    @discardableResult
    static func admin(_ sql: String, _ parameters: [PGParameter] = []) async throws -> Int64? {
        guard let url = TestServer.url else { throw SyncError(.unsupported, "no PostgreSQL test server") }
        let statement = UncheckedStatement(sql: sql, parameters: parameters)
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result {
                    let connection = try PGConnection.connect(url, password: nil)
                    defer { connection.close() }
                    let result = try connection.execute(statement.sql, statement.parameters)
                    return result.count > 0 ? result.int64(0, 0) : nil
                })
            }
        }
    }

    /// `PGParameter` is a plain enum of Sendable payloads; it is only not declared Sendable.
    struct UncheckedStatement: @unchecked Sendable {
        var sql: String
        var parameters: [PGParameter]
    }

    /// How many server backends are listening on `channel` (their last statement is its LISTEN).
    static func listeningBackends(_ channel: String) async throws -> Int64 {
        try await admin("SELECT count(*)::bigint FROM pg_stat_activity WHERE query = $1",
                        [.text("LISTEN " + PostgreSQLStore.quote(channel))]) ?? -1
    }

    static func makeStores(_ count: Int, _ name: String) async throws -> [PostgreSQLStore] {
        let directory = URL(fileURLWithPath: "/tmp/notifications-" + name + UUID().uuidString)
        var stores: [PostgreSQLStore] = []
        for _ in 0..<count { stores.append(try await makeStore(directory, poolSize: 2)) }
        return stores
    }

    @Test func notifyReachesAListenerOfAnotherStoreInstance() async throws {
        guard TestServer.require() != nil else { return }
        let stores = try await Self.makeStores(2, "instances")
        let channel = Self.channel("instances")
        let (inbox, task) = Inbox.collecting(try await stores[1].notifications(channel: channel))
        // LISTEN is in effect on return: a notification sent right away is delivered.
        try await stores[0].notify(channel: channel, payload: "first")
        for index in 0..<20 { try await stores[0].notify(channel: channel, payload: "n\(index)") }
        try await stores[1].notify(channel: channel, payload: "from the listener's own store")
        let expected = ["first"] + (0..<20).map { "n\($0)" } + ["from the listener's own store"]
        #expect(await eventually { inbox.payloads.count >= expected.count })
        #expect(inbox.payloads == expected)
        #expect(inbox.error == nil)
        task.cancel()
        for store in stores { try await store.close() }
    }

    @Test func payloadsAndChannelNamesRoundTripExactly() async throws {
        guard TestServer.require() != nil else { return }
        let stores = try await Self.makeStores(2, "payloads")
        let channel = "my \"quoted\" Chännel " + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let (inbox, task) = Inbox.collecting(try await stores[1].notifications(channel: channel))
        #expect(try await Self.listeningBackends(channel) == 1)
        let payloads = [
            "it's \"quoted\" and \\ back\\slashed; DROP TABLE x; --",
            "é e\u{301} 😀 日本語 \u{202E}",
            "",
            "line\nbreak\ttab\r",
            String(repeating: "x", count: PostgreSQLStore.maxNotificationPayloadBytes),
            String(repeating: "é", count: PostgreSQLStore.maxNotificationPayloadBytes / 2),
        ]
        // Channels are exact: another case or a prefix of the name is another channel.
        try await stores[0].notify(channel: channel.lowercased(), payload: "wrong case")
        try await stores[0].notify(channel: String(channel.dropLast()), payload: "prefix")
        for payload in payloads { try await stores[0].notify(channel: channel, payload: payload) }
        #expect(await eventually { inbox.payloads.count >= payloads.count })
        #expect(inbox.payloads == payloads)
        task.cancel()
        for store in stores { try await store.close() }
    }

    @Test func aTransactionsNotificationArrivesOnlyAfterCommitAndNeverAfterRollback() async throws {
        guard TestServer.require() != nil else { return }
        let stores = try await Self.makeStores(2, "transactions")
        let writer = stores[0]
        try await writer.defineTable(TableSchema("items"))
        let channel = Self.channel("transactions")
        let (inbox, task) = Inbox.collecting(try await stores[1].notifications(channel: channel))

        let bodyEnded = Box<ContinuousClock.Instant?>(nil)
        try await writer.write { transaction in
            try transaction.upsert(Record(id: "a"), in: "items")
            try writer.notify(channel: channel, payload: "committed", in: transaction)
            Thread.sleep(forTimeInterval: 0.4)   // a listener would see it now if NOTIFY were not transactional
            bodyEnded.value = .now
        }
        #expect(await eventually { !inbox.payloads.isEmpty })
        let arrival = try #require(inbox.arrivals.first)
        let ended = try #require(bodyEnded.value)
        #expect(arrival > ended, "the notification arrived before its transaction committed")

        await #expect(throws: SyncError.self) {
            try await writer.write { transaction in
                try transaction.upsert(Record(id: "b"), in: "items")
                try writer.notify(channel: channel, payload: "rolled back", in: transaction)
                throw SyncError(.rejected, "roll back")
            }
        }
        try await writer.notify(channel: channel, payload: "after the rollback")
        #expect(await eventually { inbox.payloads.count >= 2 })
        try await Task.sleep(for: .milliseconds(100))
        #expect(inbox.payloads == ["committed", "after the rollback"])
        #expect(try await writer.read { try $0.record(in: "items", id: "b") } == nil)

        // Only a PostgreSQLStore transaction can carry a notification.
        let other = InMemoryStore()
        try await other.defineTable(TableSchema("items"))
        await #expect(throws: SyncError.self) {
            try await other.write { try writer.notify(channel: channel, payload: "x", in: $0) }
        }
        task.cancel()
        for store in stores { try await store.close() }
    }

    @Test func invalidChannelsAndPayloadsAreTypedErrors() async throws {
        guard TestServer.require() != nil else { return }
        let store = try await Self.makeStores(1, "invalid")[0]
        func code(_ work: () async throws -> Void) async -> SyncError.Code? {
            do { try await work(); return nil } catch let error as SyncError { return error.code } catch { return nil }
        }
        let longest = String(repeating: "日", count: 21)                  // 63 bytes
        for bad in ["", longest + "x", String(repeating: "c", count: 64), "nul\0inside"] {
            #expect(await code { try await store.notify(channel: bad, payload: "p") } == .invalidName)
            #expect(await code { _ = try await store.notifications(channel: bad) } == .invalidName)
        }
        let tooLong = String(repeating: "x", count: PostgreSQLStore.maxNotificationPayloadBytes + 1)
        #expect(await code { try await store.notify(channel: "ok", payload: tooLong) } == .limitExceeded)
        let tooLongMultibyte = String(repeating: "€", count: 2667)        // 8001 bytes, 2667 characters
        #expect(await code { try await store.notify(channel: "ok", payload: tooLongMultibyte) } == .limitExceeded)
        #expect(await code { try await store.notify(channel: "ok", payload: "nul\0inside") } == .invalidValue)

        // The longest valid channel works end to end.
        let (inbox, task) = Inbox.collecting(try await store.notifications(channel: longest))
        try await store.notify(channel: longest, payload: "longest")
        #expect(await eventually { inbox.payloads == ["longest"] })
        task.cancel()

        try await store.close()
        #expect(await code { try await store.notify(channel: "ok", payload: "p") } == .storeClosed)
        #expect(await code { _ = try await store.notifications(channel: "ok") } == .storeClosed)
    }

    @Test func cancellingTheListeningTaskClosesItsConnection() async throws {
        guard TestServer.require() != nil else { return }
        let store = try await Self.makeStores(1, "cancel")[0]
        let channel = Self.channel("cancel")
        let (inbox, task) = Inbox.collecting(try await store.notifications(channel: channel))
        #expect(try await Self.listeningBackends(channel) == 1)
        try await store.notify(channel: channel, payload: "before")
        #expect(await eventually { inbox.payloads == ["before"] })

        task.cancel()
        #expect(await eventually(timeout: .seconds(30)) { inbox.ended })
        #expect(inbox.error == nil)
        #expect(try await eventually(timeout: .seconds(30)) { try await Self.listeningBackends(channel) == 0 })
        #expect(await eventually(timeout: .seconds(30)) { store.notificationHub.openListeners == 0 })

        // close() on the sequence does the same, and returns once the connection is closed.
        let second = try await store.notifications(channel: channel)
        #expect(try await Self.listeningBackends(channel) == 1)
        await second.close()
        await second.close()
        #expect(try await eventually(timeout: .seconds(30)) { try await Self.listeningBackends(channel) == 0 })
        var iterator = second.makeAsyncIterator()
        #expect(try await iterator.next() == nil)

        // Dropping an unused sequence closes its connection too.
        _ = try await store.notifications(channel: channel)
        #expect(try await eventually(timeout: .seconds(30)) { try await Self.listeningBackends(channel) == 0 })
        try await store.close()
    }

    @Test func closingTheStoreEndsItsListeners() async throws {
        guard TestServer.require() != nil else { return }
        let store = try await Self.makeStores(1, "close")[0]
        let channel = Self.channel("close")
        let (first, firstTask) = Inbox.collecting(try await store.notifications(channel: channel))
        let (second, secondTask) = Inbox.collecting(try await store.notifications(channel: channel))
        #expect(try await Self.listeningBackends(channel) == 2)
        try await store.close()
        #expect(try await eventually(timeout: .seconds(30)) { try await Self.listeningBackends(channel) == 0 })
        #expect(await eventually(timeout: .seconds(30)) { first.ended && second.ended })
        #expect(first.error == nil && second.error == nil)
        _ = (firstTask, secondTask)
    }

    @Test func aTerminatedListenerBackendEndsTheSequenceWithTransient() async throws {
        guard let url = TestServer.require() else { return }
        let store = try await Self.makeStores(1, "terminate")[0]
        let channel = Self.channel("terminate")
        let (inbox, task) = Inbox.collecting(try await store.notifications(channel: channel))
        let terminated = try await Self.admin("""
            SELECT count(*)::bigint FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1) AS killed
            """, [.text("LISTEN " + PostgreSQLStore.quote(channel))])
        #expect(terminated == 1)
        #expect(await eventually { inbox.ended })
        let error = try #require(inbox.error as? SyncError)
        #expect(error.code == .transient)
        #expect(error.message.contains("127.0.0.1"))
        #expect(error.message.contains(String(URLComponents(string: url)?.port ?? -1)))
        #expect(!TestServer.password(url).isEmpty && !error.description.contains(TestServer.password(url)))
        #expect(await eventually(timeout: .seconds(30)) { store.notificationHub.openListeners == 0 })
        // The store itself still works, and a new listener can be opened.
        let (again, againTask) = Inbox.collecting(try await store.notifications(channel: channel))
        try await store.notify(channel: channel, payload: "again")
        #expect(await eventually { again.payloads == ["again"] })
        task.cancel()
        againTask.cancel()
        try await store.close()
    }
}
