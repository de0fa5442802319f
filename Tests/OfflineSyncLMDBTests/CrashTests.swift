import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncTestSupport
import Testing

#if os(Linux)
import Glibc
#endif

/// A process killed with SIGKILL in the middle of a write transaction keeps every commit that
/// returned and nothing of the open transaction; the environment (and its write lock, held
/// by the dead process) is usable afterwards.
@Suite("LMDBStore survives kill -9")
struct CrashTests {
    @Test("commits survive SIGKILL inside a write; the open transaction leaves nothing")
    func killedInsideWrite() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.path
            await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String] in
                let store = try await LMDBStore(directory: path)
                try await store.defineTable(TableSchema("log", fields: [FieldDefinition("i", .int, indexed: true)]))
                for i in 0..<100 {
                    try await store.write { tx in try tx.upsert(Record(id: "e\(i)", fields: ["i": .int(Int64(i))]), in: "log") }
                }
                // A read left open when the process dies holds a reader slot in lock.mdb.
                Task.detached { try await store.read { _ in sleep(60) } }
                try await Task.sleep(for: .milliseconds(50))
                try await store.write { tx in
                    for i in 100..<200 { try tx.upsert(Record(id: "e\(i)", fields: ["i": .int(Int64(i))]), in: "log") }
                    kill(getpid(), SIGKILL)
                }
            }
            try await withStore(in: directory) { store in
                let (count, last, uncommitted) = try await store.read { tx in
                    (try tx.count(in: "log", matching: .all),
                     try tx.first(in: "log", matching: Query(order: [SortKey("i", ascending: false)]))?.id,
                     try tx.record(in: "log", id: "e150"))
                }
                #expect(count == 100)
                #expect(last == "e99")
                #expect(uncommitted == nil)
                // The dead process's write lock and reader slot do not block this one.
                try await store.write { tx in try tx.upsert(Record(id: "after", fields: ["i": 1000]), in: "log") }
                #expect(try await store.read { tx in try tx.count(in: "log", matching: .all) } == 101)
            }
        }
    }
}
