import COfflineSyncLMDB
import Foundation
import OfflineSync
@testable import OfflineSyncLMDB
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Every record carries the CRC-32C of its encoding and every index entry is checked against
/// the record it points at: a byte changed on disk reads as `corrupted`, never as data, and
/// a format-1 environment (no checksums) is upgraded in one transaction when opened.
@Suite("LMDBStore: record checksums, index entries checked, and the format-1 upgrade")
struct ChecksumTests {
    static let schema = TableSchema("data", fields: [FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string)])

    static func records() -> [Record] {
        (0..<300).map { i in
            Record(id: String(format: "r%03d", i), fields: ["n": .int(Int64(i)), "s": .string(String(format: "MARKER-%03d-", i) + String(repeating: "s", count: 100))])
        }
    }

    static func makeStore(_ directory: URL) async throws {
        try await withStore(in: directory) { store in
            try await store.defineTable(schema)
            try await store.write { txn in for record in records() { try txn.upsert(record, in: "data") } }
        }
    }

    static func readAll(_ directory: URL) async throws -> [Record] {
        try await withStore(in: directory) { store in
            try await store.read { txn in try txn.records(in: "data", matching: .all).sorted { $0.id < $1.id } }
        }
    }

    /// Runs `body` in a raw write transaction on the (closed) store's environment.
    static func rawWrite(_ directory: URL, _ body: (OpaquePointer, (String) throws -> MDB_dbi) throws -> Void) throws {
        var env: OpaquePointer?
        try check(mdb_env_create(&env))
        defer { mdb_env_close(env) }
        try check(mdb_env_set_maxdbs(env, 16))
        try check(mdb_env_open(env, directory.path, 0, 0o644))
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn))
        do {
            try body(txn!) { name in
                var dbi = MDB_dbi()
                try check(mdb_dbi_open(txn, name, name.hasPrefix("i.") ? UInt32(MDB_DUPSORT) : 0, &dbi))
                return dbi
            }
            try check(mdb_txn_commit(txn))
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
    }

    static func check(_ rc: Int32) throws {
        guard rc == MDB_SUCCESS else { throw SyncError(.storageFailure, "raw LMDB: \(String(cString: mdb_strerror(rc)))") }
    }

    static func put(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws {
        var key = key, value = value
        try key.withUnsafeMutableBytes { k in
            try value.withUnsafeMutableBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                try check(mdb_put(txn, dbi, &kv, &vv, 0))
            }
        }
    }

    /// Every key/value pair of a sub-database.
    static func entries(_ txn: OpaquePointer, _ dbi: MDB_dbi) throws -> [(key: [UInt8], value: [UInt8])] {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, dbi, &cursor))
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), data = MDB_val(), result: [(key: [UInt8], value: [UInt8])] = []
        var rc = mdb_cursor_get(cursor, &key, &data, MDB_FIRST)
        while rc == MDB_SUCCESS {
            result.append((key.bytes, data.bytes))
            rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
        }
        return result
    }

    @Test("a record's bytes changed behind the store's back read as corrupted, by id, by scan and by index")
    func changedRecord() async throws {
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("env")
            try await Self.makeStore(directory)
            try Self.rawWrite(directory) { txn, open in
                let dbi = try open("t.1")
                var changed = Self.records()[4]
                changed["s"] = .string("MARKER-004-changed")
                let value = ValueCodec.encode(changed)
                // The old checksum kept: what a damaged value looks like.
                let old = try #require(try Self.entries(txn, dbi).first { $0.key == Array("r004".utf8) })
                try Self.put(txn, dbi, Array("r004".utf8), value + old.value.suffix(4))
            }
            try await withStore(in: directory) { store in
                #expect(await syncError { _ = try await store.read { try $0.record(in: "data", id: "r004") } }?.code == .corrupted)
                #expect(await syncError { _ = try await store.read { try $0.records(in: "data", matching: .all) } }?.code == .corrupted)
                #expect(await syncError {
                    _ = try await store.read { try $0.records(in: "data", matching: Query(Field("n") == .int(4))) }
                }?.code == .corrupted)
                let other = try await store.read { try $0.record(in: "data", id: "r005") }
                #expect(other == Self.records()[5])
            }
        }
    }

    @Test("a bit flipped inside a record in data.mdb is corrupted, and the files are left as they were")
    func flippedBit() async throws {
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("env")
            try await Self.makeStore(directory)
            let file = directory.appendingPathComponent("data.mdb")
            var bytes = [UInt8](try Data(contentsOf: file))
            let marker = Array("MARKER-117-".utf8)
            let offset = try #require((0...(bytes.count - marker.count)).first { bytes[$0..<($0 + marker.count)].elementsEqual(marker) })
            bytes[offset + 9] ^= 0x02
            try Data(bytes).write(to: file)
            let before = digests(directory)
            #expect(await syncError { _ = try await Self.readAll(directory) }?.code == .corrupted)
            #expect(digests(directory)["data.mdb"] == before["data.mdb"])
        }
    }

    @Test("an index entry that points at no record, or moved to another value, is corrupted rather than a wrong answer")
    func damagedIndexEntry() async throws {
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("env")
            try await Self.makeStore(directory)
            try Self.rawWrite(directory) { txn, open in
                let index = try open("i.1.0.0")
                var nowhere: [UInt8] = [], moved: [UInt8] = []
                LMDBIndexKey.append(.int(1000), to: &nowhere)
                LMDBIndexKey.append(.int(2000), to: &moved)
                try Self.put(txn, index, nowhere, Array("r999".utf8))
                try Self.put(txn, index, moved, Array("r010".utf8))
            }
            try await withStore(in: directory) { store in
                for n in [1000, 2000] {
                    let error = await syncError {
                        _ = try await store.read { try $0.records(in: "data", matching: Query(Field("n") == .int(Int64(n)))) }
                    }
                    #expect(error?.code == .corrupted, "n == \(n)")
                }
                // Walking the index in order meets the bad entries too.
                let ordered = await syncError {
                    _ = try await store.read { try $0.records(in: "data", matching: Query(order: [SortKey("n", ascending: false)], limit: 5)) }
                }
                #expect(ordered?.code == .corrupted)
                let ten = try await store.read { try $0.records(in: "data", matching: Query(Field("n") == .int(10))) }
                #expect(ten == [Self.records()[10]])
            }
        }
    }

    /// Turns the store back into format 1: records without their checksum, version 1.
    static func downgrade(_ directory: URL) throws {
        try rawWrite(directory) { txn, open in
            let records = try open("t.1")
            for entry in try entries(txn, records) { try put(txn, records, entry.key, Array(entry.value.dropLast(4))) }
            try put(txn, try open(LMDBLayout.metaDatabase), LMDBLayout.versionKey, BigEndian.bytes(1))
        }
    }

    static func version(_ directory: URL) throws -> UInt64? {
        var version: UInt64?
        try rawWrite(directory) { txn, open in
            let meta = try open(LMDBLayout.metaDatabase)
            version = try entries(txn, meta).first { $0.key == LMDBLayout.versionKey }.flatMap { BigEndian.uint64($0.value) }
        }
        return version
    }

    @Test("a format-1 environment is upgraded when opened: every record gains its checksum and reads as before")
    func upgrade() async throws {
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("env")
            try await Self.makeStore(directory)
            try Self.downgrade(directory)
            #expect(try Self.version(directory) == 1)
            #expect(try await Self.readAll(directory) == Self.records())
            #expect(try Self.version(directory) == 2)
            try await withStore(in: directory) { store in
                let seven = try await store.read { try $0.records(in: "data", matching: Query(Field("n") == .int(7))) }
                #expect(seven == [Self.records()[7]])
            }
        }
    }

    @Test("a format-1 environment with a record that does not decode is refused, not sealed: it stays format 1")
    func damagedUpgrade() async throws {
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("env")
            try await Self.makeStore(directory)
            try Self.downgrade(directory)
            try Self.rawWrite(directory) { txn, open in try Self.put(txn, try open("t.1"), Array("r200".utf8), [0xFF, 0x00, 0x13]) }
            #expect(await syncError { _ = try await LMDBStore(directory: directory) }?.code == .corrupted)
            #expect(try Self.version(directory) == 1)
            try Self.rawWrite(directory) { txn, open in
                let stored = try Self.entries(txn, try open("t.1"))
                #expect(stored.first { $0.key == Array("r000".utf8) }?.value == ValueCodec.encode(Self.records()[0]))
            }
        }
    }
}
