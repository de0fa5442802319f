import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncTestSupport
import Testing

/// An environment shared with another process (an app extension): tables it defines are
/// usable here, and its commits, never this store's own, change `externalChangeToken()`.
@Suite("LMDBStore shares its environment with another process")
struct OtherProcessTests {
    @Test("a table another process defined is read and written here; only its commits move the token")
    func tablesAndCommitsOfAnotherProcess() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.path
            try await withStore(in: directory) { store in
                try await store.defineTable(TableSchema("mine"))
                let first = try #require(try await store.externalChangeToken())
                try await store.write { tx in try tx.upsert(Record(id: "own"), in: "mine") }
                #expect(try await store.externalChangeToken() == first, "this store's own commit moved the token")

                // The child defines a table this process has never opened, and writes to both.
                await #expect(processExitsWith: .success) { [path = path as String] in
                    let child = try await LMDBStore(directory: path)
                    try await child.defineTable(TableSchema("theirs", fields: [FieldDefinition("n", .int, indexed: true)]))
                    try await child.write { tx in
                        try tx.upsert(Record(id: "t1", fields: ["n": 1]), in: "theirs")
                        try tx.upsert(Record(id: "m1"), in: "mine")
                    }
                    try await child.close()
                }
                let moved = try #require(try await store.externalChangeToken())
                #expect(moved != first)
                #expect(try await store.externalChangeToken() == moved)

                // Read (by id, by index) and write a table only the child ever opened.
                #expect(try await store.read { tx in try tx.record(in: "theirs", id: "t1")?["n"] } == 1)
                #expect(try await store.read { tx in try tx.records(in: "theirs", matching: Query(Field("n") == 1)).map(\.id) } == ["t1"])
                try await store.write { tx in try tx.upsert(Record(id: "t2", fields: ["n": 2]), in: "theirs") }
                #expect(try await store.read { tx in try tx.count(in: "theirs", matching: .all) } == 2)
                #expect(try await store.read { tx in try tx.count(in: "mine", matching: .all) } == 2)
                #expect(try await store.externalChangeToken() == moved, "this store's own commit moved the token")
            }
        }
    }
}
