import ArgumentParser
import Crypto
import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncConformance

/// `offline-sync-harness corrupt-sweep --store URL`: damages copies of a store file in many ways and
/// opens each copy in a child process, to prove that the adapter reports damage with a typed
/// error, never crashes, never reinitialises the store and never writes to the damaged file.
struct CorruptSweepCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "corrupt-sweep",
        abstract: "Open damaged copies of a store file (truncated, bit-flipped, zeroed pages, other formats), each in a child process.",
        discussion: """
            Creates a store of the URL's kind in a temporary directory (300 records over many \
            pages), closes it, then for each case writes a damaged copy of its file into a fresh \
            directory and runs `offline-sync-harness corrupt-probe` on it in a child process, which opens \
            the copy without creating anything, reads every table and looks every record up by \
            its id and by each indexed value. Each case ends as one of:
              refused     opening threw a typed error (corrupted, notADatabase, foreignDatabase, \
            wrongKey, authenticationFailed, or unsupported: a damaged version number that reads as a \
            newer format)
              detected    it opened, and reading threw such an error
              intact      it opened and every record is as written (damage in unused space)
              undetected  it opened and some record differs, or a lookup by its id or by an \
            indexed value misses it: damage the format's checks cannot see
            and fails the sweep when it ends in a crash (a signal), another error, a store that \
            opened empty (reinitialised), a changed or deleted file, or (with \
            --require-detection) an undetected change. Exits with status 1 on any failure.
            """)

    @OptionGroup var storeArguments: StoreArguments
    @Option(help: "Truncation offsets to try.") var truncations = 24
    @Option(help: "Single-bit flips to try (half of them in the first 4 KiB).") var bitFlips = 40
    @Option(help: "4 KiB pages to zero.") var zeroedPages = 24
    @Option(help: "The seed for the offsets and bits.") var seed: UInt64 = 1
    @Flag(help: "Fail on a damaged copy that opens and reads with different records.") var requireDetection = false
    @Option(help: "Write the figures as JSON to this file.") var json: String?
    @Option(help: "Keep the damaged copies of failed cases in this directory.") var keep: String?

    func run() async throws {
        let registry = StoreRegistry.builtIn
        let (location, adapter) = try registry.resolve(try storeArguments.url())
        guard let isolate = adapter.isolate else { throw ValidationError("\(location.scheme) stores cannot be placed in a directory of the sweep's own") }
        let options = try storeArguments.options(for: location)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("offline-sync-sweep-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }

        let originalDirectory = root.appendingPathComponent("original")
        try FileManager.default.createDirectory(at: originalDirectory, withIntermediateDirectories: true)
        let isolated = try isolate(location, originalDirectory)
        guard let storeFile = isolated.storeFile else { throw ValidationError("\(location.scheme) stores keep no single store file to damage") }
        let store = try await adapter.open(isolated.location, options)
        try await SweepData.fill(store)
        try await store.close()
        let original = [UInt8](try Data(contentsOf: storeFile))
        let expected = try await SweepProbe.digest(try await adapter.open(isolated.location, options))

        var random = SplitMix64(seed: seed)
        let cases = SweepCase.generate(original: original, foreign: try await Self.foreignFiles(except: location.scheme, in: root),
                                       truncations: truncations, bitFlips: bitFlips, zeroedPages: zeroedPages, using: &random)
        print("corrupt sweep of \(location.scheme): \(original.count)-byte store file, \(cases.count) cases, seed \(seed)")
        var figures = SweepFigures(adapter: location.scheme)
        for (index, sweepCase) in cases.enumerated() {
            let directory = root.appendingPathComponent("case-\(index)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let target = try isolate(location, directory)
            try FileManager.default.createDirectory(at: target.storeFile!.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(sweepCase.bytes).write(to: target.storeFile!)
            let before = Self.hashes(directory)
            let outcome = try Self.probe(target.location.url, expected: expected)
            var problems = outcome.problem.map { [$0] } ?? []
            let after = Self.hashes(directory)
            for (path, hash) in before where after[path] != hash {
                problems.append(after[path] == nil ? "\(path) was deleted" : "\(path) was modified")
            }
            if requireDetection, outcome.kind == .undetected { problems.append("the damage went undetected") }
            figures.record(sweepCase.kind, outcome.kind, failed: !problems.isEmpty)
            if !problems.isEmpty {
                print("FAIL \(sweepCase.name): \(outcome.kind.rawValue): \(problems.joined(separator: "; "))")
                if let keep {
                    let kept = URL(fileURLWithPath: keep).appendingPathComponent("case-\(index)")
                    try? FileManager.default.createDirectory(at: kept.deletingLastPathComponent(), withIntermediateDirectories: true)
                    try? FileManager.default.removeItem(at: kept)
                    try FileManager.default.copyItem(at: directory, to: kept)
                    print("  kept in \(kept.path): offline-sync-harness corrupt-probe --store '\(try isolate(location, kept).location.url)'")
                }
            }
            try? FileManager.default.removeItem(at: directory)
        }
        print(figures.summary)
        if let json {
            try JSONEncoder().encode(figures).write(to: URL(fileURLWithPath: json))
        }
        if figures.failures > 0 { throw ExitCode(1) }
    }

    /// SHA-256 of every regular file under `directory`, by path.
    static func hashes(_ directory: URL) -> [String: String] {
        var result: [String: String] = [:]
        guard let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey]) else { return result }
        for case let url as URL in files {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true,
                  let data = FileManager.default.contents(atPath: url.path) else { continue }
            result[url.path] = SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
        }
        return result
    }

    /// Runs `offline-sync-harness corrupt-probe` on `url` in a child process and reads its verdict.
    static func probe(_ url: String, expected: String) throws -> SweepOutcome {
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let process = try ChildProcess(executable: URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path,
                                       arguments: ["corrupt-probe", "--store", url], environment: environment,
                                       standardOutput: .pipe, mergeStandardError: true)
        let text = String(decoding: process.standardOutput?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
        let line = text.split(separator: "\n").last.map(String.init) ?? ""
        if process.exitedBySignal {
            return SweepOutcome(kind: .crashed, problem: "the probe died of signal \(process.terminationStatus): \(text.suffix(300))")
        }
        let words = Dictionary(line.split(separator: " ").compactMap { word -> (String, String)? in
            let parts = word.split(separator: "=", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        }, uniquingKeysWith: { first, _ in first })
        switch (process.terminationStatus, line.split(separator: " ").first) {
        case (0, "opened"?):
            if words["records"] == "0" { return SweepOutcome(kind: .reinitialised, problem: "it opened as an empty store") }
            return SweepOutcome(kind: words["digest"] == expected ? .intact : .undetected, problem: nil)
        case (SweepProbe.refusedStatus, "refused"?):
            let typed: Set<String> = ["corrupted", "notADatabase", "foreignDatabase", "wrongKey", "authenticationFailed", "unsupported"]
            let code = words["code"] ?? "?"
            guard typed.contains(code) else { return SweepOutcome(kind: .untyped, problem: "it threw \(line)") }
            return SweepOutcome(kind: words["phase"] == "read" ? .detected : .refused, problem: nil)
        default:
            return SweepOutcome(kind: .untyped, problem: "the probe exited with status \(process.terminationStatus): \(text.suffix(400))")
        }
    }

    /// Store files of the other built-in file formats, plus files of no database format.
    static func foreignFiles(except scheme: String, in root: URL) async throws -> [(name: String, bytes: [UInt8])] {
        var files: [(name: String, bytes: [UInt8])] = [
            ("text", Array("hello, not a database\n".utf8)),
            ("json", Array(#"{"tables":[{"name":"data","rows":[]}]}"#.utf8)),
            ("png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D, 0x49, 0x48, 0x44, 0x52] + [UInt8](repeating: 0, count: 4080)),
            ("gzip", [0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03] + [UInt8](repeating: 0xA5, count: 8182)),
            ("zeros", [UInt8](repeating: 0, count: 16384)),
            ("one-byte", [0x53]),
        ]
        let others = ["sqlite": "sqlite:///x/other.sqlite", "lmdb": "lmdb:///x/other-lmdb",
                      "encrypted-file": "encrypted-file:///x/other.osync"].filter { $0.key != scheme }
        for (otherScheme, url) in others.sorted(by: { $0.key < $1.key }) {
            let (location, adapter) = try StoreRegistry.builtIn.resolve(url)
            let directory = root.appendingPathComponent("foreign-\(otherScheme)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let isolated = try adapter.isolate!(location, directory)
            let store = try await adapter.open(isolated.location, StoreOptions(secret: .key([UInt8](repeating: 0x5A, count: 32))))
            try await SweepData.fill(store, count: 40)
            try await store.close()
            files.append(("\(otherScheme)-store", [UInt8](try Data(contentsOf: isolated.storeFile!))))
        }
        return files
    }
}

/// `offline-sync-harness corrupt-probe --store URL`: opens an existing store without creating
/// anything, reads every table and prints one line: `opened tables=N records=N digest=HEX`,
/// or `refused phase=open|read code=CODE` (exit status 3). Internal to `corrupt-sweep`.
struct CorruptProbeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "corrupt-probe", abstract: "Internal: one case of `corrupt-sweep`.",
                                                    shouldDisplay: false)
    @OptionGroup var storeArguments: StoreArguments

    func run() async throws {
        let (location, adapter) = try StoreRegistry.builtIn.resolve(try storeArguments.url())
        var options = try storeArguments.options(for: location)
        options.createIfMissing = false
        let store: any LocalStore
        do {
            store = try await adapter.open(location, options)
        } catch let error as SyncError {
            print("refused phase=open code=\(error.code)")
            throw ExitCode(SweepProbe.refusedStatus)
        }
        do {
            let (tables, records, digest) = try await SweepProbe.read(store)
            print("opened tables=\(tables) records=\(records) digest=\(digest)")
        } catch let error as SyncError {
            try? await store.close()
            print("refused phase=read code=\(error.code)")
            throw ExitCode(SweepProbe.refusedStatus)
        }
    }
}

/// What a probe reads.
enum SweepProbe {
    /// The probe's exit status when the store refused with a typed error.
    static let refusedStatus: Int32 = 3

    /// Every app table's records, in a canonical order, and their digest.
    static func read(_ store: any LocalStore) async throws -> (tables: Int, records: Int, digest: String) {
        let (tables, records, text) = try await store.read { txn -> (Int, Int, String) in
            var text = "", count = 0
            let schemas = try txn.tables().sorted { $0.name < $1.name }
            for schema in schemas {
                text += "table \(schema.name)\n"
                let indexed = schema.fields.filter(\.indexed).map(\.name)
                for record in try txn.records(in: schema.name, matching: .all).sorted(by: { $0.id < $1.id }) {
                    count += 1
                    text += record.id + " " + record.fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") + "\n"
                    // By id, and through each index too: a damaged index entry shows as a
                    // record its own id or value does not find.
                    if try txn.record(in: schema.name, id: record.id) != record { text += "id lookup misses \(record.id)\n" }
                    for field in indexed {
                        let found = try txn.records(in: schema.name, matching: Query(Field(field) == record[field])).map(\.id)
                        if !found.contains(record.id) { text += "index \(field) misses \(record.id)\n" }
                    }
                }
            }
            return (schemas.count, count, text)
        }
        try await store.close()
        return (tables, records, SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined())
    }

    /// The digest of an undamaged store (closing it afterwards).
    static func digest(_ store: any LocalStore) async throws -> String { try await read(store).digest }
}

/// The records every sweep store holds.
enum SweepData {
    static func fill(_ store: any LocalStore, count: Int = 300) async throws {
        try await store.defineTable(TableSchema("data", fields: [FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string)]))
        try await store.defineTable(TableSchema("notes", fields: [FieldDefinition("text", .string)]))
        var random = SplitMix64(seed: 42)
        let records = (0..<count).map { i in
            Record(id: String(format: "r%04d", i), fields: ["n": .int(Int64(i)), "s": .string(String(repeating: "x", count: 200 + random.below(400))),
                                                            "blob": .bytes((0..<64).map { _ in UInt8(truncatingIfNeeded: random.next()) })])
        }
        try await store.write { txn in
            for record in records { try txn.upsert(record, in: "data") }
            for i in 0..<20 { try txn.upsert(Record(id: "note-\(i)", fields: ["text": .string("note \(i)")]), in: "notes") }
        }
    }
}

/// One damaged copy.
struct SweepCase {
    enum Kind: String, Codable, CaseIterable { case truncation, bitFlip, zeroedPage, foreign }
    var kind: Kind
    var name: String
    var bytes: [UInt8]

    static func generate(original: [UInt8], foreign: [(name: String, bytes: [UInt8])], truncations: Int, bitFlips: Int, zeroedPages: Int,
                         using random: inout SplitMix64) -> [SweepCase] {
        var cases: [SweepCase] = []
        let size = original.count
        // Truncations: around the header and page boundaries, then spread over the file.
        var offsets = Set([1, 10, 99, 100, 101, 511, 512, 4095, 4096, 4097, size / 2, size - 1].filter { $0 > 0 && $0 < size })
        while offsets.count < min(truncations, size - 1) { offsets.insert(1 + random.below(size - 1)) }
        for offset in offsets.sorted().prefix(max(truncations, 0)) {
            cases.append(SweepCase(kind: .truncation, name: "truncated to \(offset) bytes", bytes: Array(original.prefix(offset))))
        }
        for i in 0..<bitFlips {
            let offset = i % 2 == 0 ? random.below(min(4096, size)) : random.below(size)
            let bit = random.below(8)
            var bytes = original
            bytes[offset] ^= UInt8(1 << bit)
            cases.append(SweepCase(kind: .bitFlip, name: "bit \(bit) of byte \(offset) flipped", bytes: bytes))
        }
        let pages = (size + 4095) / 4096
        var chosen = Set([0, 1, pages - 1].filter { $0 >= 0 && $0 < pages })
        while chosen.count < min(zeroedPages, pages) { chosen.insert(random.below(pages)) }
        for page in chosen.sorted().prefix(max(zeroedPages, 0)) {
            var bytes = original
            for i in (page * 4096)..<min(size, (page + 1) * 4096) { bytes[i] = 0 }
            cases.append(SweepCase(kind: .zeroedPage, name: "page \(page) zeroed", bytes: bytes))
        }
        for file in foreign { cases.append(SweepCase(kind: .foreign, name: "a \(file.name) file", bytes: file.bytes)) }
        return cases
    }
}

/// How a case ended.
enum SweepOutcomeKind: String, Codable, CaseIterable {
    case refused, detected, intact, undetected, reinitialised, crashed, untyped
}

struct SweepOutcome {
    var kind: SweepOutcomeKind
    var problem: String?
}

/// The sweep's counts, per damage kind and outcome.
struct SweepFigures: Codable {
    var adapter: String
    var cases = 0
    var failures = 0
    var outcomes: [String: [String: Int]] = [:]

    init(adapter: String) { self.adapter = adapter }

    mutating func record(_ kind: SweepCase.Kind, _ outcome: SweepOutcomeKind, failed: Bool) {
        cases += 1
        if failed { failures += 1 }
        outcomes[kind.rawValue, default: [:]][outcome.rawValue, default: 0] += 1
    }

    var summary: String {
        var lines = ["\(failures == 0 ? "PASS" : "FAIL") corrupt sweep of \(adapter): \(cases) cases, \(failures) failed"]
        for kind in SweepCase.Kind.allCases {
            guard let counts = outcomes[kind.rawValue] else { continue }
            lines.append("  \(kind.rawValue): " + SweepOutcomeKind.allCases.compactMap { outcome in counts[outcome.rawValue].map { "\(outcome.rawValue) \($0)" } }.joined(separator: ", "))
        }
        return lines.joined(separator: "\n")
    }
}
