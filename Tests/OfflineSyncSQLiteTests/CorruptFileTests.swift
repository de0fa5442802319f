import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// Damaged, foreign and non-SQLite files open with a typed error and are left byte for byte as
/// they were, with no WAL content written that could later change them.
@Suite("SQLiteStore refuses damaged and foreign files")
struct CorruptFileTests {
    /// Makes a valid store file with some data and returns its bytes.
    static func makeStoreFile(at path: String) async throws -> Data {
        try await withStore(at: path) { store in
            try await store.defineTable(TableSchema("t", fields: [FieldDefinition("s", .string, indexed: true)]))
            try await store.write { transaction in
                for i in 0..<300 {
                    try transaction.upsert(Record(id: "r\(i)", fields: ["s": .string(String(repeating: "v", count: 200))]), in: "t")
                }
            }
        }
        return try #require(fileBytes(path))
    }

    /// Opens `path`, expects one of `codes`, and checks the file and its WAL were not touched.
    static func expectRefused(_ path: String, _ codes: Set<SyncError.Code>, _ label: String,
                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let before = fileBytes(path)
        let walBefore = fileBytes(path + "-wal")
        let code = await syncErrorCode {
            let store = try await SQLiteStore(path: path)
            try await store.close()
        }
        #expect(code.map { codes.contains($0) } == true, "\(label): got \(String(describing: code))", sourceLocation: sourceLocation)
        #expect(fileBytes(path) == before, "\(label): the file changed", sourceLocation: sourceLocation)
        let walAfter = fileBytes(path + "-wal")
        #expect(walAfter == walBefore || (walBefore == nil && walAfter?.isEmpty == true),
                "\(label): WAL content was written", sourceLocation: sourceLocation)
    }

    static func reset(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    @Test("truncated store files are refused at several offsets")
    func truncated() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("t.sqlite").path
            let original = try await Self.makeStoreFile(at: path)
            #expect(original.count > 8192)
            let offsets = [1, 15, 16, 50, 99, 100, 101, 1000, 4095, 4096, 4097, 8192, original.count / 2,
                           original.count - 4096, original.count - 1]
            for offset in offsets {
                Self.reset(path)
                try original.prefix(offset).write(to: URL(fileURLWithPath: path))
                try await Self.expectRefused(path, [.corrupted, .notADatabase], "truncated at \(offset)")
            }
            // The untouched original still opens and holds its data.
            Self.reset(path)
            try original.write(to: URL(fileURLWithPath: path))
            let count = try await withStore(at: path) { store in
                try await store.read { try $0.count(in: "t", matching: .all) }
            }
            #expect(count == 300)
        }
    }

    @Test("overwritten headers, damaged pages, text and garbage files are refused")
    func garbage() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("g.sqlite").path
            let original = try await Self.makeStoreFile(at: path)
            var rng = SplitMix64(seed: 7)

            var header = original
            for i in 0..<100 { header[i] = UInt8(truncatingIfNeeded: rng.next()) }
            Self.reset(path)
            try header.write(to: URL(fileURLWithPath: path))
            try await Self.expectRefused(path, [.notADatabase], "garbage header")

            var badPageSize = original
            badPageSize[16] = 0x03
            badPageSize[17] = 0x00
            Self.reset(path)
            try badPageSize.write(to: URL(fileURLWithPath: path))
            try await Self.expectRefused(path, [.corrupted, .notADatabase], "invalid page size")

            // A flipped bit in a header field whose values the format fixes (the soak's corrupt
            // sweep found byte 47, the schema format number, turned into SQLite's generic
            // "unsupported file format" and so storageFailure).
            for (byte, bit) in [(47, 6), (44, 0), (18, 3), (19, 2), (21, 0), (22, 5), (23, 7), (59, 4), (80, 1)] {
                var flipped = original
                flipped[byte] ^= UInt8(1) << UInt8(bit)
                Self.reset(path)
                try flipped.write(to: URL(fileURLWithPath: path))
                try await Self.expectRefused(path, [.corrupted], "bit \(bit) of header byte \(byte) flipped")
            }

            var damaged = original
            for i in 4096..<(4096 + 4096) { damaged[i] = UInt8(truncatingIfNeeded: rng.next()) }
            Self.reset(path)
            try damaged.write(to: URL(fileURLWithPath: path))
            try await Self.expectRefused(path, [.corrupted, .notADatabase], "damaged second page")

            var damagedLast = original
            for i in (original.count - 4096)..<original.count { damagedLast[i] = 0xFF }
            Self.reset(path)
            try damagedLast.write(to: URL(fileURLWithPath: path))
            try await Self.expectRefused(path, [.corrupted, .notADatabase], "damaged last page")

            let files: [(String, Data)] = [
                ("text", Data(String(repeating: "just some notes, not a database\n", count: 200).utf8)),
                ("short text", Data("hello".utf8)),
                ("one byte", Data([0])),
                ("random", Data((0..<10_000).map { _ in UInt8(truncatingIfNeeded: rng.next()) })),
            ]
            for (label, data) in files {
                Self.reset(path)
                try data.write(to: URL(fileURLWithPath: path))
                try await Self.expectRefused(path, [.notADatabase], label)
            }
        }
    }

    @Test("a valid SQLite database of another application is refused with foreignDatabase")
    func foreign() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("foreign.db").path
            let raw = try RawDatabase(path: path)
            try raw.exec("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('private');")
            raw.close()
            try await Self.expectRefused(path, [.foreignDatabase], "foreign database")

            // Another application's id, even with no tables.
            Self.reset(path)
            let other = try RawDatabase(path: path)
            try other.exec("PRAGMA application_id = 1234; CREATE TABLE x(a); DROP TABLE x;")
            other.close()
            try await Self.expectRefused(path, [.foreignDatabase], "foreign application id")

            // An OfflineSync file of a newer format.
            Self.reset(path)
            let newer = try RawDatabase(path: path)
            try newer.exec("PRAGMA application_id = \(SQLiteStore.applicationID); PRAGMA user_version = 99; CREATE TABLE x(a);")
            newer.close()
            try await Self.expectRefused(path, [.unsupported], "newer format")
        }
    }

    @Test("a foreign WAL database with uncheckpointed frames: neither the file nor its WAL changes")
    func foreignWithWAL() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("foreign-wal.db").path
            let raw = try RawDatabase(path: path)
            try raw.exec("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE notes(body TEXT);")
            try raw.exec("INSERT INTO notes VALUES ('one'); INSERT INTO notes VALUES ('two');")
            #expect((fileBytes(path + "-wal")?.count ?? 0) > 0)
            // The foreign connection stays open, so its WAL is not checkpointed while we try.
            try await Self.expectRefused(path, [.foreignDatabase], "foreign WAL database")
            #expect(try raw.strings("SELECT count(*) FROM notes") == ["2"])
            raw.close()
        }
    }

    @Test("an empty file and an empty SQLite database become stores")
    func emptyFilesAreAdopted() async throws {
        try await withTemporaryDirectory { directory in
            let emptyFile = directory.appendingPathComponent("empty.sqlite").path
            #expect(FileManager.default.createFile(atPath: emptyFile, contents: Data()))
            let emptyDatabase = directory.appendingPathComponent("empty.db").path
            let raw = try RawDatabase(path: emptyDatabase)
            try raw.exec("PRAGMA user_version = 0;")
            raw.close()
            for path in [emptyFile, emptyDatabase] {
                try await withStore(at: path) { store in
                    try await store.defineTable(TableSchema("t"))
                    try await store.write { try $0.upsert(Record(id: "1"), in: "t") }
                }
                let count = try await withStore(at: path) { store in
                    try await store.read { try $0.count(in: "t", matching: .all) }
                }
                #expect(count == 1)
                let marked = try RawDatabase(path: path)
                #expect(try marked.strings("PRAGMA application_id") == ["\(SQLiteStore.applicationID)"])
                #expect(try marked.strings("PRAGMA journal_mode") == ["wal"])
                marked.close()
            }
        }
    }

    /// Replaces the only occurrence of `old` in the file at `path` with `new`, of the same length.
    static func replaceOnce(_ old: String, with new: String, in path: String) throws {
        var bytes = [UInt8](try #require(fileBytes(path)))
        let target = Array(old.utf8), replacement = Array(new.utf8)
        try #require(target.count == replacement.count)
        let offsets = (0...(bytes.count - target.count)).filter { bytes[$0..<($0 + target.count)].elementsEqual(target) }
        try #require(offsets.count == 1, "\(old) occurs \(offsets.count) times")
        bytes.replaceSubrange(offsets[0]..<(offsets[0] + target.count), with: replacement)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test("a damaged definition in the schema is corrupted at open, whichever object it hits, and the file is unchanged",
          arguments: [
              // One flipped bit in the catalog's column name ("m" → "o"): with SQLite's
              // double-quoted string fallback this once read every table as named "name".
              (#""name" TEXT NOT NULL UNIQUE"#, #""naoe" TEXT NOT NULL UNIQUE"#),
              (#", "f_s", "sum" INTEGER)"#, #", "f_r", "sum" INTEGER)"#),
              (#""version" TEXT, "updatedAt""#, #""version" TEXU, "updatedAt""#),
              (#"ON "t" ("f_s")"#, #"ON "t" ("f_r")"#),
          ])
    func damagedDefinition(old: String, new: String) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("app.sqlite").path
            _ = try await Self.makeStoreFile(at: path)
            try Self.replaceOnce(old, with: new, in: path)
            try await Self.expectRefused(path, [.corrupted], "\(old) → \(new)")
            let error = await syncError { _ = try await SQLiteStore(path: path) }
            #expect(error?.message.contains("damaged schema") == true, "\(String(describing: error))")
        }
    }

    @Test("every copy of a table's name in the file — schema, catalog row, catalog index, encoded schema — damaged, is corrupted at open")
    func damagedTableName() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("app.sqlite").path
            let name = "catalogued_table_name"
            try await withStore(at: path) { store in
                try await store.defineTable(TableSchema(name, fields: [FieldDefinition("s", .string, indexed: true)]))
                try await store.write { try $0.upsert(Record(id: "r", fields: ["s": "v"]), in: name) }
            }
            let original = [UInt8](try #require(fileBytes(path)))
            let target = Array(name.utf8)
            let offsets = (0...(original.count - target.count)).filter { original[$0..<($0 + target.count)].elementsEqual(target) }
            #expect(offsets.count >= 5, "found \(offsets.count) copies")
            for offset in offsets {
                var bytes = original
                bytes[offset + 4] ^= 0x01 // "a" → "`"
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                try await Self.expectRefused(path, [.corrupted], "copy at byte \(offset)")
            }
        }
    }

    @Test("schema objects no catalog row accounts for, and catalog rows that do not match their tables, are corrupted")
    func strayObjects() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("app.sqlite").path
            let original = try await Self.makeStoreFile(at: path)
            let damage = [
                "CREATE TABLE \"intruder\" (\"x\")",
                "CREATE INDEX \"__osync_idx_1_7\" ON \"t\" (\"f_s\")",
                "DROP INDEX \"__osync_idx_1_0\"",
                "UPDATE \"__osync_catalog\" SET \"name\" = 'u'",
                "UPDATE \"__osync_catalog\" SET \"schema\" = x'00'",
            ]
            for statement in damage {
                try original.write(to: URL(fileURLWithPath: path))
                let raw = try RawDatabase(path: path)
                try raw.exec(statement)
                raw.close()
                try await Self.expectRefused(path, [.corrupted], statement)
            }
            // `ANALYZE`'s statistics tables hold nothing of ours and are allowed.
            try original.write(to: URL(fileURLWithPath: path))
            let raw = try RawDatabase(path: path)
            try raw.exec("ANALYZE")
            raw.close()
            let count = try await withStore(at: path) { store in try await store.read { try $0.count(in: "t", matching: .all) } }
            #expect(count == 300)
        }
    }

    @Test("a directory or a missing parent directory is a typed error")
    func unopenablePaths() async throws {
        try await withTemporaryDirectory { directory in
            let code = await syncErrorCode { _ = try await SQLiteStore(path: directory.path) }
            #expect(code == .notADatabase)
            let missing = directory.appendingPathComponent("no/such/dir/x.sqlite").path
            let code2 = await syncErrorCode { _ = try await SQLiteStore(path: missing) }
            #expect(code2 == .storageFailure)
        }
    }
}
