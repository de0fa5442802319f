import Foundation
import OfflineSync
import OfflineSyncStoreKit
import Testing

/// The shared in-memory engine: commit hooks see every change first, a failed hook changes
/// nothing, change sets round-trip through their encoding and replay to the same state.
@Suite("MemoryTables")
struct MemoryTablesTests {
    static let schema = TableSchema("items", fields: [FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string)],
                                    indexes: [IndexDefinition(["n", "s"])], undeclaredFields: .reject)

    struct HookFailed: Error {}

    @Test func failedCommitLeavesMemoryUnchanged() throws {
        let tables = MemoryTables()
        try tables.define(Self.schema) { _ in }
        _ = try tables.write({ tx in try tx.upsert(Record(id: "a", fields: ["n": 1]), in: "items") }, commit: { _ in })
        #expect(throws: HookFailed.self) {
            try tables.write({ tx in
                try tx.upsert(Record(id: "b", fields: ["n": 2]), in: "items")
                _ = try tx.delete(id: "a", in: "items")
                // The transaction reads its own writes.
                #expect(try tx.record(in: "items", id: "b") != nil)
                #expect(try tx.record(in: "items", id: "a") == nil)
                #expect(try tx.count(in: "items", matching: .all) == 1)
            }, commit: { _ in throw HookFailed() })
        }
        let ids = tables.read { tx in (try? tx.records(in: "items", matching: .all).map(\.id)) ?? [] }
        #expect(ids == ["a"])
        #expect(throws: HookFailed.self) {
            try tables.define(TableSchema("other")) { _ in throw HookFailed() }
        }
        #expect(tables.schemas.map(\.name) == ["items"])
    }

    @Test func commitSeesNetChangesAndNothingForNoChange() throws {
        let tables = MemoryTables()
        var seen: [ChangeSet] = []
        try tables.define(Self.schema) { seen.append($0) }
        try tables.define(Self.schema) { seen.append($0) }  // unchanged: no commit
        #expect(seen.count == 1 && seen[0].definitions == [Self.schema])
        _ = try tables.write({ tx in
            try tx.upsert(Record(id: "a", fields: ["n": 1]), in: "items")
            try tx.upsert(Record(id: "tmp", fields: ["n": 9]), in: "items")
            _ = try tx.delete(id: "tmp", in: "items")  // inserted and deleted: nothing to persist
        }, commit: { seen.append($0) })
        #expect(seen.count == 2)
        #expect(seen[1].tables == [ChangeSet.TableChanges(table: "items", upserts: [Record(id: "a", fields: ["n": 1])])])
        _ = try tables.write({ tx in _ = try tx.delete(id: "missing", in: "items") }, commit: { seen.append($0) })
        #expect(seen.count == 2, "a transaction that changed nothing is not committed")
    }

    @Test func changeSetsRoundTripAndReplay() throws {
        let tables = MemoryTables()
        var log: [[UInt8]] = []
        try tables.define(Self.schema) { log.append($0.encode()) }
        try tables.define(TableSchema("é and e\u{301}")) { log.append($0.encode()) }
        _ = try tables.write({ tx in
            for i in 0..<20 { try tx.upsert(Record(id: "r\(i)", fields: ["n": .int(Int64(i)), "s": .string("x\(i)")], version: "v1"), in: "items") }
            // Records whose lengths take one, two and three bytes in the change set.
            for (index, size) in [100, 300, 20_000, 70_000].enumerated() {
                try tx.upsert(Record(id: "sized-\(index)", fields: ["s": .string(String(repeating: "é", count: size / 2))]), in: "items")
            }
            try tx.upsert(Record(id: "e\u{301}", fields: ["any": ["nested": [1, 2.5, "three", .bytes([0, 255])]]]), in: "é and e\u{301}")
        }, commit: { log.append($0.encode()) })
        _ = try tables.write({ tx in
            _ = try tx.delete(id: "r3", in: "items")
            try tx.upsert(Record(id: "r4", fields: ["n": 40], deleted: true), in: "items")
        }, commit: { log.append($0.encode()) })

        let replayed = MemoryTables()
        for bytes in log {
            let changes = try ChangeSet(decoding: bytes)
            #expect(changes.encode() == bytes, "re-encoding is stable")
            try replayed.apply(changes)
        }
        #expect(replayed.schemas == tables.schemas)
        for name in ["items", "é and e\u{301}"] {
            let a = tables.read { tx in try? tx.records(in: name, matching: .all) }
            let b = replayed.read { tx in try? tx.records(in: name, matching: .all) }
            #expect(a == b && a != nil)
        }
        // A snapshot rebuilds the same state, in chunks.
        let rebuilt = MemoryTables()
        var chunks = 0
        try tables.snapshot(maxChunkBytes: 64) { changes in chunks += 1; try rebuilt.apply(ChangeSet(decoding: changes.encode())) }
        #expect(chunks > 3)
        #expect(rebuilt.read { tx in try? tx.records(in: "items", matching: .all) } == tables.read { tx in try? tx.records(in: "items", matching: .all) })
    }

    @Test func damagedChangeSetsAreCorrupted() throws {
        let tables = MemoryTables()
        var bytes: [UInt8] = []
        try tables.define(Self.schema) { _ in }
        _ = try tables.write({ tx in try tx.upsert(Record(id: "a", fields: ["n": 1, "s": "text"]), in: "items") }, commit: { bytes = $0.encode() })
        for cut in 0..<bytes.count {
            #expect(throws: SyncError.self) { try ChangeSet(decoding: Array(bytes.prefix(cut))) }
        }
        #expect(throws: SyncError.self) { try ChangeSet(decoding: bytes + [0]) }
        #expect(throws: SyncError.self) { try ChangeSet(decoding: [2] + bytes.dropFirst()) }
        // Replaying into an engine without the table changes nothing.
        let other = MemoryTables()
        #expect(throws: SyncError.self) { try other.apply(ChangeSet(decoding: bytes)) }
        #expect(other.schemas.isEmpty)
    }
}
