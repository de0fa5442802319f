import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncDatasets
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A server store written by the last version before sync rules (commit 8b7f644, through its
/// own routes: `Scripts/make-legacy-store.py` says how), opened by this one.
@Suite("A server store written before sync rules opens and serves its rows unchanged")
struct LegacyStoreTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/server-before-rules.sqlite")

    /// What the old server stored in `todos`, read from a copy of the file by this version's
    /// SQLite adapter without any service: per owner, each row's public form.
    static func storedTodos(in directory: URL) async throws -> [String: [String: Record]] {
        let copy = directory.appendingPathComponent("snapshot.sqlite")
        try FileManager.default.copyItem(at: fixture, to: copy)
        let store = try await SQLiteStore(path: copy.path)
        let rows = try await store.read { try $0.records(in: "todos", matching: Query(.all)) }
        try await store.close()
        var byOwner: [String: [String: Record]] = [:]
        for row in rows {
            let owner = try #require(row["__owner"].stringValue), item = try #require(row["__item"].stringValue)
            var fields = row.fields
            for name in ["__owner", "__item", "__seq"] { fields.removeValue(forKey: name) }
            byOwner[owner, default: [:]][item] = Record(id: item, fields: fields, version: row.version, updatedAt: row.updatedAt,
                                                        deleted: row.deleted)
        }
        return byOwner
    }

    @Test("pulls, the tables API and datasets answer as before, with no rules and with rules that share other tables",
          arguments: [false, true])
    func servesUnchanged(withRules: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let stored = try await Self.storedTodos(in: directory)
            // What the generator wrote, checked independently of how it is stored.
            #expect(stored["alice"]?["t1"]?.fields == ["title": "oat milk", "n": 1, "done": true])
            #expect(stored["alice"]?["t2"]?.fields == ["title": "bread", "n": 2, "done": true, "tags": ["x", "y"]])
            #expect(stored["alice"]?["t3"]?.deleted == true)
            #expect(stored["bob"]?["t1"]?.fields == ["title": "bob's own t1", "n": 10])
            #expect(stored["bob"]?["t9"]?.fields["title"] == "through the tables API")

            let data = directory.appendingPathComponent("server")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: Self.fixture, to: data.appendingPathComponent("server.sqlite"))
            var arguments: [String] = []
            if withRules {
                let rules = directory.appendingPathComponent("rules.yaml")
                try RemoteStoreConformance.sharedListsRules.replacingOccurrences(of: "  todos:", with: "  list_todos:")
                    .write(to: rules, atomically: true, encoding: .utf8)
                arguments = ["--rules", rules.path]
            }
            let server = try await ServerProcess.start(data: data, extraArguments: arguments)
            defer { _ = server.stop() }
            let authority = try await TokenAuthority(secret: testSecret)
            for identity in ["alice", "bob"] {
                let token = try await authority.mint(identity: identity)
                let remote = HTTPRemoteStore(baseURL: server.baseURL, token: { token })
                let page = try await remote.pull(PullRequest(table: "todos"))
                let expected = stored[identity]?.values.filter { !$0.deleted }.sorted { $0.id < $1.id } ?? []
                let live = page.records.filter { !$0.deleted }.sorted { $0.id < $1.id }
                #expect(live == expected, "\(identity)'s todos: ids, fields, versions and times as stored")
                // The tables API lists the same rows.
                let list = try await TablesClient(baseURL: server.baseURL, token: token).list("")
                #expect(list.ids.sorted() == expected.map(\.id))
            }
            // A stored version is still the base of an update.
            let aliceToken = try await authority.mint(identity: "alice")
            let alice = HTTPRemoteStore(baseURL: server.baseURL, token: { aliceToken })
            let t2 = try #require(stored["alice"]?["t2"])
            let results = try await alice.push([PushOperation(id: "after-upgrade", table: "todos", itemId: "t2", kind: .update,
                                                              item: Record(id: "t2", fields: ["title": "rye bread"]),
                                                              baseVersion: t2.version)])
            guard case .applied(let record)? = results.first?.outcome else { Issue.record("\(results)"); return }
            #expect(record["title"] == "rye bread")
            // Alice's dataset record is there.
            let datasets = HTTPDatasetRemote(alice, identityPoolId: "us-east-1:00000000-0000-0000-0000-000000000001",
                                             identityId: "alice")
            let records = try await datasets.listRecords(dataset: "profile", lastSyncCount: 0, nextToken: nil, maxResults: nil,
                                                         syncSessionToken: nil)
            #expect(records.records.map { "\($0.key)=\($0.value ?? "")" } == ["name=Alice"])
            #expect(await server.stopped() == 0)
        }
    }
}
