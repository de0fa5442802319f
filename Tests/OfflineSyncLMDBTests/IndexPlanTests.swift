import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncLMDB
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// The index plans (equality on an index prefix, walking an index in order, first records by
/// id) return exactly what the reference store returns, through inserts, replacements,
/// deletes and a redefinition that changes the indexes.
@Suite("LMDBStore index plans agree with the reference store")
struct IndexPlanTests {
    static let schema = TableSchema("items", fields: [
        FieldDefinition("a", .int, indexed: true), FieldDefinition("b", .string), FieldDefinition("c", .date),
        FieldDefinition("d", .bool, indexed: true),
    ], indexes: [IndexDefinition(["b", "a"])])

    static let redefined = TableSchema("items", fields: [
        FieldDefinition("a", .int), FieldDefinition("b", .string, indexed: true), FieldDefinition("c", .date, indexed: true),
        FieldDefinition("d", .bool),
    ], indexes: [IndexDefinition(["d", "c"])])

    static func id(_ n: Int) -> String {
        n % 7 == 0 ? String(repeating: "long-", count: 110) + "\(n)" : "id\(n)"
    }

    static func randomRecord(_ rng: inout SplitMix64) -> Record {
        var fields: [String: Value] = [:]
        if rng.below(5) > 0 { fields["a"] = .int(Int64(rng.below(8)) - 3) }
        if rng.below(5) > 0 { fields["b"] = .string(["x", "y", "z\u{0}z", "é"][rng.below(4)]) }
        if rng.below(4) > 0 { fields["c"] = .date(Timestamp(millisecondsSince1970: Int64(rng.below(5)) * 1000 - 2000)) }
        if rng.below(4) > 0 { fields["d"] = .bool(rng.below(2) == 0) }
        if rng.below(3) == 0 { fields["extra"] = .int(Int64(rng.below(3))) }
        return Record(id: id(rng.below(60)), fields: fields)
    }

    static let queries: [Query] = {
        var queries: [Query] = []
        for a in -3...4 { queries.append(Query(Field("a") == .int(Int64(a)))) }
        for b in ["x", "y", "z\u{0}z", "é", "none"] {
            queries.append(Query(Field("b") == .string(b)))
            queries.append(Query(Field("b") == .string(b) && Field("a") == 1, order: [SortKey("c")]))
            queries.append(Query(Field("b") == .string(b) && Field("a") >= 0, limit: 3, offset: 1))
        }
        // IN lists on index fields: fanned out into one index range per value (a value
        // listed twice, an empty list, a value of another kind, IN before and after ==).
        queries.append(Query(Field("b").isIn(["x", "é", "x", "none"])))
        queries.append(Query(Field("b").isIn(["y", "z\u{0}z"]) && Field("a").isIn([1, -3, 2, 1]), order: [SortKey("c")]))
        queries.append(Query(Field("a").isIn([0, 1]) && Field("b") == "x"))
        queries.append(Query(Field("b").isIn([]) && Field("a") == 1))
        queries.append(Query(Field("a").isIn([1, 1.0, 2])))
        queries.append(Query(Field("a").isIn([.int(2), .null])))
        queries.append(Query(Field("d").isIn([true]) && Field("c").isIn([.date(Timestamp(millisecondsSince1970: 0)), .date(Timestamp(millisecondsSince1970: 1000))])))
        queries.append(Query(Field("d") == true && Field("extra") == 1))
        queries.append(Query(Field("a") == 1.0))
        for ascending in [true, false] {
            for field in ["a", "c", "d"] {
                queries.append(Query(order: [SortKey(field, ascending: ascending)], limit: 1))
                queries.append(Query(order: [SortKey(field, ascending: ascending), SortKey("b")], limit: 5, offset: 2))
                queries.append(Query(Field("b") == "x", order: [SortKey(field, ascending: ascending)], limit: 4))
                queries.append(Query(.not(.isNull(field)), order: [SortKey(field, ascending: ascending)], limit: 0))
            }
        }
        queries.append(Query(limit: 3))
        queries.append(Query(Field("b") != "x", limit: 4, offset: 3))
        queries.append(Query(order: [SortKey("b")], limit: 6))
        return queries
    }()

    func compare(_ lmdb: LMDBStore, _ reference: InMemoryStore, _ stage: String) async throws {
        for query in Self.queries {
            let got = try await lmdb.read { tx in try tx.records(in: "items", matching: query) }
            let want = try await reference.read { tx in try tx.records(in: "items", matching: query) }
            #expect(got == want, "\(stage): \(query)")
            let count = try await lmdb.read { tx in try tx.count(in: "items", matching: query.predicate) }
            let wantCount = try await reference.read { tx in try tx.count(in: "items", matching: query.predicate) }
            #expect(count == wantCount, "\(stage): count \(query.predicate)")
        }
    }

    @Test("random changes, then queries, before and after redefining the indexes and reopening")
    func differential() async throws {
        try await withTemporaryDirectory { directory in
            let reference = InMemoryStore()
            try await withStore(in: directory) { lmdb in
                try await lmdb.defineTable(Self.schema)
                try await reference.defineTable(Self.schema)
                var rng = SplitMix64(seed: 7)
                for round in 0..<6 {
                    var operations: [(Record?, String)] = []
                    for _ in 0..<40 {
                        if rng.below(4) == 0 { operations.append((nil, Self.id(rng.below(60)))) }
                        else { let record = Self.randomRecord(&rng); operations.append((record, record.id)) }
                    }
                    let batch = operations
                    for store in [lmdb as any LocalStore, reference] {
                        try await store.write { tx in
                            for (record, id) in batch {
                                if let record { try tx.upsert(record, in: "items") } else { try tx.delete(id: id, in: "items") }
                            }
                        }
                    }
                    if round == 3 {
                        try await lmdb.defineTable(Self.redefined)
                        try await reference.defineTable(Self.redefined)
                    }
                    try await compare(lmdb, reference, "round \(round)")
                }
            }
            // The indexes are found again after reopening, and still maintained.
            try await withStore(in: directory) { lmdb in
                try await compare(lmdb, reference, "after reopening")
                var rng = SplitMix64(seed: 99)
                let batch = (0..<30).map { _ in Self.randomRecord(&rng) }
                for store in [lmdb as any LocalStore, reference] {
                    try await store.write { tx in for record in batch { try tx.upsert(record, in: "items") } }
                }
                try await compare(lmdb, reference, "after writing to the reopened store")
            }
        }
    }
}
