import Foundation
import Synchronization
import OfflineSync
import OfflineSyncConformance
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Observations patch their last result with the rows a commit wrote instead of reading the
/// store (`ResultPatch`). Whatever the mix of commits, every value must be the one a fresh
/// query gives: this drives random commits and compares after each one.
///
/// The time limit guards against a hang, not a speed: each test awaits thousands of reads
/// and observation values one after another, so while the rest of the test binary loads
/// both cores it takes minutes (126 s in a full run on the 2-core VM, 4 s alone).
@Suite("Observations patched from written rows equal fresh queries", .timeLimit(.minutes(10 * sanitizerSlowdown)))
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

    /// Small commits move rows one by one; large ones (a pulled page) rebuild the result.
    @Test("random inserts, updates and deletes, in transactions of one to many rows",
          arguments: ["memory", "sqlite"], [Commits.small, .large])
    func randomCommits(_ kind: String, _ size: Commits) async throws {
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
                let operations = Self.randomOperations(size, using: &generator)
                try await observer.write { txn in try Self.apply(operations, txn) }
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

    /// Commits land while the observations read and patch on their own tasks, so changes
    /// arrive during reads (a read may already hold them) and during patches. Every value
    /// shown must be one the query had after some commit, and each observation must end on
    /// the final result.
    @Test("values shown while commits land are results the store had, and end on the final one", arguments: ["memory", "sqlite"])
    func concurrentCommits(_ kind: String) async throws {
        try await withTemporaryDirectory { directory in
            let store: any LocalStore = kind == "memory" ? InMemoryStore()
                : try await SQLiteStore(path: directory.appendingPathComponent("app.db").path)
            try await store.defineTable(Self.schema)
            let observer = StoreObserver(store: store)
            let fresh: @Sendable (any LocalReadTransaction) throws -> [[Record]] = { txn in
                try Self.queries.map { try txn.records(in: "items", matching: $0) }
                    + ["r7", "r3"].map { try txn.record(in: "items", id: $0).map { [$0] } ?? [] }
            }
            let shown = Shown(count: Self.queries.count + 2)
            let consumers = Self.queries.enumerated().map { index, query in
                Task { for try await value in observer.observe("items", query) { shown.append(value, at: index) } }
            } + ["r7", "r3"].enumerated().map { offset, id in
                Task {
                    for try await value in observer.observe("items", id: id) {
                        shown.append(value.map { [$0] } ?? [], at: Self.queries.count + offset)
                    }
                }
            }
            var generator = SplitMix64(seed: 2121)
            var had = try await store.read(fresh).map { Set([$0]) }
            for _ in 0..<300 {
                let operations = Self.randomOperations(.small, using: &generator)
                try await observer.write { txn in try Self.apply(operations, txn) }
                for (index, result) in try await store.read(fresh).enumerated() { had[index].insert(result) }
            }
            let final = try await store.read(fresh)
            let settled = await eventually(timeout: .seconds(30)) {
                shown.values.indices.allSatisfy { shown.values[$0].last == final[$0] }
            }
            for consumer in consumers { consumer.cancel() }
            for consumer in consumers { try await consumer.value }
            #expect(settled, "every observation ends on the final result")
            for (index, values) in shown.values.enumerated() {
                for value in values {
                    let had = had[index].contains(value)
                    #expect(had, "observation \(index) showed a result the store never had: \(value.map(\.id))")
                }
                for (previous, value) in zip(values, values.dropFirst()) { #expect(previous != value, "observation \(index) repeated a result") }
            }
            try await store.close()
        }
    }

    /// Query observations with an equality or bounds are found by the value a written row
    /// holds; values the query calls equal or in bounds (an integer and an integral double)
    /// must find them, and values it calls different (strings that differ in bytes only) must not.
    @Test("equality and bounded observations see every row the query admits, and only those")
    func equalityKeys() async throws {
        let store = InMemoryStore()
        try await store.defineTable(TableSchema("values", fields: [
            FieldDefinition("i", .int), FieldDefinition("d", .double), FieldDefinition("s", .string), FieldDefinition("b", .bool),
        ]))
        let observer = StoreObserver(store: store)
        let numbers: [Value] = [.int(5), .double(5.0), .double(2.5), .int(0), .double(-0.0), .int(Int64.max),
                                .double(9_223_372_036_854_775_807.0), .double(-9_223_372_036_854_775_808.0)]
        let strings: [Value] = [.string("\u{e9}"), .string("e\u{301}"), .string("5")]
        var queries: [Query] = []
        for field in ["i", "d"] { queries += numbers.map { Query(Field(field) == $0) } }
        queries += strings.map { Query(Field("s") == $0 && Field("b") == true) } + strings.map { Query(Field("s") == $0) }
        // Bounds: integer literals (tested as an integer range, empty ones included) and others.
        queries += [Query(Field("i") > 0 && Field("i") <= 5), Query(Field("i") > .int(.max)), Query(Field("i") < .int(.min)),
                    Query(Field("i") >= 1 && Field("i") < 1), Query(Field("i") > 2.5), Query(Field("d") >= 0 && Field("d") < 5),
                    Query(Field("d") > .int(.max)), Query(Field("d") <= 2.5 && Field("b") == false)]
        let ints: [Int64] = [5, 0, 1, .max, .min, 2]
        let doubles: [Double] = [5.0, 2.5, -0.0, 0.0, .infinity, 9_223_372_036_854_775_807.0, -9_223_372_036_854_775_808.0]
        let texts = ["\u{e9}", "e\u{301}", "5", ""]
        var iterators = queries.map { observer.observe("values", $0).makeAsyncIterator() }
        var last: [[Record]] = []
        for index in iterators.indices { last.append(try #require(try await iterators[index].next())) }
        for step in 0..<96 {
            let record = Record(id: "r\(step % 3)", fields: [
                "i": .int(ints[step % ints.count]), "d": .double(doubles[step % doubles.count]),
                "s": .string(texts[step % texts.count]), "b": .bool(step % 5 < 2),
            ])
            try await observer.write { try $0.upsert(record, in: "values") }
        for (index, query) in queries.enumerated() {
                let fresh = try await store.read { try $0.records(in: "values", matching: query) }
                guard fresh != last[index] else { continue }
                let value = try #require(try await iterators[index].next())
                #expect(value == fresh, "step \(step), query \(index)")
                last[index] = value
            }
        }
        try await store.close()
    }

    /// The values each observation showed, appended by its consumer task.
    final class Shown: Sendable {
        private let state: Mutex<[[[Record]]]>
        init(count: Int) { state = Mutex(Array(repeating: [], count: count)) }
        func append(_ value: [Record], at index: Int) { state.withLock { $0[index].append(value) } }
        var values: [[[Record]]] { state.withLock { $0 } }
    }

    typealias Operation = (id: String, delete: Bool, n: Int64, tag: String, flag: Bool)

    /// Commit sizes: one to four rows of 40 ids, or 20 to 80 rows of 120 ids (more than a
    /// patch moves one by one).
    enum Commits: Sendable, CustomTestStringConvertible {
        case small, large
        var rows: ClosedRange<Int> { self == .small ? 1...4 : 20...80 }
        var ids: Int { self == .small ? 40 : 120 }
        var testDescription: String { self == .small ? "small commits" : "large commits" }
    }

    /// Random upserts or deletes.
    static func randomOperations(_ size: Commits, using generator: inout SplitMix64) -> [Operation] {
        (0..<Int.random(in: size.rows, using: &generator)).map { _ in
            (id: "r\(Int.random(in: 0..<size.ids, using: &generator))", delete: Int.random(in: 0..<4, using: &generator) == 0,
             n: Int64.random(in: 0..<50, using: &generator), tag: ["a", "b", "c"].randomElement(using: &generator)!,
             flag: Bool.random(using: &generator))
        }
    }

    static func apply(_ operations: [Operation], _ txn: any LocalWriteTransaction) throws {
        for op in operations {
            if op.delete { _ = try txn.delete(id: op.id, in: "items") } else {
                try txn.upsert(Record(id: op.id, fields: ["n": .int(op.n), "tag": .string(op.tag), "flag": .bool(op.flag)]), in: "items")
            }
        }
    }
}
