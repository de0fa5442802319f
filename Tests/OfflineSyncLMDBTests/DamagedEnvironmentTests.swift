import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncTestSupport
import Testing

/// Directories that are not OfflineSync LMDB stores open with a typed error and are left
/// byte for byte as they were (no `data.mdb` or `lock.mdb` created either).
@Suite("LMDBStore refuses damaged and foreign environments without changing them")
struct DamagedEnvironmentTests {
    /// Opens `directory`, expects `code`, and checks that no file changed, appeared or vanished.
    func expectRefused(_ directory: URL, _ codes: [SyncError.Code], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let before = digests(directory)
        let error = await syncError { _ = try await LMDBStore(directory: directory) }
        #expect(error.map { codes.contains($0.code) } == true, "got \(String(describing: error))", sourceLocation: sourceLocation)
        #expect(digests(directory) == before, "files changed", sourceLocation: sourceLocation)
    }

    /// A store with a few hundred records, closed; returns its directory.
    func makeStore(in root: URL) async throws -> URL {
        let directory = root.appendingPathComponent("env")
        try await withStore(in: directory) { store in
            try await store.defineTable(TableSchema("data", fields: [FieldDefinition("n", .int, indexed: true)]))
            try await store.write { tx in
                for i in 0..<300 {
                    try tx.upsert(Record(id: "r\(i)", fields: ["n": .int(Int64(i)), "s": .string(String(repeating: "x", count: 300))]), in: "data")
                }
            }
        }
        return directory
    }

    @Test("a directory of other files without data.mdb is notADatabase")
    func notAnEnvironment() async throws {
        try await withTemporaryDirectory { root in
            try Data("my notes".utf8).write(to: root.appendingPathComponent("notes.txt"))
            try await expectRefused(root, [.notADatabase])
            #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("data.mdb").path))
            #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("lock.mdb").path))
        }
    }

