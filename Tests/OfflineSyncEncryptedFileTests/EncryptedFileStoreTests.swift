import Crypto
import Foundation
import OfflineSync
import OfflineSyncEncryptedFile
import Testing

/// What the encrypted file promises beyond the conformance suite: wrong keys, damage, torn
/// appends, no plaintext on disk, foreign files, compaction, and secrets kept out of text.
@Suite("EncryptedFileStore")
struct EncryptedFileStoreTests {
    static let notes = TableSchema("notes", fields: [FieldDefinition("text", .string), FieldDefinition("n", .int)])

    static func note(_ i: Int, _ text: String = "note") -> Record {
        Record(id: "n\(i)", fields: ["text": .string("\(text) \(i)"), "n": .int(Int64(i))])
    }

    /// Creates a store with `count` notes, one transaction each, and closes it.
    static func makeStore(at path: String, key: EncryptedFileStore.Key, count: Int = 3,
                          options: EncryptedFileStore.Options = .init()) async throws {
        let store = try await EncryptedFileStore(path: path, key: key, options: options)
        try await store.defineTable(notes)
        for i in 0..<count {
            try await store.write { tx in try tx.upsert(note(i), in: "notes") }
        }
        try await store.close()
    }

    static func ids(_ store: EncryptedFileStore) async throws -> [String] {
        try await store.read { tx in try tx.records(in: "notes", matching: .all).map(\.id) }.sorted()
    }

    /// Expects opening to fail with `code`, and the file to be byte for byte unchanged.
    static func expectOpenFails(_ path: String, key: EncryptedFileStore.Key, _ codes: Set<String>,
                                _ what: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let before = try fileHash(path)
        do {
            let store = try await EncryptedFileStore(path: path, key: key)
            try await store.close()
            Issue.record("\(what): opening succeeded; expected \(codes.sorted())", sourceLocation: sourceLocation)
        } catch let error as SyncError {
            #expect(codes.contains(error.code.description), "\(what): got \(error)", sourceLocation: sourceLocation)
        }
        #expect(try fileHash(path) == before, "\(what): the file changed", sourceLocation: sourceLocation)
    }

    // MARK: Keys

