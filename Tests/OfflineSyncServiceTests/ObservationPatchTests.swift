import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Observations patch their last result with the rows a commit wrote instead of reading the
/// store (`ResultPatch`). Whatever the mix of commits, every value must be the one a fresh
/// query gives: this drives random commits and compares after each one.
@Suite("Observations patched from written rows equal fresh queries")
struct ObservationPatchTests {
    static let schema = TableSchema("items", fields: [
        FieldDefinition("n", .int, indexed: true), FieldDefinition("tag", .string), FieldDefinition("flag", .bool),
    ])

    static let queries: [Query] = [
        .all,
        Query(Field("n") < 30),
        Query(Field("flag") == true, order: [SortKey("n", ascending: false)]),
        Query(Field("n") >= 20, order: [SortKey("n")], limit: 5),
        Query(Field("tag") == "b", order: [SortKey("tag"), SortKey("n", ascending: false)], limit: 3),
        Query(order: [SortKey("n")], limit: 10),
        Query(Field("n") > 10, order: [SortKey("n")], limit: 4, offset: 2),
    ]

    @Test("random inserts, updates and deletes, in transactions of one to many rows", arguments: ["memory", "sqlite"])
    func randomCommits(_ kind: String) async throws {
        try await withTemporaryDirectory { directory in
            let store: any LocalStore = kind == "memory" ? InMemoryStore()
                : try await SQLiteStore(path: directory.appendingPathComponent("app.db").path)
            try await store.defineTable(Self.schema)
            let observer = StoreObserver(store: store)
            var generator = SplitMix64(seed: 21)
            var iterators = Self.queries.map { observer.observe("items", $0).makeAsyncIterator() }
            var records = [observer.observe("items", id: "r7").makeAsyncIterator(), observer.observe("items", id: "r3").makeAsyncIterator()]
            var last: [[Record]] = []
            for index in iterators.indices { last.append(try #require(try await iterators[index].next())) }
            var lastRecord: [Record?] = []
            for index in records.indices { lastRecord.append(try #require(try await records[index].next())) }

            for step in 0..<300 {
                let count = Int.random(in: 1...4, using: &generator)
                let operations = (0..<count).map { _ in
                    (id: "r\(Int.random(in: 0..<40, using: &generator))", delete: Int.random(in: 0..<4, using: &generator) == 0,
                     n: Int64.random(in: 0..<50, using: &generator), tag: ["a", "b", "c"].randomElement(using: &generator)!,
                     flag: Bool.random(using: &generator))
                }
                try await observer.write { txn in
                    for op in operations {
                        if op.delete { _ = try txn.delete(id: op.id, in: "items") } else {
                            try txn.upsert(Record(id: op.id, fields: ["n": .int(op.n), "tag": .string(op.tag), "flag": .bool(op.flag)]), in: "items")
                        }
                    }
                }
                for (index, query) in Self.queries.enumerated() {
                    let fresh = try await store.read { try $0.records(in: "items", matching: query) }
                    // Equal to the last value: nothing may be shown (and next() would wait).
                    guard fresh != last[index] else { continue }
                    let value = try #require(try await iterators[index].next())
                    #expect(value == fresh, "step \(step), query \(index)")
                    last[index] = value
                }
                for (index, id) in ["r7", "r3"].enumerated() {
                    let fresh = try await store.read { try $0.record(in: "items", id: id) }
                    guard fresh != lastRecord[index] else { continue }
                    let value = try #require(try await records[index].next())
                    #expect(value == fresh, "step \(step), record \(id)")
                    lastRecord[index] = value
                }
            }
            try await store.close()
        }
    }
}
