import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A database file shared with another process (an app extension): its commits, never this
/// store's own, change `externalChangeToken()`.
@Suite("SQLiteStore shares its file with another process")
struct OtherProcessTests {
    @Test("opening the file while another connection defines tables never sees a catalog row without its table")
    func openWhileDefining() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("app.db").path
            let definer = try await SQLiteStore(path: path)
            let defining = Task {
                for i in 0..<150 {
                    try await definer.defineTable(TableSchema("t\(i)", fields: [FieldDefinition("n", .int, indexed: true)]))
                }
            }
            // Each open checks the whole schema; before its reads shared one snapshot, an open
            // between a definition's catalog read and its table read reported the store damaged.
            var opens = 0
            while true {
                let defined = (try? await definer.read { try $0.tables().count }) ?? 0
                let done = defined >= 150
                let store = try await SQLiteStore(path: path)
                try await store.close()
                opens += 1
                if done { break }
            }
            try await defining.value
            try await definer.close()
            #expect(opens > 1)
        }
    }

    @Test("only another process's commits move the token; an in-memory store has none")
    func commitsOfAnotherProcess() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("app.db").path
            let store = try await SQLiteStore(path: path)
            try await store.defineTable(TableSchema("notes"))
            let first = try #require(try await store.externalChangeToken())
            try await store.write { tx in try tx.upsert(Record(id: "own"), in: "notes") }
            #expect(try await store.externalChangeToken() == first, "this store's own commit moved the token")

            await #expect(processExitsWith: .success) { [path = path as String] in
                let child = try await SQLiteStore(path: path)
                try await child.write { tx in try tx.upsert(Record(id: "theirs"), in: "notes") }
                try await child.close()
            }
            let moved = try #require(try await store.externalChangeToken())
            #expect(moved != first)
            #expect(try await store.externalChangeToken() == moved)
            #expect(try await store.read { tx in try tx.count(in: "notes", matching: .all) } == 2)
            try await store.write { tx in try tx.upsert(Record(id: "own-2"), in: "notes") }
            #expect(try await store.externalChangeToken() == moved, "this store's own commit moved the token")
            try await store.close()

            let memory = try await SQLiteStore.inMemory()
            #expect(try await memory.externalChangeToken() == nil)
            try await memory.close()
        }
    }
}
