import Dispatch
import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncTestSupport
import Testing

/// Reader slots are given back, reads run beside a write, and writes are serialized.
@Suite("LMDBStore readers and writers")
struct ConcurrencyTests {
    static let fewReaders = LMDBStore.Options(maxReaders: 4, readerConcurrency: 2)

    @Test("many more sequential and concurrent reads than reader slots never hit MDB_READERS_FULL")
    func readerSlotsAreReleased() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(in: directory, options: Self.fewReaders) { store in
                try await store.defineTable(TableSchema("t"))
                try await store.write { tx in for i in 0..<20 { try tx.upsert(Record(id: "r\(i)"), in: "t") } }
                for i in 0..<300 {
                    let found = try await store.read { tx in try tx.record(in: "t", id: "r\(i % 20)") }
                    #expect(found != nil)
                }
                let total = try await withThrowingTaskGroup(of: Int.self) { group -> Int in
                    for _ in 0..<400 {
                        group.addTask { try await store.read { tx in try tx.count(in: "t", matching: .all) } }
                    }
                    return try await group.reduce(0, +)
                }
                #expect(total == 400 * 20)
                let statistics = try await store.statistics()
                #expect(statistics.maxReaders == 4)
                #expect(statistics.readerSlotsUsed <= 4)
            }
        }
    }

    @Test("a read runs and sees the last commit while a write transaction is open")
    func readsDoNotWaitForWrites() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(in: directory) { store in
                try await store.defineTable(TableSchema("t", fields: [FieldDefinition("v", .int)]))
                try await store.write { tx in try tx.upsert(Record(id: "x", fields: ["v": 1]), in: "t") }
                let inside = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
                async let writing: Void = store.write { tx in
                    try tx.upsert(Record(id: "x", fields: ["v": 2]), in: "t")
                    inside.signal()
                    // Blocks the writer queue (not the cooperative pool) until the read is done.
                    release.wait()
                }
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().async { inside.wait(); continuation.resume() }
                }
                let seen = try await store.read { tx in try tx.record(in: "t", id: "x")?["v"] }
                release.signal()
                try await writing
                #expect(seen == .int(1))
                #expect(try await store.read { tx in try tx.record(in: "t", id: "x")?["v"] } == .int(2))
            }
        }
    }

    @Test("close waits for running work; later calls throw storeClosed; every acknowledged write is kept")
    func closeWaits() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await LMDBStore(directory: directory)
            try await store.defineTable(TableSchema("t"))
            let writes = Task { () -> Int in
                var acknowledged = 0
                for i in 0..<200 {
                    do {
                        try await store.write { tx in try tx.upsert(Record(id: "r\(i)"), in: "t") }
                        acknowledged += 1
                    } catch let error as SyncError where error.code == .storeClosed {
                        break
                    }
                }
                return acknowledged
            }
            try await Task.sleep(for: .milliseconds(20))
            try await store.close()
            let acknowledged = try await writes.value
            let error = await syncError { _ = try await store.read { tx in try tx.tables() } }
            #expect(error?.code == .storeClosed)
            let statistics = await syncError { _ = try await store.statistics() }
            #expect(statistics?.code == .storeClosed)
            try await store.close()
            let kept = try await withStore(in: directory) { store in
                try await store.read { tx in try tx.count(in: "t", matching: .all) }
            }
            #expect(kept == acknowledged)
        }
    }

    @Test("a second store on an environment already open in this process is refused with busy")
    func secondOpenIsBusy() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(in: directory) { store in
                try await store.defineTable(TableSchema("t"))
                let error = await syncError { _ = try await LMDBStore(directory: directory.appendingPathComponent(".")) }
                #expect(error?.code == .busy)
                try await store.write { tx in try tx.upsert(Record(id: "still"), in: "t") }
            }
            // Once closed, it opens again.
            let found = try await withStore(in: directory) { store in
                try await store.read { tx in try tx.record(in: "t", id: "still") }
            }
            #expect(found != nil)
        }
    }

    @Test("records with ids longer than an LMDB key are stored, found, replaced and deleted exactly")
    func longIds() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(in: directory) { store in
                try await store.defineTable(TableSchema("t", fields: [FieldDefinition("v", .int, indexed: true)]))
                let prefix = String(repeating: "é", count: 300) // 600 bytes, beyond LMDB's 511-byte keys
                let ids = (0..<5).map { prefix + "-\($0)" } + [String(repeating: "k", count: 1024)]
                try await store.write { tx in
                    for (i, id) in ids.enumerated() { try tx.upsert(Record(id: id, fields: ["v": .int(Int64(i))]), in: "t") }
                    try tx.upsert(Record(id: ids[2], fields: ["v": 20]), in: "t")
                }
                let (count, second, byIndex, first) = try await store.read { tx in
                    (try tx.count(in: "t", matching: .all), try tx.record(in: "t", id: ids[2]),
                     try tx.records(in: "t", matching: Query(Field("v") == 20)).map(\.id),
                     try tx.records(in: "t", matching: Query(limit: 2)).map(\.id))
                }
                #expect(count == ids.count)
                #expect(second?["v"] == .int(20))
                #expect(byIndex == [ids[2]])
                #expect(first == Array(ids.sorted(by: Value.utf8Less).prefix(2)))
                #expect(try await store.write { tx in try tx.delete(id: ids[1], in: "t") })
                #expect(try await store.read { tx in try tx.record(in: "t", id: ids[1]) } == nil)
                #expect(try await store.read { tx in try tx.count(in: "t", matching: .all) } == ids.count - 1)
            }
        }
    }
}
