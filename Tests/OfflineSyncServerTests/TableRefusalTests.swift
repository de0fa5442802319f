import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A table the rules deny is refused with 403 `forbidden`, reported on that table, and stops
/// nothing else: the other tables and the outbox keep syncing; only refused credentials halt.
@Suite("One table's refusal stops no other table", .timeLimit(.minutes(2)))
struct TableRefusalTests {
    /// `default: deny`: only `todos` is named, so `secrets` is no one's.
    static let rules = SyncRules(defaultAccess: .deny, tables: ["todos": .ownerOnly])

    static func device(_ live: LiveServer, _ directory: URL, _ name: String) async throws -> (SyncContext, SQLiteStore) {
        let store = try await SQLiteStore(path: directory.appendingPathComponent("\(name).sqlite").path)
        let context = try await SyncContext(store: store, remote: try await live.remote("alice"))
        for table in ["secrets", "todos"] { try await context.defineTable(TableSchema(table)) }
        return (context, store)
    }

    @Test("the server answers a denied table with 403 forbidden on pull and on write; the client's error is forbidden, not an authentication failure")
    func deniedTableIsForbidden() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            let remote = try await live.remote("alice")
            do {
                _ = try await remote.pull(PullRequest(table: "secrets"))
                Issue.record("the denied table was pulled")
            } catch let error as SyncError {
                #expect(error.code == .forbidden, "\(error)")
                #expect(SyncFailure.kind(of: error) == .rejected)
            }
            let results = try await remote.push([PushOperation(id: "s1", table: "secrets", itemId: "s1", kind: .insert,
                                                              item: Record(id: "s1"), baseVersion: nil)])
            guard case .rejected(_, let status) = results.first?.outcome else { Issue.record("the denied write was applied"); return }
            #expect(status == 403)
            let tables = TablesClient(baseURL: live.baseURL, token: try await live.token("alice"))
            #expect(try await tables.send(.GET, "/tables/secrets").status == 403)
        }
    }

    @Test("sync() pulls every other table and pushes the outbox past a denied table, then throws forbidden naming it")
    func syncGoesOnPastARefusal() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            try await withTemporaryDirectory { directory in
                let (writer, writerStore) = try await Self.device(live, directory, "writer")
                let (reader, readerStore) = try await Self.device(live, directory, "reader")
                _ = try await writer.table("todos").insert(Record(id: "t1", fields: ["title": "milk"]))
                do {
                    try await writer.sync(["secrets", "todos"])
                    Issue.record("the denied table went unreported")
                } catch let error as SyncError {
                    #expect(error.code == .forbidden)
                    #expect(error.message.contains("'secrets'"), "\(error.message)")
                }
                #expect(try await writer.queuedOperationCount() == 0, "the push after a refused table did not run")
                #expect(writer.status.tableErrors["secrets"]?.error.code == .forbidden)
                #expect(writer.status.tableErrors["todos"] == nil)
                await #expect(throws: SyncError.self) { try await reader.sync(["secrets", "todos"]) }
                #expect(try await reader.table("todos").get("t1")?["title"] == "milk", "the table after the refused one was not pulled")
                try await writerStore.close()
                try await readerStore.close()
            }
        }
    }

    @Test("a started context with a denied table first keeps syncing the others: a write reaches the other device, and the loop is not halted")
    func startedContextKeepsSyncing() async throws {
        try await LiveServer.with(rules: Self.rules) { live in
            try await withTemporaryDirectory { directory in
                let (writer, writerStore) = try await Self.device(live, directory, "writer")
                let (reader, readerStore) = try await Self.device(live, directory, "reader")
                await writer.start(tables: ["secrets", "todos"], network: ManualNetworkMonitor(online: true))
                await reader.start(tables: ["secrets", "todos"], network: ManualNetworkMonitor(online: true))
                var readerStatus = reader.observeStatus().makeAsyncIterator()
                while let status = await readerStatus.next(), status.tableErrors["secrets"] == nil {}
                var todos = reader.table("todos").observe(id: "t1").makeAsyncIterator()
                #expect(try await todos.next() == .some(nil))
                _ = try await writer.table("todos").insert(Record(id: "t1", fields: ["title": "milk"]))
                // The reader hears of the write and pulls it, while its denied table waits.
                let arrived = try await todos.next()
                #expect(arrived??["title"] == "milk")
                #expect(reader.status.backgroundSync == .running)
                #expect(reader.status.tableErrors["secrets"]?.kind == .rejected)
                #expect(reader.status.tableErrors["secrets"]?.willRetry == true)
                await writer.stop()
                await reader.stop()
                try await writerStore.close()
                try await readerStore.close()
            }
        }
    }
}
