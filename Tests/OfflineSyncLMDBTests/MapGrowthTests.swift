import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncTestSupport
import Testing

/// The map grows by itself when writes fill it, without losing a transaction.
@Suite("LMDBStore grows its map")
struct MapGrowthTests {
    static let tiny = LMDBStore.Options(initialMapSize: 1 << 20, mapGrowthStep: 1 << 20)

    static func record(_ i: Int) -> Record {
        Record(id: "r\(i)", fields: ["n": .int(Int64(i)), "text": .string(String(repeating: "payload-\(i % 10) ", count: 60))])
    }

    @Test("writes far beyond a 1 MiB initial map all land, in many transactions and in one")
    func growsAcrossAndWithinTransactions() async throws {
        try await withTemporaryDirectory { directory in
            let total = 12_000
            try await withStore(in: directory, options: Self.tiny) { store in
                #expect(try await store.statistics().mapSize == 1 << 20)
                try await store.defineTable(TableSchema("big", fields: [FieldDefinition("n", .int, indexed: true)]))
                // 10 transactions of 1,000 records (~600 KB each)...
                for start in stride(from: 0, to: 10_000, by: 1000) {
                    try await store.write { tx in
                        for i in start..<(start + 1000) { try tx.upsert(Self.record(i), in: "big") }
                    }
                }
                // ...and one transaction that alone is larger than the initial map, which also
                // reads what it wrote before and after the map grew.
                let seen = try await store.write { tx -> Int in
                    for i in 10_000..<total { try tx.upsert(Self.record(i), in: "big") }
                    return try tx.count(in: "big", matching: Field("n") >= 10_000)
                }
                #expect(seen == total - 10_000)
                let statistics = try await store.statistics()
                #expect(statistics.mapSize > 5 << 20)
                #expect(statistics.mapGrowths >= 4)
                #expect(statistics.usedBytes <= statistics.mapSize)
            }
            try await withStore(in: directory, options: Self.tiny) { store in
                let (count, sample, ordered) = try await store.read { tx in
                    (try tx.count(in: "big", matching: .all), try tx.record(in: "big", id: "r11999"),
                     try tx.records(in: "big", matching: Query(order: [SortKey("n", ascending: false)], limit: 3)).map(\.id))
                }
                #expect(count == total)
                #expect(sample == Self.record(11_999))
                #expect(ordered == ["r11999", "r11998", "r11997"])
                // Reopened with a smaller initial size, LMDB keeps the size the data needs.
                #expect(try await store.statistics().mapSize > 5 << 20)
            }
        }
    }

    @Test("a transaction that would outgrow maximumMapSize fails with limitExceeded and leaves nothing")
    func maximumMapSize() async throws {
        try await withTemporaryDirectory { directory in
            let options = LMDBStore.Options(initialMapSize: 1 << 20, mapGrowthStep: 1 << 20, maximumMapSize: 2 << 20)
            try await withStore(in: directory, options: options) { store in
                try await store.defineTable(TableSchema("big"))
                try await store.write { tx in try tx.upsert(Record(id: "kept"), in: "big") }
                let error = await syncError {
                    try await store.write { tx in for i in 0..<10_000 { try tx.upsert(Self.record(i), in: "big") } }
                }
                #expect(error?.code == .limitExceeded)
                // A body that swallows the error cannot commit a partial transaction.
                let swallowed = await syncError {
                    try await store.write { tx in
                        for i in 0..<10_000 { try? tx.upsert(Self.record(i), in: "big") }
                        try? tx.upsert(Record(id: "partial"), in: "big")
                    }
                }
                #expect(swallowed?.code == .limitExceeded)
                let ids = try await store.read { tx in try tx.records(in: "big", matching: .all).map(\.id) }
                #expect(ids == ["kept"])
                try await store.write { tx in try tx.upsert(Record(id: "after"), in: "big") }
                #expect(try await store.read { tx in try tx.count(in: "big", matching: .all) } == 2)
            }
        }
    }

    @Test("a map grown by another process is adopted by this one's reads and writes")
    func adoptsGrowthByAnotherProcess() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.path
            try await withStore(in: directory, options: Self.tiny) { store in
                try await store.defineTable(TableSchema("big"))
                try await store.write { tx in try tx.upsert(Record(id: "parent"), in: "big") }
                await #expect(processExitsWith: .success) { [path = path as String] in
                    let child = try await LMDBStore(directory: path, options: MapGrowthTests.tiny)
                    for start in stride(from: 0, to: 6000, by: 1000) {
                        try await child.write { tx in
                            for i in start..<(start + 1000) { try tx.upsert(MapGrowthTests.record(i), in: "big") }
                        }
                    }
                    try await child.close()
                }
                // The environment's data now lies beyond this process's 1 MiB map.
                #expect(try await store.read { tx in try tx.count(in: "big", matching: .all) } == 6001)
                #expect(try await store.read { tx in try tx.record(in: "big", id: "r5999") } == Self.record(5999))
                try await store.write { tx in try tx.upsert(Record(id: "parent-after"), in: "big") }
                // This process never grew the map itself: it adopted the child's size.
                let statistics = try await store.statistics()
                #expect(statistics.mapSize > 1 << 20)
                #expect(statistics.mapGrowths == 0)
            }
        }
    }

    @Test("the map grows while readers run; every read sees a consistent snapshot")
    func growsUnderConcurrentReads() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(in: directory, options: Self.tiny) { store in
                try await store.defineTable(TableSchema("big"))
                let problems = try await withThrowingTaskGroup(of: Int.self) { group -> Int in
                    group.addTask {
                        for start in stride(from: 0, to: 6000, by: 500) {
                            try await store.write { tx in
                                for i in start..<(start + 500) { try tx.upsert(Self.record(i), in: "big") }
                            }
                        }
                        return 0
                    }
                    for _ in 0..<3 {
                        group.addTask {
                            var bad = 0
                            for _ in 0..<60 {
                                let count = try await store.read { tx in try tx.count(in: "big", matching: .all) }
                                if count % 500 != 0 { bad += 1 }
                            }
                            return bad
                        }
                    }
                    return try await group.reduce(0, +)
                }
                #expect(problems == 0)
                #expect(try await store.read { tx in try tx.count(in: "big", matching: .all) } == 6000)
                #expect(try await store.statistics().mapGrowths > 0)
            }
        }
    }
}
