import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Record ids that differ only in Unicode normalisation are two records to every store, and
/// so to every observation: a write to one never answers an observation of the other.
@Suite("Observations tell ids apart by their bytes", .timeLimit(.minutes(sanitizerSlowdown)))
struct ExactIdObservationTests {
    /// "café" with é precomposed, and with e + U+0301: one Swift string, two ids.
    static let composed = "caf\u{E9}", decomposed = "cafe\u{301}"

    static func context() async throws -> SyncContext {
        let context = try await SyncContext(store: InMemoryStore(), remote: OfflineSyncService(store: InMemoryStore()).remote(for: "u"))
        try await context.defineTable(TableSchema("items", fields: [FieldDefinition("n", .int)]))
        return context
    }

    static func table() async throws -> SyncTable { try await context().table("items") }

    @Test("one transaction that writes both spellings patches a query observation with both rows")
    func bothInOneTransaction() async throws {
        let context = try await Self.context()
        var observed = context.table("items").observe(Query(order: [SortKey("n")])).makeAsyncIterator()
        #expect(try await observed.next()?.isEmpty == true)
        try await context.transaction { txn in
            _ = try txn.insert(Record(id: Self.composed, fields: ["n": 1]), into: "items")
            _ = try txn.insert(Record(id: Self.decomposed, fields: ["n": 2]), into: "items")
        }
        #expect(try await observed.next()?.map { $0["n"] } == [1, 2])
        #expect(try await context.table("items").query().count == 2)
    }

    @Test("an observation of one id yields its own record, never the other spelling's")
    func observeOneId() async throws {
        #expect(Self.composed == Self.decomposed, "the fixtures must be canonically equivalent")
        let items = try await Self.table()
        _ = try await items.insert(Record(id: Self.composed, fields: ["n": 1]))
        var observed = items.observe(id: Self.composed).makeAsyncIterator()
        #expect(try await observed.next()??["n"] == 1)
        _ = try await items.insert(Record(id: Self.decomposed, fields: ["n": 2]))
        // The next value must come from a change to the observed record itself.
        _ = try await items.update(Record(id: Self.composed, fields: ["n": 3]))
        let next = try await observed.next()
        #expect(next??.id.utf8.elementsEqual(Self.composed.utf8) == true, "the observation yielded another record's id")
        #expect(next??["n"] == 3)
    }

    @Test("a query observation keeps both spellings as two rows, and a delete of one leaves the other")
    func observeQuery() async throws {
        let items = try await Self.table()
        var observed = items.observe(Query(order: [SortKey("n")])).makeAsyncIterator()
        #expect(try await observed.next()?.isEmpty == true)
        _ = try await items.insert(Record(id: Self.composed, fields: ["n": 1]))
        #expect(try await observed.next()?.count == 1)
        _ = try await items.insert(Record(id: Self.decomposed, fields: ["n": 2]))
        #expect(try await observed.next()?.map { $0["n"] } == [1, 2])
        try await items.delete(id: Self.decomposed)
        let afterDelete = try await observed.next()
        #expect(afterDelete?.map { $0["n"] } == [1])
        #expect(afterDelete?.first.map { Array($0.id.utf8) } == Array(Self.composed.utf8))
        // The remaining row is still watched: a change to it arrives.
        _ = try await items.update(Record(id: Self.composed, fields: ["n": 5]))
        #expect(try await observed.next()?.map { $0["n"] } == [5])
    }
}
