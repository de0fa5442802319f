import AsyncHTTPClient
import Dispatch
import Foundation
import NIOCore
import OfflineSync
import OfflineSyncCommandSupport
@testable import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// `GET /ready`, the readiness probe, beside `GET /health`, the liveness probe.
@Suite("Server: readiness while serving, draining and without a store")
struct ReadinessTests {
    @Test("a shutdown answers 503 on /ready for the drain period while the server still serves, then stops accepting")
    func drainsBeforeStopping() async throws {
        // A drain longer than the shutdown's 10 s grace period: the grace period once bounded
        // the whole shutdown, drain included, and cut the drain short under the whole suite's
        // load, where the requests below took longer than that. The drain is long enough that
        // the requests below, slowed by the whole suite, still fall inside it.
        try await LiveServer.with(configure: { $0.drainPeriod = .seconds(45) }) { live in
            let ready = try await http(.GET, live.baseURL + "/ready")
            #expect(ready.status == 200 && ready.text.contains("\"ready\""))
            let began = ContinuousClock.now
            let stopping = Task { try await live.running.stop() }
            #expect(try await eventually(timeout: .seconds(30)) { try await http(.GET, live.baseURL + "/ready").status == 503 })
            let draining = try await http(.GET, live.baseURL + "/ready")
            #expect(draining.text.contains("\"draining\""))
            // Still serving while it drains: liveness, and a request that needs a token.
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)
            let pull = try await http(.POST, live.baseURL + "/v1/pull", headers: [("Authorization", "Bearer \(try await live.token("alice"))")],
                                      body: Array(#"{"table":"todos"}"#.utf8))
            #expect(pull.status == 200)
            // Still serving past the 10 s grace period, which once cut the drain short there.
            try await Task.sleep(until: began + .seconds(14))
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)
            try await stopping.value
            #expect(ContinuousClock.now - began >= .seconds(45), "the drain ended early")
            // Stopped: the port refuses a new connection.
            #expect(throws: POSIXError.self) { _ = try LoopbackSocket(port: live.running.port) }
        }
    }

