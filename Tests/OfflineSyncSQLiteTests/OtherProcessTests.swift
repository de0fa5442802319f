import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A database file shared with another process (an app extension): its commits, never this
/// store's own, change `externalChangeToken()`.
@Suite("SQLiteStore shares its file with another process")
struct OtherProcessTests {
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
