import Foundation
import OfflineSync

/// The damage the corrupt-files group does to a copy of a closed store's file, each one
/// detectable when the store opens, whatever its format:
///
/// - `truncatedToHalf`, `truncatedTo1KB`: the file ends before the data its own structures
///   point to (SQLite: pages beyond the end, found by `PRAGMA quick_check`; LMDB: the meta
///   page's last page number beyond the file; an authenticated file: a failed tag).
/// - `truncatedTo10Bytes`: not even a complete header.
/// - `first64BytesGarbage`, `firstByteFlipped`: the file's signature is wrong. Every store
///   format is expected to begin with a signature (SQLite's `SQLite format 3\0`, a magic
///   number) that the store checks before using the file. A flipped byte elsewhere in a
///   header can be undetectable (reserved or counter bytes), so only the first byte is flipped.
/// - `replacedWithText`, `replacedWithZeros`, `replacedWithRandomBytes`: not a store file at all.
///
/// Not tested, because a store cannot tell them from legitimate files at open: a zero-length
/// file (SQLite treats it as a new, empty database), bytes changed inside record payloads
/// (only a full scan with checksums could see it), and a valid database of another
/// application (the adapter's own tests cover ``SyncError/Code/foreignDatabase``).
///
/// The suite copies only the file `storeFile` names, so a store must keep all its committed
/// data in that file once closed (`uncorruptedCopyOpens` checks this).
enum Corruption: CaseIterable {
    case truncatedToHalf, truncatedTo1KB, truncatedTo10Bytes, first64BytesGarbage, firstByteFlipped
    case replacedWithText, replacedWithZeros, replacedWithRandomBytes

    func apply(_ original: [UInt8]) -> [UInt8] {
        var rng = SplitMix64(seed: 0xC0AA_0975)
        switch self {
        case .truncatedToHalf: return Array(original.prefix(original.count / 2))
        case .truncatedTo1KB: return Array(original.prefix(1024))
        case .truncatedTo10Bytes: return Array(original.prefix(10))
        case .first64BytesGarbage:
            var bytes = original
            for i in 0..<min(64, bytes.count) { bytes[i] = UInt8(truncatingIfNeeded: rng.next()) }
            return bytes
        case .firstByteFlipped:
            var bytes = original
            bytes[0] ^= 0xFF
            return bytes
        case .replacedWithText: return Array("hello, not a database\n".utf8)
        case .replacedWithZeros: return [UInt8](repeating: 0, count: 4096)
        case .replacedWithRandomBytes: return (0..<8192).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        }
    }
}

extension LocalStoreConformance {
    static let corruptFileCases: [ConformanceCase] = [
        ConformanceCase("freshDirectoryOpens", requires: .storeFile) { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(TableSchema("fresh")), "defining a table in a fresh store")
            try await must(await store.write { tx in try tx.upsert(Record(id: "x"), in: "fresh") }, "writing")
            try await must(await store.close(), "closing")
            let file = ctx.capabilities.storeFile!(ctx.directory)
            try expect(FileManager.default.fileExists(atPath: file.path), "storeFile names \(file.path), which does not exist after the store was created and closed")
        },
        ConformanceCase("uncorruptedCopyOpens", requires: .storeFile) { ctx in
            // The control case: the copy procedure itself leaves a usable store.
            let original = try await CorruptFiles.makeOriginal(ctx)
            let directory = try ctx.makeDirectory("copy")
            try CorruptFiles.place(original.bytes, in: directory, ctx)
            let store = try await ctx.open(directory)
            if ctx.capabilities.persistent {
                let all = try await must(await store.read { tx in try tx.records(in: "data", matching: .all) }, "reading the copy")
                try expectRecords(all, original.records, "records in an uncorrupted copy of the store file")
            }
        },
    ] + Corruption.allCases.map { corruption in
        ConformanceCase("\(corruption)", requires: .storeFile) { ctx in
            try await CorruptFiles.check(ctx, corruption)
        }
    }
}

enum CorruptFiles {
    struct Original {
        var bytes: [UInt8]
        var records: [Record]
    }

    /// Creates a store with enough data to span many pages, closes it and returns its file.
    static func makeOriginal(_ ctx: CaseContext, file: String = #fileID, line: Int = #line) async throws -> Original {
        let store = try await ctx.open(file: file, line: line)
        try await must(await store.defineTable(TableSchema("data", fields: [FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string)])),
                       "defining data", file: file, line: line)
        var rng = SplitMix64(seed: 42)
        let records = (0..<300).map { i in
            Record(id: String(format: "r%04d", i), fields: ["n": .int(Int64(i)), "s": .string(String(repeating: "x", count: 200 + rng.below(400))),
                                                            "blob": .bytes((0..<64).map { _ in UInt8(truncatingIfNeeded: rng.next()) })])
        }
        try await must(await store.write { tx in for r in records { try tx.upsert(r, in: "data") } }, "writing data", file: file, line: line)
        try await must(await store.close(), "closing the original store", file: file, line: line)
        let url = ctx.capabilities.storeFile!(ctx.directory)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw ConformanceFailure("storeFile names \(url.path), which cannot be read after the store was closed", file: file, line: line)
        }
        try expect(data.count >= 8192, "the store file holds \(data.count) bytes after writing ~200 KB; too small to damage meaningfully", file: file, line: line)
        return Original(bytes: [UInt8](data), records: records)
    }

    /// Writes `bytes` as the store file of `directory`.
    static func place(_ bytes: [UInt8], in directory: URL, _ ctx: CaseContext) throws {
        let target = ctx.capabilities.storeFile!(directory)
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: target)
    }

    /// Every regular file under `directory`, by relative path.
    static func snapshot(_ directory: URL) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        let base = directory.standardizedFileURL.path
        guard let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey]) else { return files }
        for case let url as URL in enumerator {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true,
                  let data = FileManager.default.contents(atPath: url.path) else { continue }
            let path = url.standardizedFileURL.path
            files[path.hasPrefix(base) ? String(path.dropFirst(base.count)) : path] = [UInt8](data)
        }
        return files
    }

    static func check(_ ctx: CaseContext, _ corruption: Corruption, file: String = #fileID, line: Int = #line) async throws {
        let original = try await makeOriginal(ctx)
        let directory = try ctx.makeDirectory("corrupt")
        try place(corruption.apply(original.bytes), in: directory, ctx)
        let before = snapshot(directory)
        var problems: [String] = []
        do {
            _ = try await ctx.tryOpen(directory)
            problems.append("opening succeeded; it must throw SyncError corrupted, notADatabase or foreignDatabase")
        } catch let error as SyncError where [.corrupted, .notADatabase, .foreignDatabase].contains(error.code) {
            // The typed error the contract asks for.
        } catch {
            problems.append("opening threw \(describe(error)); expected SyncError corrupted, notADatabase or foreignDatabase")
        }
        await ctx.closeAll()
        let after = snapshot(directory)
        for (path, bytes) in before.sorted(by: { $0.key < $1.key }) {
            guard let now = after[path] else { problems.append("the file \(path) was deleted"); continue }
            if now != bytes {
                problems.append("the file \(path) was modified (\(bytes.count) bytes before, \(now.count) after, first change at offset \(Render.firstMismatch(bytes, now)))")
            }
        }
        if !problems.isEmpty {
            throw ConformanceFailure("store file \(corruption): " + problems.joined(separator: "; "), file: file, line: line)
        }
    }
}