    @Test("a store that does not answer makes /ready 503 while /health stays 200")
    func storeUnavailable() async throws {
        try await LiveServer.with { live in
            #expect(try await http(.GET, live.baseURL + "/ready").status == 200)
            try await live.store.close()
            let answer = try await http(.GET, live.baseURL + "/ready")
            #expect(answer.status == 503 && answer.text.contains("store unavailable"))
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)
        }
    }

    /// What holds every connection a read of the server's SQLite store could use.
    enum Hold: String, CaseIterable, CustomStringConvertible, Sendable {
        /// Both reader connections, each in a read transaction that does not end: a probe's
        /// read waits in the readers' pool (``CheckoutPool``).
        case readers
        /// The only connection of a store without readers, in a write transaction that does
        /// not end (it holds the database's write lock): a probe's read waits behind it on the
        /// connection's thread, where no cancellation reaches it.
        case writer

        var description: String { rawValue }
        /// How many transactions hold it.
        var transactions: Int { self == .readers ? 2 : 1 }
    }

    @Test("a store that hangs: /ready answers 503 by its deadline, probes meanwhile answer too and start no second read, and /ready is 200 once the store answers",
          arguments: Hold.allCases)
    func storeHangs(_ hold: Hold) async throws {
        try await Self.withServer(readerCount: hold == .readers ? 2 : 0) { live in
            let url = live.baseURL + "/ready"
            #expect(try await Self.probe(url).status == 200)
            let readsBefore = live.server.readiness.readsStarted

            // Every connection a read could use is taken by a transaction that waits here.
            let release = DispatchSemaphore(value: 0)
            defer { for _ in 0..<hold.transactions { release.signal() } }
            let (entered, enter) = AsyncStream.makeStream(of: Void.self)
            let store = live.store
            let holders = (0..<hold.transactions).map { _ in
                Task {
                    switch hold {
                    case .readers:
                        try await store.read { _ in
                            enter.yield()
                            _ = release.wait(timeout: .now() + .seconds(300))
                        }
                    case .writer:
                        try await store.write { _ in
                            enter.yield()
                            _ = release.wait(timeout: .now() + .seconds(300))
                        }
                    }
                }
            }
            var arrivals = entered.makeAsyncIterator()
            for _ in 0..<hold.transactions { _ = await arrivals.next() }

            // Before the fix this request hung with the store (its deadline below is what
            // ended it): the probe's task group waited for the read it had raced.
            let began = ContinuousClock.now
            let first = try await Self.probe(url)
            #expect(first.status == 503 && first.text.contains("store unavailable"), "\(first.status) \(first.text)")
            #expect(first.took >= Routes.readinessDeadline, "answered before the deadline: the read failed rather than hung")
            #expect(first.took < .seconds(10), "answered after \(first.took)")

            // Still hung: two more probes at once both answer by their deadline, waiting on
            // the read already under way rather than starting another.
            async let second = Self.probe(url)
            async let third = Self.probe(url)
            for answer in try await [second, third] {
                #expect(answer.status == 503 && answer.text.contains("store unavailable"), "\(answer.status) \(answer.text)")
                #expect(answer.took < .seconds(10), "answered after \(answer.took)")
            }
            // One read, unless the suite's load stretched these probes past the bound after which
            // a stuck read gets company (``ReadinessProbe/staleAfter`` deadlines); never more
            // than ``ReadinessProbe/maximumReads``.
            let allowed = ContinuousClock.now - began < Routes.readinessDeadline * ReadinessProbe.staleAfter ? 1 : ReadinessProbe.maximumReads
            let started = live.server.readiness.readsStarted - readsBefore
            #expect((1...allowed).contains(started), "probes piled up store reads: \(started)")
            #expect(try await http(.GET, live.baseURL + "/health").status == 200)

            // Released, the store answers: the read under way completes, and /ready is 200.
            for _ in 0..<hold.transactions { release.signal() }
            for holder in holders { try await holder.value }
            #expect(try await eventually(timeout: .seconds(30)) { try await Self.probe(url).status == 200 })
        }
    }

    @Test("a read stuck for good does not hold /ready at 503: past five deadlines a probe starts a read beside it, and never more than two are under way")
    func stuckReadIsOutgrown() async throws {
        let probe = ReadinessProbe()
        let deadline = Duration.milliseconds(100)
        // Two reads that hang until released (one stream each: a stream takes one reader).
        let (first, releaseFirst) = AsyncStream.makeStream(of: Void.self)
        let (second, releaseSecond) = AsyncStream.makeStream(of: Void.self)
        defer {
            releaseFirst.finish()
            releaseSecond.finish()
        }
        // A probe's `now` is moved on rather than waited for; a probe expected to hear the
        // store gets a long deadline (and a `now` five of those past the stuck read).
        let start = ContinuousClock.now, patient = Duration.seconds(30)
        let hung = await probe.check(within: deadline, now: start) { for await _ in first {} }
        #expect(hung == .noAnswer)
        // Within five deadlines a probe waits on the read under way rather than start one.
        let waited = await probe.check(within: deadline, now: start + deadline * 4) {}
        #expect(waited == .noAnswer)
        #expect(probe.readsStarted == 1)
        // Past them, a probe starts a read of its own beside the stuck one, and hears the store.
        let later = start + patient * 5 + deadline
        let recovered = await probe.check(within: patient, now: later) {}
        #expect(recovered == .answered)
        #expect(probe.readsStarted == 2)
        // A second read that sticks too: with two under way, a probe starts no third.
        let again = await probe.check(within: deadline, now: later + deadline * 6) { for await _ in second {} }
        #expect(again == .noAnswer)
        #expect(probe.readsStarted == 3)
        let capped = await probe.check(within: deadline, now: later + deadline * 30) {}
        #expect(capped == .noAnswer)
        #expect(probe.readsStarted == 3, "a third read was started beside two stuck ones")
        // The stuck reads end: the store is heard again.
        releaseFirst.finish()
        releaseSecond.finish()
        let answered = await probe.check(within: patient) {}
        #expect(answered == .answered)
    }

    /// One `GET` of `url` that gives up after 15 seconds (the shared helper waits a minute):
    /// its status, body and how long the answer took.
    static func probe(_ url: String) async throws -> (status: Int, text: String, took: Duration) {
        let began = ContinuousClock.now
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(15))
        let body = try await response.body.collect(upTo: 1 << 16)
        return (Int(response.status.code), String(decoding: body.readableBytesView, as: UTF8.self), ContinuousClock.now - began)
    }

    /// Runs `body` against a fresh server over a SQLite file with `readerCount` reader
    /// connections, and stops it afterwards, even on failure.
    static func withServer<T>(readerCount: Int, _ body: (LiveServer) async throws -> T) async throws -> T {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path,
                                              options: .init(readerCount: readerCount))
            let live: LiveServer
            do {
                let service = try await OfflineSyncService(store: store)
                let server = try await SyncServer(service: service, configuration: .init(port: 0, tokenSecret: testSecret,
                                                                                         adminKey: testAdminKey, logger: quietLogger))
                live = LiveServer(store: store, server: server, running: try await server.start())
            } catch {
                try? await store.close()
                throw error
            }
            do {
                let result = try await body(live)
                try await live.stop()
                return result
            } catch {
                try? await live.stop()
                throw error
            }
        }
    }
}
