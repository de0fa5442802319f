import Foundation
import OfflineSync
@testable import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// Every row carries the CRC-32C of its columns: a byte changed on disk (or by another
/// program) reads as `corrupted`, never as data, and a format-1 file (no checksums) is
/// upgraded in one transaction when opened.
@Suite("SQLiteStore: row checksums and the format-1 upgrade")
struct ChecksumTests {
    static let schema = TableSchema("data", fields: [FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string),
                                                     FieldDefinition("doc", .object)])

    static func records() -> [Record] {
        (0..<50).map { i in
            let n = Int64(i)
            let document: Value = .object(["k": .int(n), "d": .double(i == 3 ? -0.0 : Double(i) / 3)])
            let fields: [String: Value] = [
                "n": .int(n), "s": .string(String(format: "MARKER-%03d-", i) + String(repeating: "s", count: 40)), "doc": document,
                "free": .string("undeclared \(i)"), "empty": .bytes([]), "text": .string(""),
            ]
            let version: String? = i % 2 == 0 ? "v\(i)" : nil
            return Record(id: String(format: "r%03d", i), fields: fields, version: version,
                          updatedAt: Timestamp(millisecondsSince1970: 1_700_000_000_000 + n), deleted: i % 7 == 0)
        }
    }

    /// A store at `path` holding ``records()``, closed.
    static func makeStore(_ path: String) async throws {
        try await withStore(at: path) { store in
            try await store.defineTable(schema)
            try await store.write { txn in for record in records() { try txn.upsert(record, in: "data") } }
        }
    }

    static func readAll(_ path: String) async throws -> [Record] {
        try await withStore(at: path) { store in
            try await store.read { txn in try txn.records(in: "data", matching: .all).sorted { $0.id < $1.id } }
        }
    }

    @Test("every kind of column round-trips with its checksum: doubles, -0.0, empty text and bytes, undeclared fields")
    func roundTrip() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("app.sqlite").path
            try await Self.makeStore(path)
            #expect(try await Self.readAll(path) == Self.records())
            let raw = try RawDatabase(path: path)
            defer { raw.close() }
            #expect(try raw.strings("SELECT count(*) FROM \"data\" WHERE \"sum\" IS NULL") == ["0"])
        }
    }

    @Test("a column changed behind the store's back reads as corrupted, by id, by query and by index")
    func changedColumn() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("app.sqlite").path
            try await Self.makeStore(path)
            let raw = try RawDatabase(path: path)
            try raw.exec("UPDATE \"data\" SET \"f_s\" = 'MARKER-004-changed' WHERE \"id\" = 'r004'")
            raw.close()
            try await withStore(at: path) { store in
                let byID = await syncErrorCode { _ = try await store.read { try $0.record(in: "data", id: "r004") } }
                #expect(byID == .corrupted)
                let all = await syncErrorCode { _ = try await store.read { try $0.records(in: "data", matching: .all) } }
                #expect(all == .corrupted)
                let indexed = await syncErrorCode {
                    _ = try await store.read { try $0.records(in: "data", matching: Query(Field("n") == .int(4))) }
                }
                #expect(indexed == .corrupted)
                // The other rows still read.
                let other = try await store.read { try $0.record(in: "data", id: "r005") }
                #expect(other == Self.records()[5])
            }
        }
    }

    @Test("a bit flipped inside a row in the file is corrupted, and opening and reading leave the file as it was")
    func flippedBit() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("app.sqlite").path
            try await Self.makeStore(path)
            var bytes = [UInt8](try #require(fileBytes(path)))
            let marker = Array("MARKER-017-".utf8)
            let offset = try #require((0...(bytes.count - marker.count)).first { bytes[$0..<($0 + marker.count)].elementsEqual(marker) })
            bytes[offset + 9] ^= 0x02 // "7" → "5": still UTF-8, still a plausible value
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let code = await syncErrorCode { _ = try await Self.readAll(path) }
            #expect(code == .corrupted)
            #expect([UInt8](try #require(fileBytes(path))) == bytes)
        }
    }

    /// Turns the store at `path` back into format 1: no `sum` columns, `user_version` 1.
    static func downgrade(_ path: String) throws {
        let raw = try RawDatabase(path: path)
        defer { raw.close() }
        try raw.exec("ALTER TABLE \"data\" DROP COLUMN \"sum\"; PRAGMA user_version = 1")
    }

    @Test("a format-1 file is upgraded when opened: every row gains its checksum and reads as before")
    func upgrade() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("app.sqlite").path
            try await Self.makeStore(path)
            try Self.downgrade(path)
            #expect(try await Self.readAll(path) == Self.records())
            let raw = try RawDatabase(path: path)
            defer { raw.close() }
            #expect(try raw.strings("PRAGMA user_version") == ["2"])
            #expect(try raw.strings("SELECT count(*) FROM \"data\" WHERE \"sum\" IS NULL") == ["0"])
            try raw.exec("UPDATE \"data\" SET \"f_n\" = 99 WHERE \"id\" = 'r001'")
            raw.close()
            #expect(await syncErrorCode { _ = try await Self.readAll(path) } == .corrupted)
        }
    }

    @Test("a format-1 file with a damaged row is refused, not sealed: it stays format 1, unchanged")
    func damagedUpgrade() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("app.sqlite").path
            try await Self.makeStore(path)
            try Self.downgrade(path)
            let raw = try RawDatabase(path: path)
            try raw.exec("UPDATE \"data\" SET \"deleted\" = 7 WHERE \"id\" = 'r030'; PRAGMA wal_checkpoint(TRUNCATE)")
            raw.close()
            let before = try #require(fileBytes(path))
            #expect(await syncErrorCode { _ = try await SQLiteStore(path: path) } == .corrupted)
            let after = try RawDatabase(path: path)
            defer { after.close() }
            #expect(try after.strings("PRAGMA user_version") == ["1"])
            #expect(try after.strings("SELECT count(*) FROM pragma_table_info('data') WHERE name = 'sum'") == ["0"])
            #expect(fileBytes(path) == before)
        }
    }
}