    @Test func wrongPassphraseIsWrongKeyAndLeavesFileUnchanged() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            try await Self.makeStore(at: path, key: .passphrase("right passphrase", derivation: TestKeys.cheapScrypt))
            let before = try fileHash(path)
            do {
                _ = try await EncryptedFileStore(path: path, key: .passphrase("wrong passphrase", derivation: TestKeys.cheapScrypt))
                Issue.record("a wrong passphrase opened the store")
            } catch let error as SyncError {
                #expect(error.code == .wrongKey)
                #expect(!error.description.contains("wrong passphrase"))
                #expect(!error.description.contains("right passphrase"))
            }
            #expect(try fileHash(path) == before)
            // A raw key on a passphrase file is a wrong key too.
            try await Self.expectOpenFails(path, key: try .raw(TestKeys.raw), ["wrongKey"], "raw key on a passphrase file")
            // The right passphrase still opens it, whatever derivation the caller names now:
            // the header's parameters are used.
            let store = try await EncryptedFileStore(path: path, key: .passphrase("right passphrase", derivation: .pbkdf2SHA256(iterations: 1)))
            #expect(try await Self.ids(store) == ["n0", "n1", "n2"])
            try await store.close()
        }
    }

    @Test func wrongRawKeyIsWrongKeyAndLeavesFileUnchanged() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            try await Self.makeStore(at: path, key: try .raw(TestKeys.raw))
            try await Self.expectOpenFails(path, key: try .raw(TestKeys.otherRaw), ["wrongKey"], "another raw key")
            try await Self.expectOpenFails(path, key: .passphrase("anything", derivation: TestKeys.cheapScrypt), ["wrongKey"],
                                           "a passphrase on a raw-key file")
            let store = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw))
            #expect(try await Self.ids(store) == ["n0", "n1", "n2"])
            try await store.close()
        }
    }

    @Test func pbkdf2ParametersAreReadFromTheHeader() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            try await Self.makeStore(at: path, key: .passphrase("pass", derivation: TestKeys.cheapPBKDF2))
            let store = try await EncryptedFileStore(path: path, key: .passphrase("pass"))  // default scrypt named, PBKDF2 used
            #expect(try await Self.ids(store) == ["n0", "n1", "n2"])
            try await store.close()
            try await Self.expectOpenFails(path, key: .passphrase("Pass", derivation: TestKeys.cheapPBKDF2), ["wrongKey"], "PBKDF2, wrong passphrase")
        }
    }

    /// The default derivation is scrypt N = 2^17, r = 8, p = 1, recorded in the header.
    @Test func defaultDerivationIsScryptRecordedInTheHeader() async throws {
        #expect(EncryptedFileStore.KeyDerivation.default == .scrypt(logN: 17, r: 8, p: 1))
        try await withTempDirectory { dir in
            let path = dir.file()
            try await Self.makeStore(at: path, key: .passphrase("default cost"), count: 1)
            let header = try fileBytes(path)
            #expect(header[11] == 1, "KDF id scrypt")
            #expect(Array(header[12..<24]) == [17, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0])
            let store = try await EncryptedFileStore(path: path, key: .passphrase("default cost"))
            #expect(try await Self.ids(store) == ["n0"])
            try await store.close()
        }
    }

    @Test func rawKeysMustBe256Bits() throws {
        #expect(throws: SyncError.self) { try EncryptedFileStore.Key.raw([UInt8](repeating: 1, count: 16)) }
        do {
            _ = try EncryptedFileStore.Key.raw([UInt8](repeating: 1, count: 31))
        } catch let error as SyncError {
            #expect(error.code == .missingKey)
        }
        #expect(throws: Never.self) { try EncryptedFileStore.Key.raw(TestKeys.raw) }
    }

    @Test func secretsStayOutOfDescriptions() async throws {
        let passphrase = "hunter2-secret-passphrase"
        let key = EncryptedFileStore.Key.passphrase(passphrase, derivation: TestKeys.cheapScrypt)
        #expect(!String(describing: key).contains(passphrase))
        #expect(!String(reflecting: key).contains(passphrase))
        let raw = try EncryptedFileStore.Key.raw(TestKeys.raw)
        let hex = TestKeys.raw.map { String(format: "%02x", $0) }.joined()
        #expect(!String(describing: raw).lowercased().contains(hex))
        #expect(!String(reflecting: raw).lowercased().contains(hex))
        #expect(String(describing: raw).contains("redacted"))
        try await withTempDirectory { dir in
            let path = dir.file()
            let store = try await EncryptedFileStore(path: path, key: key)
            #expect(!String(describing: store).contains(passphrase))
            try await store.close()
            do {
                _ = try await EncryptedFileStore(path: path, key: .passphrase(passphrase + "x", derivation: TestKeys.cheapScrypt))
            } catch {
                #expect(!String(describing: error).contains(passphrase))
                #expect(!String(reflecting: error).contains(passphrase))
            }
        }
    }

    // MARK: Damage

    /// Flips each byte of a small store file in turn: every flip is found as damage
    /// (`notADatabase` for the 8-byte signature, `corrupted` anywhere else, never `wrongKey`),
    /// and the file is left as it was.
    @Test(arguments: [false, true])
    func everyFlippedByteIsDetected(compacted: Bool) async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            // Not compacted: header + appended frames (the tail rules). Compacted: a snapshot.
            try await Self.makeStore(at: path, key: try .raw(TestKeys.raw), count: 2,
                                     options: .init(compactOnClose: compacted))
            let original = try fileBytes(path)
            #expect(original.count > 180 && original.count < 2000)
            let damaged = dir.file("damaged.osync")
            for position in 0..<original.count {
                var bytes = original
                bytes[position] ^= position % 2 == 0 ? 0x01 : 0x80
                try writeBytes(bytes, to: damaged)
                let expected: Set<String> = position < 8 ? ["notADatabase"] : ["corrupted"]
                try await Self.expectOpenFails(damaged, key: try .raw(TestKeys.raw), expected, "byte \(position) of \(original.count) flipped")
            }
        }
    }

    /// With a passphrase, a flipped header byte (KDF parameters, salts) is still damage, not a
    /// wrong key: the header checksum is checked before the key.
    @Test func flippedHeaderByteWithPassphraseIsCorruptedNotWrongKey() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let key = EncryptedFileStore.Key.passphrase("pass", derivation: TestKeys.cheapScrypt)
            try await Self.makeStore(at: path, key: key, count: 1)
            let original = try fileBytes(path)
            let damaged = dir.file("damaged.osync")
            for position in 8..<180 {
                var bytes = original
                bytes[position] ^= 0x04
                try writeBytes(bytes, to: damaged)
                try await Self.expectOpenFails(damaged, key: key, ["corrupted"], "header byte \(position) flipped")
            }
        }
    }

    /// A header rewritten with a valid checksum but absurd key-derivation costs is refused
    /// before any derivation runs (no unbounded memory or time on open).
    @Test func craftedHeaderWithHugeKDFCostIsCorrupted() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let key = EncryptedFileStore.Key.passphrase("pass", derivation: TestKeys.cheapScrypt)
            try await Self.makeStore(at: path, key: key, count: 1)
            var bytes = try fileBytes(path)
            bytes[12] = 30  // scrypt N = 2^30
            bytes.replaceSubrange(148..<180, with: Array(SHA256.hash(data: bytes[0..<148])))
            try writeBytes(bytes, to: path)
            try await Self.expectOpenFails(path, key: key, ["corrupted"], "scrypt cost 2^30 in a re-checksummed header")
        }
    }

    @Test func truncatedSnapshotIsCorrupted() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            try await Self.makeStore(at: path, key: try .raw(TestKeys.raw), count: 5)
            let original = try fileBytes(path)
            for length in [9, 100, 179, 180, 181, original.count - 1] {
                try writeBytes(Array(original.prefix(length)), to: path)
                try await Self.expectOpenFails(path, key: try .raw(TestKeys.raw), ["corrupted"], "cut to \(length) bytes")
            }
        }
    }

    // MARK: Torn appends

    /// A crash mid-append leaves part of the last frame: the store opens with every complete
    /// transaction, drops only the torn one, and keeps working.
    @Test func tornLastFrameIsDroppedAndTheStoreKeepsWorking() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let key = try EncryptedFileStore.Key.raw(TestKeys.raw)
            let store = try await EncryptedFileStore(path: path, key: key, options: .init(compactOnClose: false))
            try await store.defineTable(Self.notes)
            var sizes: [Int] = []
            for i in 0..<5 {
                try await store.write { tx in try tx.upsert(Self.note(i), in: "notes") }
                sizes.append(try fileBytes(path).count)
            }
            // What the disk holds after the fifth commit, as if the process died now.
            let full = try fileBytes(path)
            try await store.close()
            let lastStart = sizes[3]
            let cuts = [lastStart + 1, lastStart + 7, lastStart + 8, lastStart + 20, full.count - 16, full.count - 1]
            for cut in cuts {
                try writeBytes(Array(full.prefix(cut)), to: path)
                let reopened = try await EncryptedFileStore(path: path, key: key, options: .init(compactOnClose: false))
                #expect(try await Self.ids(reopened) == ["n0", "n1", "n2", "n3"], "cut at \(cut)")
                #expect(try fileBytes(path).count == lastStart, "the torn tail is removed (cut at \(cut))")
                try await reopened.write { tx in try tx.upsert(Self.note(9), in: "notes") }
                try await reopened.close()
                let again = try await EncryptedFileStore(path: path, key: key)
                #expect(try await Self.ids(again) == ["n0", "n1", "n2", "n3", "n9"], "after writing past a torn tail (cut at \(cut))")
                try await again.close()
            }
            // A tail of zeros (what some file systems leave after a crash) is a torn tail too.
            try writeBytes(full + [UInt8](repeating: 0, count: 37), to: path)
            let zeroTail = try await EncryptedFileStore(path: path, key: key)
            #expect(try await Self.ids(zeroTail) == ["n0", "n1", "n2", "n3", "n4"])
            try await zeroTail.close()
        }
    }

    /// Garbage after the last complete frame is not a torn append: it is damage.
    @Test func garbageAfterTheLastFrameIsCorrupted() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            try await Self.makeStore(at: path, key: try .raw(TestKeys.raw), options: .init(compactOnClose: false))
            let full = try fileBytes(path)
            try writeBytes(full + Array("not a frame, but text".utf8), to: path)
            try await Self.expectOpenFails(path, key: try .raw(TestKeys.raw), ["corrupted"], "text after the last frame")
        }
    }

    // MARK: Confidentiality

    @Test func fileNeverHoldsPlaintext() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let marker = "ZEBRA-distinctive-plaintext-4711"
            let store = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw))
            try await store.defineTable(Self.notes)
            try await store.write { tx in
                try tx.upsert(Record(id: "id-\(marker)", fields: ["text": .string(marker), "extra": .bytes(Array(marker.utf8))]), in: "notes")
            }
            #expect(!contains(try fileBytes(path), Array(marker.utf8)), "after a commit")
            #expect(!contains(try fileBytes(path), Array("notes".utf8)), "table names are encrypted too")
            try await store.compact()
            #expect(!contains(try fileBytes(path), Array(marker.utf8)), "after compaction")
            try await store.close()
            #expect(!contains(try fileBytes(path), Array(marker.utf8)), "after close")
            let reopened = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw))
            let text = try await reopened.read { tx in try tx.record(in: "notes", id: "id-\(marker)")?["text"].stringValue }
            #expect(text == marker)
            try await reopened.close()
        }
    }

    // MARK: Foreign files

    @Test func foreignFilesAreNotADatabaseAndUnchanged() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            var generator = SystemRandomNumberGenerator()
            let sqlite = Array("SQLite format 3".utf8) + [0] + [UInt8](repeating: 0, count: 4080)
            let cases: [(String, [UInt8])] = [
                ("empty", []),
                ("random bytes", (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }),
                ("text", Array("hello, not a database\n".utf8)),
                ("a SQLite header", sqlite),
                ("zeros", [UInt8](repeating: 0, count: 4096)),
            ]
            for (what, bytes) in cases {
                try writeBytes(bytes, to: path)
                try await Self.expectOpenFails(path, key: try .raw(TestKeys.raw), ["notADatabase"], what)
                try await Self.expectOpenFails(path, key: .passphrase("p", derivation: TestKeys.cheapScrypt), ["notADatabase"], what + " (passphrase)")
            }
        }
    }

    // MARK: Compaction and locking

    @Test func compactionShrinksTheFileAndRotatesTheFileSalt() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let key = try EncryptedFileStore.Key.raw(TestKeys.raw)
            let store = try await EncryptedFileStore(path: path, key: key, options: .init(compactOnClose: false))
            try await store.defineTable(Self.notes)
            for round in 0..<50 {
                try await store.write { tx in
                    for i in 0..<10 { try tx.upsert(Self.note(i, "round \(round)"), in: "notes") }
                }
            }
            let before = try fileBytes(path)
            try await store.compact()
            let after = try fileBytes(path)
            #expect(after.count * 10 < before.count, "\(before.count) bytes before compaction, \(after.count) after")
            #expect(before[56..<88] != after[56..<88], "a new file salt, so a new frame key")
            _ = try await store.write { tx in try tx.delete(id: "n0", in: "notes") }
            try await store.close()
            #expect(!FileManager.default.fileExists(atPath: path + ".compacting"))
            let reopened = try await EncryptedFileStore(path: path, key: key)
            let records = try await reopened.read { tx in try tx.records(in: "notes", matching: .all) }
            #expect(records.count == 9)
            #expect(records.allSatisfy { $0["text"].stringValue!.hasPrefix("round 49 ") })
            try await reopened.close()
        }
    }

    @Test func writesCompactAutomatically() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let key = try EncryptedFileStore.Key.raw(TestKeys.raw)
            let options = EncryptedFileStore.Options(compactionRatio: 2, minimumCompactionBytes: 4096, compactOnClose: false)
            let store = try await EncryptedFileStore(path: path, key: key, options: options)
            try await store.defineTable(Self.notes)
            for round in 0..<200 {
                try await store.write { tx in try tx.upsert(Self.note(round % 5, "round \(round)"), in: "notes") }
            }
            #expect(try fileBytes(path).count < 16_384, "the log of 200 overwrites of 5 records was compacted")
            try await store.close()
            let reopened = try await EncryptedFileStore(path: path, key: key)
            #expect(try await Self.ids(reopened) == ["n0", "n1", "n2", "n3", "n4"])
            try await reopened.close()
        }
    }

    @Test func secondInstanceOnTheSameFileIsBusy() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let store = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw))
            do {
                _ = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw))
                Issue.record("a second instance opened the file")
            } catch let error as SyncError {
                #expect(error.code == .busy)
            }
            try await store.close()
            let again = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw))
            try await again.close()
        }
    }

    @Test func failedTransactionAppendsNothing() async throws {
        try await withTempDirectory { dir in
            let path = dir.file()
            let store = try await EncryptedFileStore(path: path, key: try .raw(TestKeys.raw), options: .init(compactOnClose: false))
            try await store.defineTable(Self.notes)
            let size = try fileBytes(path).count
            struct Rollback: Error {}
            await #expect(throws: Rollback.self) {
                try await store.write { tx in
                    try tx.upsert(Self.note(1), in: "notes")
                    throw Rollback()
                }
            }
            _ = try await store.read { tx in try tx.tables() }
            #expect(try fileBytes(path).count == size)
            #expect(try await Self.ids(store).isEmpty)
            try await store.close()
        }
    }
}
