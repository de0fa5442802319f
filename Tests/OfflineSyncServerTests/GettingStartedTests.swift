import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncTestSupport
import Testing

@Suite("Docs/GettingStarted.md's complete client")
struct GettingStartedTests {
    @Test("the guide shows GettingStartedClient.swift as it is, and that client syncs against a live server")
    func completeClient() async throws {
        let example = try DocumentExample(in: "Docs/GettingStarted.md", showing: "Tests/OfflineSyncServerTests/GettingStartedClient.swift")
        #expect(example.shown == example.source, "the guide shows GettingStartedClient.swift as it is")

        try await withTemporaryDirectory { directory in
            let live = try await LiveServer.start(in: directory)
            let token = try await live.token("alice")
            let phone = try await startSyncing(server: live.baseURL, storeFile: directory.appendingPathComponent("phone.sqlite").path,
                                               token: { token })
            let laptop = try await startSyncing(server: live.baseURL, storeFile: directory.appendingPathComponent("laptop.sqlite").path,
                                                token: { token })
            var statuses = laptop.observeStatus().makeAsyncIterator()
            var lines: [String] = []
            while let status = await statuses.next() {
                lines.append(statusLine(status))
                if status.hasSynced, !status.uploading, !status.downloading { break }
            }
            #expect(lines.last == "up to date")
            var screen = openTodos(of: "home", in: laptop).makeAsyncIterator()
            #expect(try await screen.next() == [])
            let milk = ListTodo(id: UUID(), listId: "home", title: "Milk", done: false)
            try await phone.table(ListTodo.self).insert(milk)
            // The phone's background loop pushes it; the server announces it to the laptop,
            // whose loop pulls it; the laptop's screen shows it with the server's version.
            let shown = try #require(try await screen.next())
            #expect(shown.map(\.title) == ["Milk"] && shown.first?.version != nil)
            // The server stores the snake_case field the rules name.
            let stored = try await live.store.read { try $0.records(in: "todos", matching: .all) }
            #expect(stored.first?["list_id"] == "home")
            try await phone.close()
            try await laptop.close()
            try await live.stop()
        }
    }
}