    @Test("a regular file in place of the directory is notADatabase")
    func fileInsteadOfDirectory() async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent("env")
            try Data("not a directory".utf8).write(to: file)
            try await expectRefused(root, [.notADatabase])
            let error = await syncError { _ = try await LMDBStore(directory: file) }
            #expect(error?.code == .notADatabase)
            #expect(FileManager.default.contents(atPath: file.path) == Data("not a directory".utf8))
        }
    }

    @Test("a data.mdb of garbage bytes is notADatabase and is never opened")
    func garbageDataFile() async throws {
        try await withTemporaryDirectory { root in
            var rng = SystemRandomNumberGenerator()
            let garbage = Data((0..<16_384).map { _ in UInt8.random(in: 1...255, using: &rng) })
            try garbage.write(to: root.appendingPathComponent("data.mdb"))
            try await expectRefused(root, [.notADatabase])
            #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("lock.mdb").path))
            try Data("hello, not a database\n".utf8).write(to: root.appendingPathComponent("data.mdb"))
            try await expectRefused(root, [.notADatabase])
        }
    }

    @Test("a truncated data.mdb is corrupted", arguments: [0.5, 0.25, 0.0])
    func truncated(fraction: Double) async throws {
        try await withTemporaryDirectory { root in
            let directory = try await makeStore(in: root)
            let file = directory.appendingPathComponent("data.mdb")
            let bytes = try Data(contentsOf: file)
            let kept = fraction == 0 ? 5000 : Int(Double(bytes.count) * fraction)
            try bytes.prefix(kept).write(to: file)
            try await expectRefused(directory, [.corrupted])
        }
    }

    @Test("damaged meta pages are corrupted")
    func damagedMetaPages() async throws {
        try await withTemporaryDirectory { root in
            let directory = try await makeStore(in: root)
            let file = directory.appendingPathComponent("data.mdb")
            let original = try Data(contentsOf: file)
            // The second meta page's magic (page size 4096 on this platform).
            var second = original
            second[4096 + 16] ^= 0xFF
            try second.write(to: file)
            try await expectRefused(directory, [.corrupted])
            // The first page's number.
            var first = original
            first[0] ^= 0xFF
            try first.write(to: file)
            try await expectRefused(directory, [.corrupted])
            // The first 64 bytes overwritten: the second meta page still identifies LMDB.
            var garbage = original
            for i in 0..<64 { garbage[i] = UInt8(truncatingIfNeeded: i * 37 + 11) }
            try garbage.write(to: file)
            try await expectRefused(directory, [.corrupted])
            // A meta page's transaction id (`mm_txnid`, the 8 bytes at offset 144): the older
            // slot made to look newest (a high bit, the soak's seed 1795738849), an id of the
            // wrong parity, and one two commits away. Every tree stays intact, so only the pair
            // of ids shows the damage; the first would have LMDB read the previous commit.
            for (byte, bit) in [(4096 + 151, 3), (4096 + 144, 0), (144, 2)] {
                var damaged = original
                damaged[byte] ^= 1 << bit
                try damaged.write(to: file)
                try await expectRefused(directory, [.corrupted])
            }
            // Restored, it opens with its data.
            try original.write(to: file)
            let count = try await withStore(in: directory) { store in
                try await store.read { tx in try tx.count(in: "data", matching: .all) }
            }
            #expect(count == 300)
        }
    }

    @Test("an index key damaged out of order is corrupted at open; every copy of a value, damaged, is refused, detected or unused")
    func damagedIndexKey() async throws {
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("env")
            try await withStore(in: directory) { store in
                try await store.defineTable(TableSchema("data", fields: [FieldDefinition("s", .string, indexed: true)]))
                try await store.write { tx in
                    for i in 0..<300 { try tx.upsert(Record(id: "r\(i)", fields: ["s": .string(String(format: "key-%03d", i))]), in: "data") }
                }
            }
            let file = directory.appendingPathComponent("data.mdb")
            let original = [UInt8](try Data(contentsOf: file))
            let target = Array("key-150".utf8)
            let offsets = (0...(original.count - target.count)).filter { original[$0..<($0 + target.count)].elementsEqual(target) }
            #expect(offsets.count >= 2, "the record and its index entry")
            var refusedAtOpen = 0
            for offset in offsets {
                var bytes = original
                bytes[offset + 4] ^= 0x08 // "1" → "9": a key past every other key of its page
                try Data(bytes).write(to: file)
                // Corrupted, or — when the copy lies in a page's unused space — intact.
                var error: SyncError?
                do {
                    let (all, matched) = try await withStore(in: directory) { store in
                        try await store.read { tx in
                            (try tx.records(in: "data", matching: .all), try tx.records(in: "data", matching: Query(Field("s") == "key-150")))
                        }
                    }
                    #expect(all.count == 300 && all.allSatisfy { $0["s"] == .string(String(format: "key-%03d", Int($0.id.dropFirst()) ?? -1)) },
                            "copy at byte \(offset): a record differs")
                    #expect(matched.map(\.id) == ["r150"], "copy at byte \(offset): the index misses the record")
                } catch let thrown as SyncError {
                    error = thrown
                    #expect(thrown.code == .corrupted, "copy at byte \(offset): \(thrown)")
                }
                if error?.message.contains("out of order") == true { refusedAtOpen += 1 }
                #expect([UInt8](try Data(contentsOf: file)) == bytes, "copy at byte \(offset): data.mdb changed")
            }
            // The index entry's copy: before keys were checked for order, the store opened,
            // read every record intact, and a query for "key-150" silently missed it.
            #expect(refusedAtOpen >= 1)
        }
    }

    @Test("a meta page recording an impossible map size is corrupted; a merely larger one opens with the store's own size",
          arguments: [0, 4096])
    func damagedMapSize(metaPage: Int) async throws {
        try await withTemporaryDirectory { root in
            let directory = try await makeStore(in: root)
            let file = directory.appendingPathComponent("data.mdb")
            let original = try Data(contentsOf: file)
            // `mm_mapsize` is the 8 bytes at offset 32 of a meta page, little-endian: its top
            // bit makes a map no address space can hold (LMDB itself fails with ENOMEM).
            var huge = original
            huge[metaPage + 39] ^= 0x80
            try huge.write(to: file)
            try await expectRefused(directory, [.corrupted])
            // 2^45 bytes (32 TiB) is possible on 64-bit Linux: the store opens with its data.
            var large = original
            large[metaPage + 37] ^= 0x20
            try large.write(to: file)
            let count = try await withStore(in: directory) { store in
                try await store.read { tx in try tx.count(in: "data", matching: .all) }
            }
            #expect(count == 300)
        }
    }

    @Test("an LMDB environment of another application is foreignDatabase, lock file included unchanged")
    func foreignEnvironment() async throws {
        try await withTemporaryDirectory { root in
            let raw = try RawEnvironment(directory: root.path)
            try raw.put([("user:1", Array("alice".utf8)), ("user:2", Array("bob".utf8))])
            try raw.put([("k", [1, 2, 3])], database: "settings")
            raw.close()
            try await expectRefused(root, [.foreignDatabase])
        }
    }

    @Test("a foreign environment whose data sits under our meta database's name is foreignDatabase")
    func foreignEnvironmentWithOurName() async throws {
        try await withTemporaryDirectory { root in
            let raw = try RawEnvironment(directory: root.path)
            try raw.put([("format", Array("something else".utf8))], database: "offlinesync.meta")
            raw.close()
            try await expectRefused(root, [.foreignDatabase])
            let plain = root.appendingPathComponent("plain")
            try FileManager.default.createDirectory(at: plain, withIntermediateDirectories: true)
            let other = try RawEnvironment(directory: plain.path)
            try other.put([("offlinesync.meta", Array("a plain key".utf8))])
            other.close()
            try await expectRefused(plain, [.foreignDatabase])
        }
    }

    @Test("an empty LMDB environment is adopted as a new store")
    func emptyEnvironmentIsAdopted() async throws {
        try await withTemporaryDirectory { root in
            let raw = try RawEnvironment(directory: root.path)
            raw.close()
            try await withStore(in: root) { store in
                try await store.defineTable(TableSchema("t"))
                try await store.write { tx in try tx.upsert(Record(id: "a"), in: "t") }
            }
            let found = try await withStore(in: root) { store in
                try await store.read { tx in try tx.record(in: "t", id: "a") }
            }
            #expect(found?.id == "a")
        }
    }

    @Test("a store of a newer format is unsupported and unchanged")
    func newerFormat() async throws {
        try await withTemporaryDirectory { root in
            let raw = try RawEnvironment(directory: root.path)
            try raw.put([("format", Array("OfflineSync LMDB store".utf8)), ("version", [0, 0, 0, 0, 0, 0, 0, 9])],
                        database: "offlinesync.meta")
            raw.close()
            try await expectRefused(root, [.unsupported])
        }
    }
}
