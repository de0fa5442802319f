import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncStoreKit
import Testing

/// Runs the shared LocalStore conformance suite against the in-memory reference store,
/// one test per group so a failure names the group.
@Suite struct InMemoryConformanceTests {
    let suite = LocalStoreConformance(capabilities: .init(persistent: false)) { _ in InMemoryStore() }

    @Test(arguments: LocalStoreConformance.Group.allCases)
    func group(_ group: LocalStoreConformance.Group) async throws { try await suite.check(group) }

    /// Every group has cases, and the in-memory store skips exactly the ones needing persistence or a file.
    @Test func skipsOnlyWhatNeedsCapabilities() async throws {
        for group in LocalStoreConformance.Group.allCases {
            #expect(!suite.caseNames(in: group).isEmpty, "group \(group) has no cases")
        }
        let skipped = await suite.run(.corruptFiles).filter(\.skipped).count
        #expect(skipped == suite.caseNames(in: .corruptFiles).count)
    }
}

/// The suite must be able to fail: each deliberately broken store below must fail the group
/// that checks the broken property (and the correct store above passes it).
@Suite struct ConformanceSuiteCatchesFaults {
    @Test(arguments: [
        (FaultyStore.Fault.negativeZeroBecomesZero, LocalStoreConformance.Group.valueRoundTrip),
        (.stringsNormalised, .valueRoundTrip),
        (.undeclaredFieldsDropped, .crud),
        (.writesNotRolledBack, .transactions),
        (.offsetIgnored, .queries),
        (.nullsSortLast, .queries),
        (.tableNamesFoldCase, .names),
        (.schemaNotMigrated, .schemaEvolution),
        (.insertReplaces, .crud),
    ])
    func brokenStoreFails(fault: FaultyStore.Fault, group: LocalStoreConformance.Group) async throws {
        let suite = LocalStoreConformance(capabilities: .init(persistent: false)) { _ in FaultyStore(fault) }
        let failures = await suite.run(group).compactMap(\.failure)
        #expect(!failures.isEmpty, "a store with fault \(fault) passed group \(group)")
    }
}

/// An in-memory store with one deliberate defect.
final class FaultyStore: LocalStore, @unchecked Sendable {
    // @unchecked Sendable: `inner` is Sendable and `fault` immutable.
    enum Fault: Sendable {
        case negativeZeroBecomesZero, stringsNormalised, undeclaredFieldsDropped, writesNotRolledBack
        case offsetIgnored, nullsSortLast, tableNamesFoldCase, schemaNotMigrated
        /// `insert(_:in:)` writes over a taken id and says it inserted.
        case insertReplaces
    }

    let inner = InMemoryStore()
    let fault: Fault
    init(_ fault: Fault) { self.fault = fault }

    func table(_ name: String) -> String { fault == .tableNamesFoldCase ? name.lowercased() : name }

    func defineTable(_ schema: TableSchema) async throws {
        var schema = schema
        if fault == .tableNamesFoldCase { try schema.validate(); schema.name = schema.name.lowercased() }
        if fault == .schemaNotMigrated, (try? await inner.read({ [name = schema.name] tx in try tx.schema(of: name) })) != nil { return }
        try await inner.defineTable(schema)
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try await inner.read { tx in try body(Transaction(tx as! any LocalWriteTransaction, self)) }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        guard fault == .writesNotRolledBack else {
            return try await inner.write { tx in try body(Transaction(tx, self)) }
        }
        let result: Result<T, any Error> = try await inner.write { tx in Result { try body(Transaction(tx, self)) } }
        return try result.get()
    }

    func close() async throws { try await inner.close() }

    func mangle(_ value: Value) -> Value {
        switch (fault, value) {
        case (.negativeZeroBecomesZero, .double(let d)) where d == 0: return .double(0)
        case (.stringsNormalised, .string(let s)): return .string(s.precomposedStringWithCanonicalMapping)
        case (_, .array(let items)): return .array(items.map(mangle))
        case (_, .object(let object)): return .object(object.mapValues(mangle))
        default: return value
        }
    }

    final class Transaction: LocalWriteTransaction {
        let inner: any LocalWriteTransaction
        let store: FaultyStore
        init(_ inner: any LocalWriteTransaction, _ store: FaultyStore) { self.inner = inner; self.store = store }

        func schema(of table: String) throws -> TableSchema { try inner.schema(of: store.table(table)) }
        func tables() throws -> [TableSchema] { try inner.tables() }
        func record(in table: String, id: String) throws -> Record? { try inner.record(in: store.table(table), id: id) }
        func count(in table: String, matching predicate: QueryPredicate) throws -> Int { try inner.count(in: store.table(table), matching: predicate) }
        func delete(id: String, in table: String) throws -> Bool { try inner.delete(id: id, in: store.table(table)) }

        func insert(_ record: Record, in table: String) throws -> LocalInsertOutcome {
            // Other faults keep the default, so `upsert` (which applies them) does every write.
            guard store.fault == .insertReplaces else { return .notChecked }
            try upsert(record, in: table)
            return .inserted
        }

        func records(in table: String, matching query: Query) throws -> [Record] {
            switch store.fault {
            case .offsetIgnored:
                return try inner.records(in: store.table(table), matching: query.offset(0))
            case .nullsSortLast:
                _ = try inner.records(in: store.table(table), matching: query) // validates the query
                let all = try inner.records(in: store.table(table), matching: Query(query.predicate, order: query.order))
                let keys = query.order
                let sorted = all.sorted { a, b in
                    for key in keys {
                        let (x, y) = (a[key.field], b[key.field])
                        if x.isNull != y.isNull { return y.isNull }
                        let c = QueryEvaluator.orderCompare(x, y)
                        if c != 0 { return key.ascending ? c < 0 : c > 0 }
                    }
                    return Value.utf8Less(a.id, b.id)
                }
                let start = min(query.offset, sorted.count)
                return Array(sorted[start...].prefix(query.limit ?? .max))
            default:
                return try inner.records(in: store.table(table), matching: query)
            }
        }

        func upsert(_ record: Record, in table: String) throws {
            var record = record
            if store.fault == .undeclaredFieldsDropped {
                let schema = try inner.schema(of: store.table(table))
                record.fields = record.fields.filter { schema.field(named: $0.key) != nil }
            }
            record.fields = record.fields.mapValues(store.mangle)
            try inner.upsert(record, in: store.table(table))
        }
    }
}
