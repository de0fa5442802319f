import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

@Suite("Lifecycle over HTTP: a real server going away and coming back, live notifications")
struct LifecycleHTTPTests {
    static let notes = TableSchema("notes", fields: [FieldDefinition("title", .string)])

    @Test("offline at start, the server appears: networkStatus(false), then the whole sequence; notified changes are pulled live")
    func serverComesBack() async throws {
        try await withTemporaryDirectory { directory in
            // Find a free port, then leave it: the client starts while nothing listens there.
            let probeDirectory = directory.appendingPathComponent("probe", isDirectory: true)
            try FileManager.default.createDirectory(at: probeDirectory, withIntermediateDirectories: true)
            let probe = try await LiveServer.start(in: probeDirectory)
            let port = probe.running.port
            try await probe.stop()

            let token = try await TokenAuthority(secret: testSecret).mint(identity: "alice")
            // A refused connection fails at once; the generous timeout keeps a slow answer from
            // the server under a loaded machine from reading as the network going away again.
            let http = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(port)",
                                       configuration: .init(requestTimeout: .seconds(15), maxAttempts: 1,
                                                            initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(200)),
                                       token: { token })
            let local = try await SQLiteStore(path: directory.appendingPathComponent("client.sqlite").path)
            let client = try await SyncContext(store: local, remote: http)
            try await client.defineTable(Self.notes)
            var events = client.events().makeAsyncIterator()
            await client.start(tables: ["notes"], network: http.networkMonitor(interval: .milliseconds(200), maxBackoff: .milliseconds(200)))
            #expect(await events.next() == .networkStatus(active: false))
            _ = try await client.table("notes").insert(Record(id: "offline", fields: ["title": "written while the server was down"]))

            let serverDirectory = directory.appendingPathComponent("server", isDirectory: true)
            try FileManager.default.createDirectory(at: serverDirectory, withIntermediateDirectories: true)
            let live = try await LiveServer.start(in: serverDirectory) { $0.port = port }
            var sequence: [String] = []
            while let event = await events.next() {
                switch event {
                case .networkStatus(let active): sequence.append("networkStatus(\(active))")
                case .subscriptionsEstablished: sequence.append("subscriptionsEstablished")
                case .syncQueriesStarted: sequence.append("syncQueriesStarted")
                case .modelSynced(let info): sequence.append("modelSynced(\(info.table))")
                case .syncQueriesReady: sequence.append("syncQueriesReady")
                case .ready: sequence.append("ready")
                default: continue
                }
                if sequence.last == "ready" { break }
            }
            #expect(sequence == ["networkStatus(true)", "subscriptionsEstablished", "syncQueriesStarted", "modelSynced(notes)",
                                 "syncQueriesReady", "ready"])
            #expect(try await live.server.service.record(identity: "alice", table: "notes", id: "offline") != nil)

            // Another device's change is announced and pulled without the app asking.
            let other = try await SyncContext(store: try await SQLiteStore(path: directory.appendingPathComponent("other.sqlite").path),
                                              remote: try await live.remote("alice"))
            try await other.defineTable(Self.notes)
            _ = try await other.table("notes").insert(Record(id: "live", fields: ["title": "from the other device"]))
            try await other.push()
            let deadline = ContinuousClock.now + .seconds(20)
            while try await client.table("notes").get("live") == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await client.table("notes").get("live")?["title"] == "from the other device")
            await client.stop()
            try await other.store.close()
            try await local.close()
            try await live.stop()
        }
    }

    @Test("a client's own pushes are not announced back to its channel; another client's are")
    func ownPushIsNotAnnouncedBack() async throws {
        try await LiveServer.with { live in
            let mine = try await live.remote("alice"), other = try await live.remote("alice")
            var heard = mine.changes().makeAsyncIterator()
            #expect(await heard.next() == .subscribed)
            for batch in 0..<20 {
                _ = try await mine.push([PushOperation(id: "op\(batch)", table: "notes", itemId: "n\(batch)", kind: .insert,
                                                       item: Record(id: "n\(batch)"), baseVersion: nil)])
            }
            _ = try await other.push([PushOperation(id: "o1", table: "notes", itemId: "theirs", kind: .insert,
                                                    item: Record(id: "theirs"), baseVersion: nil)])
            // The signal: a change to another table, announced after all of the above (a
            // channel delivers notices in order).
            _ = try await other.push([PushOperation(id: "o2", table: "barrier", itemId: "b", kind: .insert,
                                                    item: Record(id: "b"), baseVersion: nil)])
            var notes = 0
            while let event = await heard.next(), event != .changed(table: "barrier") {
                if event == .changed(table: "notes") { notes += 1 }
            }
            #expect(notes == 1, "the other client's change only, not the 20 pushes of this one")
        }
    }
}
