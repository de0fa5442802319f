import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncTestSupport
import OfflineSyncWire
import Synchronization
import Testing

/// A flag the writers' side lowers and the puller reads.
private final class Flag: Sendable {
    private let raised = Atomic(true)
    var isRaised: Bool { raised.load(ordering: .acquiring) }
    func lower() { raised.store(false, ordering: .releasing) }
}

/// Writers insert and update while a CommunityToolkit-style client pulls without pause; at
/// the end the client must hold exactly the server's rows. Timestamp delta tokens lose rows
/// that share the millisecond of a token already used, or that commit after a later stamp;
/// the server's strictly increasing `updatedAt` (`OfflineSyncService.TableClock`) and keyset
/// pages are what make this hold.
@Suite("Server: a Datasync client pulling while others write loses and repeats nothing", .serialized)
struct DatasyncConcurrencyTests {
    /// 4 writers × 2,500 writes.
    static let writers = 4
    static let writesPerWriter = 2_500

    /// Runs the writers against `servers` (writer k uses server k mod count) and the puller
    /// against them in turn until the writers are done, then checks the client's table.
    static func run(servers: [String], token: String) async throws {
        let pulling = Flag()
        async let pulled: ToolkitPuller = {
            var puller = ToolkitPuller(table: "todos")
            var round = 0
            while pulling.isRaised {
                try await puller.pull(baseURL: servers[round % servers.count], token: token)
                round += 1
            }
            // One more pull, after the last write committed.
            try await puller.pull(baseURL: servers[round % servers.count], token: token)
            return puller
        }()
        let written: Int
        do {
            written = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0..<writers {
                    let baseURL = servers[writer % servers.count]
                    group.addTask {
                        writer % 2 == 0
                            ? try await tablesWriter(writer, baseURL: baseURL, token: token)
                            : try await nativeWriter(writer, baseURL: baseURL, token: token)
                    }
                }
                return try await group.reduce(0, +)
            }
        } catch {
            pulling.lower()
            _ = try? await pulled
            throw error
        }
        let server: [String: ToolkitPuller.Entity]
        do {
            server = try await serverEntities(baseURL: servers[0], token: token, table: "todos")
            // The last pull must begin after the newest stamp's millisecond: on PostgreSQL a
            // read serves only stamps below its clock's millisecond (a writer of the current
            // one may still be committing), and the last write's answer can come back within it.
            if let newest = server.values.map(\.updatedAt).max() {
                let deadline = ContinuousClock.now + .seconds(5)
                while Timestamp.now() <= newest, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
                // The database's clock is this machine's: a stamp still ahead after 5 s is a defect.
                #expect(Timestamp.now() > newest, "the newest stamp \(newest) is still ahead of the clock")
            }
        } catch {
            pulling.lower()
            _ = try? await pulled
            throw error
        }
        pulling.lower()
        let puller = try await pulled
        #expect(written == writers * writesPerWriter)
        let lost = server.filter { puller.entities[$0.key] != $0.value }.map(\.key)
        #expect(lost.isEmpty, "\(lost.count) of \(server.count) rows missing or stale after \(puller.requests) requests: \(lost.prefix(10).map { "\($0): pulled \(String(describing: puller.entities[$0])), stored \(String(describing: server[$0]))" })")
        #expect(puller.entities.count == server.count)
        #expect(puller.repeats.isEmpty, "rows sent twice: \(puller.repeats.prefix(10))")
    }

    /// Single-row inserts and updates through the tables API; returns how many it made.
    static func tablesWriter(_ writer: Int, baseURL: String, token: String) async throws -> Int {
        let client = TablesClient(baseURL: baseURL, token: token)
        var ids: [String] = []
        for n in 0..<writesPerWriter {
            if n % 5 >= 3, let id = ids.randomElement() {
                let response = try await client.send(.PUT, "/tables/todos/\(id)", json: #"{"id":"\#(id)","title":"u\#(n)"}"#)
                guard response.status == 200 else { throw SyncError(.transient, "PUT: \(response.status) \(response.text)") }
            } else {
                let id = "w\(writer)-\(n)"
                let response = try await client.send(.POST, "/tables/todos", json: #"{"id":"\#(id)","title":"i\#(n)"}"#)
                guard response.status == 201 else { throw SyncError(.transient, "POST: \(response.status) \(response.text)") }
                ids.append(id)
            }
        }
        return writesPerWriter
    }

    /// Batches of five inserts and updates through the native push (one transaction each,
    /// so five rows commit together); returns how many writes it made.
    static func nativeWriter(_ writer: Int, baseURL: String, token: String) async throws -> Int {
        let remote = HTTPRemoteStore(baseURL: baseURL, token: { token })
        var ids: [String] = []
        var n = 0
        while n < writesPerWriter {
            var batch: [PushOperation] = []
            for _ in 0..<5 where n < writesPerWriter {
                if n % 5 >= 3, let id = ids.randomElement(), !batch.contains(where: { $0.itemId == id }) {
                    batch.append(PushOperation(id: "op-\(writer)-\(n)", table: "todos", itemId: id, kind: .update,
                                               item: Record(id: id, fields: ["title": .string("u\(n)")]), baseVersion: nil))
                } else {
                    let id = "w\(writer)-\(n)"
                    batch.append(PushOperation(id: "op-\(writer)-\(n)", table: "todos", itemId: id, kind: .insert,
                                               item: Record(id: id, fields: ["title": .string("i\(n)")]), baseVersion: nil))
                    ids.append(id)
                }
                n += 1
            }
            let results = try await remote.push(batch)
            for result in results {
                guard case .applied = result.outcome else { throw SyncError(.transient, "push: \(result.outcome)") }
            }
        }
        return writesPerWriter
    }

    @Test("10,000 writes by four writers on one SQLite server, a client pulling throughout: 0 rows lost, 0 repeated")
    func sqliteServer() async throws {
        try await withTemporaryDirectory { directory in
            let server = try await ServerProcess.start(data: directory.appendingPathComponent("data"))
            defer { _ = server.stop() }
            let token = try await TokenAuthority(secret: testSecret).mint(identity: "alice")
            try await Self.run(servers: [server.baseURL], token: token)
            #expect(await server.stopped() == 0)
        }
    }

    @Test("10,000 writes through two server instances on one PostgreSQL, a client pulling from both in turn: 0 lost, 0 repeated",
          .enabled(if: TestPostgres.shouldRun, "OFFLINE_SYNC_TEST_POSTGRES_URL is not set: run with Scripts/with-postgres.sh"))
    func twoPostgreSQLInstances() async throws {
        guard let url = TestPostgres.url else { Issue.record("OFFLINE_SYNC_TEST_POSTGRES_URL is not set but CI is"); return }
        try await withTemporaryDirectory { directory in
            try await ServerProcess.withTwoInstances(sharing: url, in: directory) { one, two in
                let token = try await TokenAuthority(secret: testSecret).mint(identity: "alice")
                try await Self.run(servers: [one.baseURL, two.baseURL], token: token)
                #expect(await one.stopped() == 0)
                #expect(await two.stopped() == 0)
            }
        }
    }
}
