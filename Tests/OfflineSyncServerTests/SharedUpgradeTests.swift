import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A server store with shared data written by the last version before group logs (commit
/// d76a07a, whose view log kept one entry per identity and row: `Scripts/make-shared-store.py`
/// says how), opened by this one: each identity's stored cursor continues, with no reset, to
/// exactly what the rules let it read; and a membership begun after the upgrade moves the
/// list's older rows in.
@Suite("A server store with shared data written before group logs opens, and its clients' cursors continue")
struct SharedUpgradeTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/server-before-groups")

    /// What `cursors.json` keeps per identity and table: the cursor after a full pull by the
    /// old server, and the versions of the rows the client then held, by id.
    struct Saved: Decodable {
        var cursor: String
        var held: [String: String]
    }

    /// Pulls `table` from `saved` to its end in pages of two, as a client applies them.
    static func continuePull(_ remote: HTTPRemoteStore, _ table: String, from saved: Saved) async throws -> Saved {
        var state = saved
        while true {
            let page = try await remote.pull(PullRequest(table: table, cursor: state.cursor, limit: 2))
            #expect(!page.cursorReset, "a stored cursor of \(table) was reset")
            for record in page.records { state.held[record.id] = record.deleted ? nil : record.version }
            for id in page.removed { state.held[id] = nil }
            state.cursor = page.nextCursor
            if page.remaining == 0 { return state }
        }
    }

    /// What the rules let each identity read, from the server's stored rows (the server stopped).
    static func oracle(_ data: URL, _ identities: [String]) async throws -> [String: [String: [String: String]]] {
        let store = try await SQLiteStore(path: data.appendingPathComponent("server.sqlite").path)
        var views: [String: [String: [String: String]]] = [:]
        for identity in identities {
            let view = try await sharedListsOracle(serverStore: store, identity: identity)
            views[identity] = Dictionary(uniqueKeysWithValues: sharedListsTables.map { table in
                (table, view[table]?.mapValues { $0.version ?? "" } ?? [:])
            })
        }
        try await store.close()
        return views
    }

    @Test("stored cursors continue to the rules' answer, then a new member of an old list gets its rows")
    func continues() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("server")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: Self.fixture.appendingPathComponent("server.sqlite"),
                                             to: data.appendingPathComponent("server.sqlite"))
            let rules = directory.appendingPathComponent("rules.yaml")
            try RemoteStoreConformance.sharedListsRules.write(to: rules, atomically: true, encoding: .utf8)
            let saved = try JSONDecoder().decode([String: [String: Saved]].self,
                                                 from: Data(contentsOf: Self.fixture.appendingPathComponent("cursors.json")))
            let identities = saved.keys.sorted()
            #expect(identities == ["ann", "ben", "cat", "dan"])
            #expect(saved["ann"]?["todos"]?.held.keys.sorted() == ["t1", "t3"], "the fixture as written")
            let authority = try await TokenAuthority(secret: testSecret)
            func remote(_ server: ServerProcess, _ identity: String) async throws -> HTTPRemoteStore {
                let token = try await authority.mint(identity: identity)
                return HTTPRemoteStore(baseURL: server.baseURL, token: { token })
            }

            // Old cursors continue: ann gets the todo added after her pull and loses L2 (her
            // membership ended); dan gets L2, added after his first pull.
            var states: [String: [String: Saved]] = [:]
            let server = try await ServerProcess.start(data: data, extraArguments: ["--rules", rules.path])
            for identity in identities {
                for table in sharedListsTables {
                    let client = try await remote(server, identity)
                    states[identity, default: [:]][table] = try await Self.continuePull(client, table, from: saved[identity]![table]!)
                }
            }
            _ = await server.stopped()
            var expected = try await Self.oracle(data, identities)
            for identity in identities {
                for table in sharedListsTables {
                    #expect(states[identity]?[table]?.held == expected[identity]?[table], "\(identity)'s \(table) after the upgrade")
                }
            }
            #expect(expected["ann"]?["todos"]?.keys.sorted() == ["t1", "t4"])
            #expect(expected["dan"]?["todos"]?.keys.sorted() == ["t3"])

            // A membership begun after the upgrade: ann adds dan to L1, whose rows were all
            // written before it; dan's next pull moves them in.
            let again = try await ServerProcess.start(data: data, extraArguments: ["--rules", rules.path])
            let results = try await remote(again, "ann").push([PushOperation(
                id: "after-upgrade", table: "list_members", itemId: "m-L1-dan", kind: .insert,
                item: Record(id: "m-L1-dan", fields: ["list_id": "L1", "user_id": "dan"]), baseVersion: nil)])
            guard case .applied? = results.first?.outcome else { Issue.record("\(results)"); _ = again.stop(); return }
            for table in sharedListsTables {
                let client = try await remote(again, "dan")
                states["dan"]![table] = try await Self.continuePull(client, table, from: states["dan"]![table]!)
            }
            _ = await again.stopped()
            expected = try await Self.oracle(data, identities)
            for table in sharedListsTables {
                #expect(states["dan"]?[table]?.held == expected["dan"]?[table], "dan's \(table) after joining L1")
            }
            #expect(expected["dan"]?["todos"]?.keys.sorted() == ["t1", "t3", "t4"])
        }
    }
}
