import Foundation
import GRDB
import OfflineSync
import OfflineSyncTestSupport
import Testing

@Suite("Docs/GRDB.md's example app")
struct GRDBGuideTests {
    @Test("the guide shows GRDBGuideExample.swift as it is; two apps running it sync a todo written through GRDB",
          .timeLimit(.minutes(4)))  // a hang, not the whole suite's load
    func twoAppsSync() async throws {
        let example = try DocumentExample(in: "Docs/GRDB.md", showing: "Tests/OfflineSyncGRDBTests/GRDBGuideExample.swift")
        #expect(example.shown == example.source, "the guide shows GRDBGuideExample.swift as it is")

        try await withTemporaryDirectory { directory in
            let live = try await LoopbackServer.start()
            let token = try await live.server.tokens.mint(identity: "alice")
            let phoneDatabase = try openAppDatabase(path: directory.appendingPathComponent("phone.sqlite").path)
            let laptopDatabase = try openAppDatabase(path: directory.appendingPathComponent("laptop.sqlite").path)
            let phone = try await startSyncing(phoneDatabase, server: live.running.baseURL, token: { token })
            let laptop = try await startSyncing(laptopDatabase, server: live.running.baseURL, token: { token })
            var screen = todoTitles(in: laptopDatabase).makeAsyncIterator()
            #expect(try await screen.next() == [])
            // Written by the phone app through GRDB alone: the started context pushes it, the
            // server announces it, the laptop's context pulls it into the laptop's table.
            try await addTodo("Milk", to: phoneDatabase)
            #expect(try await screen.next() == ["Milk"])
            try await phone.close()
            try await laptop.close()
            try await live.stop()
        }
    }
}
