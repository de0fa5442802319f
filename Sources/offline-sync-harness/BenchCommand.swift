import ArgumentParser
import COfflineSyncLMDB
import COfflineSyncPostgreSQL
import COfflineSyncSQLite3
import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncSQLite
import OfflineSyncStoreKit

/// One benchmark workload: our path and the baseline it is compared with, each run in a
/// process of its own by `bench-worker`.
protocol BenchWorkload: Sendable {
    /// The name in `bench-results.json`, for example `local-writes-sqlite`.
    static var name: String { get }
    /// The baseline's name, for example `raw-sqlite3`.
    static var baseline: String { get }
    /// Runs our side in `directory` (empty, removed afterwards); returns the measured seconds.
    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double
    /// Runs the baseline in `directory` (empty, removed afterwards); returns the measured seconds.
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double
    /// The records a workload always uses whatever `--records` says (the sync workloads), or nil.
    static var fixedRecords: Int? { get }
    /// The records the baseline moves, when it is another size of the same workload
    /// (push-100k against push-10k): its records per second are counted with these.
    static var baselineRecords: Int? { get }
    /// The metric whose ratio (ours over the baseline's) is the workload's `ratio`, for a
    /// workload judged by something other than time (bytes sent), or nil.
    static var ratioMetric: String? { get }
}

extension BenchWorkload {
    /// Local-writes workloads follow `--records`.
    static var fixedRecords: Int? { nil }
    /// The baseline moves as many records as the workload.
    static var baselineRecords: Int? { fixedRecords }
    /// The ratio is of time.
    static var ratioMetric: String? { nil }
}

/// Every workload `bench` knows, in the order it runs them.
let benchWorkloads: [any BenchWorkload.Type] = [LocalWritesSQLite.self, LocalWritesLMDB.self, LocalWritesEncryptedFile.self,
                                                LocalWritesPostgreSQL.self, LocalWritesGRDB.self, Push10k.self, Push100k.self, PushServerApply.self, PushServerApplyPostgreSQL.self, Pull1m.self, Pull1mGRDB.self, Pull1mLocal.self, PullDelta.self,
                                                PullDeltaShared.self, PullDeltaMixed.self, MoveIn.self, MoveOut.self,
                                                MoveInBig.self, MoveOutBig.self, PushSharedBig.self, PushSharedBigPostgreSQL.self, PushSharedK.self,
                                                UpdateSharedBig.self, TablesListShared.self, ObserveLatency.self, LocalReadsGet.self, LocalReadsQuery.self,
                                                LocalReadsGetInRead.self, LocalReadsQueryInRead.self,
                                                ObserveBurst.self, AuthVerify.self, AttachmentUpload.self, AttachmentDownload.self,
                                                AttachmentUploadURLSession.self, AttachmentDownloadURLSession.self,
                                                AttachmentUploadVsHash.self, AttachmentDownloadVsHash.self, AttachmentUploadURLSessionVsHash.self,
                                                AttachmentDownloadURLSessionVsHash.self,
                                                AttachmentResume.self, AttachmentSmall.self]

/// Workloads too long or too large for `make bench` (minutes of seeding, gigabytes of stores):
/// `make bench-scale` runs them by name.
let scaleWorkloads: [any BenchWorkload.Type] = [Pull10m.self]

/// `offline-sync-harness bench`: runs each workload side by side with its baseline, each in its own
/// process (so peak memory is its own), prints a table and writes `bench-results.json`.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure local writes against the raw C libraries and sync over HTTP against the naive paths (writes bench-results.json).")

    @Option(help: "Records to write.") var records = 100_000
    @Option(help: "Records per transaction.") var batch = 1_000
    @Option(help: "Where to write the results.") var output = "bench-results.json"
    @Option(help: "Runs per side; the fastest counts.") var runs = 3
    @Option(help: "Only the workloads with these names (comma-separated); all by default.") var only: String?

    func run() async throws {
        guard records > 0, batch > 0, runs > 0 else { throw ValidationError("records, batch and runs must be positive") }
        let selected = only.map { Set($0.split(separator: ",").map(String.init)) }
        // `--only` may also name the scale workloads, which a plain `bench` leaves out.
        let workloads = selected.map { names in (benchWorkloads + scaleWorkloads).filter { names.contains($0.name) } } ?? benchWorkloads
        if let selected, selected.count != workloads.count {
            throw ValidationError("unknown workload; known: \((benchWorkloads + scaleWorkloads).map { $0.name }.joined(separator: ", "))")
        }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        var rows: [[String: Any]] = []
        for workload in workloads { rows.append(try measure(workload, executable: executable)) }
        let machine = BenchCommand.machineDescription()
        print("")
        print("workload                      records  per txn  seconds  baseline                 baseline s  ratio  peak RSS  CPU ratio")
        for row in rows {
            let name = (row["name"] as! String).padding(toLength: 28, withPad: " ", startingAt: 0)
            let baseline = (row["baseline"] as! String).padding(toLength: 24, withPad: " ", startingAt: 0)
            let cpuRatio = (row["cpuRatio"] as? Double).map { String(format: "  %9.2f", $0) } ?? "          -"
            print(name + String(format: " %8d  %7d  %7.3f  ", row["records"] as! Int, batch, row["seconds"] as! Double) + baseline
                  + String(format: "%8.3f  %5.2f  %4d MiB", row["baselineSeconds"] as! Double, row["ratio"] as! Double,
                           (row["peakRSSBytes"] as! Int) / 1_048_576) + cpuRatio)
        }
        for row in rows {
            guard let metrics = row["metrics"] as? [String: Double] else { continue }
            let shown = metrics.sorted { $0.key < $1.key }.map { "\($0.key) \(String(format: "%.3f", $0.value))" }
            let baseline = (row["baselineMetrics"] as? [String: Double])?.sorted { $0.key < $1.key }
                .map { "\($0.key) \(String(format: "%.3f", $0.value))" } ?? []
            print("\(row["name"] as! String): \(shown.joined(separator: ", "))" + (baseline.isEmpty ? "" : "; baseline: \(baseline.joined(separator: ", "))"))
        }
        print("machine: \(machine)")
        // Keep the figures of workloads that did not run this time.
        var merged = rows
        if selected != nil, let data = FileManager.default.contents(atPath: output),
           let previous = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
           let old = previous["workloads"] as? [[String: Any]] {
            let ran = Set(rows.compactMap { $0["name"] as? String })
            merged = old.filter { !ran.contains($0["name"] as? String ?? "") } + rows
            merged.sort { a, b in
                let order = (benchWorkloads + scaleWorkloads).map { $0.name }
                return (order.firstIndex(of: a["name"] as? String ?? "") ?? .max) < (order.firstIndex(of: b["name"] as? String ?? "") ?? .max)
            }
        }
        let json: [String: Any] = ["machine": machine, "workloads": merged]
        let data = try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: output))
        print("wrote \(output)")
    }

    /// Runs `workload`'s two sides `runs` times each; returns its row of the results.
    func measure(_ workload: any BenchWorkload.Type, executable: String) throws -> [String: Any] {
        var best: [String: WorkerResult] = [:]
        // The least CPU of each side's runs, kept apart from the fastest run's: both are
        // the side's best, each by its own measure. `nil` once a run lacks it.
        var leastCPU: [String: Double?] = [:]
        for run in 1...runs {
            for mode in ["raw", "ours"] {
                let result = try runWorker(executable: executable, workload: workload.name, mode: mode)
                let cpu = result.cpuSeconds.map { String(format: ", CPU %.3f s", $0) } ?? ""
                print("\(workload.name) run \(run): \(mode == "ours" ? "OfflineSync" : workload.baseline) \(String(format: "%.3f", result.seconds)) s\(cpu), peak RSS \(result.peakRSSBytes / 1_048_576) MiB")
                if best[mode].map({ result.seconds < $0.seconds }) ?? true { best[mode] = result }
                let known = leastCPU[mode] ?? result.cpuSeconds
                leastCPU[mode] = known.flatMap { known in result.cpuSeconds.map { min(known, $0) } }
            }
        }
        let ours = best["ours"]!, raw = best["raw"]!
        var extra: [String: Any] = [:]
        if let cpu = leastCPU["ours"] ?? nil, let baselineCPU = leastCPU["raw"] ?? nil, baselineCPU > 0 {
            extra["cpuSeconds"] = cpu
            extra["baselineCPUSeconds"] = baselineCPU
            extra["cpuRatio"] = cpu / baselineCPU
        }
        if let fixed = workload.fixedRecords {
            extra["recordsPerSecond"] = Double(fixed) / ours.seconds
            extra["baselineRecordsPerSecond"] = Double(workload.baselineRecords ?? fixed) / raw.seconds
            extra["speedup"] = raw.seconds / ours.seconds
        }
        var ratio = ours.seconds / raw.seconds
        if let name = workload.ratioMetric {
            guard let value = ours.metrics?[name], let base = raw.metrics?[name], base > 0 else {
                throw ValidationError("\(workload.name) reported no \(name) on both sides")
            }
            ratio = value / base
            extra["ratioOf"] = name
        }
        if let metrics = ours.metrics, !metrics.isEmpty { extra["metrics"] = metrics }
        if let metrics = raw.metrics, !metrics.isEmpty { extra["baselineMetrics"] = metrics }
        return extra.merging([
            "name": workload.name, "records": workload.fixedRecords ?? records, "transactionSize": batch,
            "seconds": ours.seconds, "baseline": workload.baseline, "baselineSeconds": raw.seconds,
            "ratio": ratio, "peakRSSBytes": ours.peakRSSBytes, "baselinePeakRSSBytes": raw.peakRSSBytes,
        ] as [String: Any]) { $1 }
    }

    struct WorkerResult: Decodable {
        var seconds: Double
        var peakRSSBytes: Int
        /// What the workload reported through `BenchMetrics`.
        var metrics: [String: Double]?
        /// The worker process's CPU time in the timed windows (``MeasuredWindows``), when the
        /// windows are what the workload reported.
        var cpuSeconds: Double?
    }

    func runWorker(executable: String, workload: String, mode: String) throws -> WorkerResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offline-sync-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let process = try ChildProcess(executable: executable,
                                       arguments: ["bench-worker", "--workload", workload, "--mode", mode, "--records", String(records),
                                                   "--batch", String(batch), "--directory", directory.path],
                                       standardOutput: .pipe)
        let data = process.standardOutput?.readDataToEndOfFile() ?? Data()
        guard process.terminationStatus == 0 else {
            throw ValidationError("the \(workload) \(mode) bench worker failed with status \(process.terminationStatus)")
        }
        return try JSONDecoder().decode(WorkerResult.self, from: data)
    }

    static func machineDescription() -> String {
        let memory = ProcessInfo.processInfo.physicalMemory / 1_073_741_824
        return "\(cpuModel()), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(memory) GiB, Linux, SQLite \(String(cString: sqlite3_libversion())), LMDB \(lmdbVersion()), libpq \(PQlibVersion() / 10000).\(PQlibVersion() % 10000)"
    }
}

extension BenchCommand {
    /// The processor's model name from `/proc/cpuinfo`, or "unknown CPU".
    static func cpuModel() -> String {
        guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
              let line = info.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
              let name = line.split(separator: ":", maxSplits: 1).last else { return "unknown CPU" }
        return name.trimmingCharacters(in: .whitespaces)
    }
}

/// LMDB's version, for example `0.9.24`.
func lmdbVersion() -> String {
    var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
    _ = mdb_version(&major, &minor, &patch)
    return "\(major).\(minor).\(patch)"
}

/// One side of one workload, in a process of its own. Prints `{"seconds":…,"peakRSSBytes":…}`.
struct BenchWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "bench-worker", abstract: "Internal: one side of `bench`.",
                                                    shouldDisplay: false)

    @Option var workload: String
    @Option var mode: String
    @Option var records: Int
    @Option var batch: Int
    @Option var directory: String

    func run() async throws {
        guard let type = (benchWorkloads + scaleWorkloads).first(where: { $0.name == workload }) else {
            throw ValidationError("unknown workload \(workload)")
        }
        let url = URL(fileURLWithPath: directory)
        let seconds: Double
        switch mode {
        case "ours": seconds = try await type.ours(directory: url, records: records, batch: batch)
        case "raw": seconds = try await type.raw(directory: url, records: records, batch: batch)
        default: throw ValidationError("unknown mode \(mode)")
        }
        let metrics = try JSONSerialization.data(withJSONObject: BenchMetrics.shared.all.filter { $0.value.isFinite })
        let cpu = MeasuredWindows.shared.cpuSeconds(matching: seconds).map { ", \"cpuSeconds\": \($0)" } ?? ""
        print("{\"seconds\": \(seconds), \"peakRSSBytes\": \(Self.peakRSS()), \"metrics\": \(String(decoding: metrics, as: UTF8.self))\(cpu)}")
    }

    /// VmHWM from /proc/self/status, in bytes.
    static func peakRSS() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
        let kilobytes = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
        return kilobytes * 1024
    }
}

/// What every local-writes workload shares: the table, the records, and timing.
enum LocalWrites {
    static let schema = TableSchema("items", fields: [
        FieldDefinition("title", .string), FieldDefinition("n", .int), FieldDefinition("done", .bool),
        FieldDefinition("note", .string),
    ])

    static func record(_ i: Int) -> Record {
        Record(id: "item-\(i)", fields: [
            "title": .string("Item number \(i)"), "n": .int(Int64(i)), "done": .bool(i % 3 == 0),
            "note": .string("a note of moderate length for record \(i)"),
        ])
    }

    /// The `__operations` row our queue stores for the insert of `record` (what
    /// `SyncTransaction.insert` writes beside it), for baselines that write the same bytes.
    static func operationRow(inserting record: Record, id: String, sequence: Int64, transaction: String,
                             now: Timestamp) -> Record {
        Record(id: id, fields: [
            "sequence": .int(sequence), "table": "items", "itemId": .string(record.id), "kind": "insert",
            "item": .object(record.fields), "state": "pending", "attempts": 0,
            "createdAt": .date(now), "changedAt": .date(now), "transaction": .string(transaction),
            "sendId": .string(id), "changedFields": .array(record.fields.keys.sorted(by: Value.utf8Less).map(Value.string)),
        ])
    }

    /// Makes at `path` the empty SQLite store our side starts from — system tables, `schema`,
    /// indexes and pragmas — and closes it, so a raw baseline writes into the same layout.
    static func emptySQLiteStore(at path: String, defining schema: TableSchema) async throws {
        let context = try await SyncContext(store: try await SQLiteStore(path: path), remote: UnusedRemote())
        try await context.defineTable(schema)
        try await context.close()
    }

    /// Seconds `body` takes, for synchronous work (noted in ``MeasuredWindows``).
    static func measureSync(_ body: () throws -> Void) rethrows -> Double {
        let cpu = MeasuredWindows.processCPUSeconds(), start = DispatchTime.now().uptimeNanoseconds
        try body()
        return MeasuredWindows.shared.close(started: start, cpu: cpu)
    }

    /// Seconds `body` takes (noted in ``MeasuredWindows``).
    static func measure(_ body: () async throws -> Void) async rethrows -> Double {
        let cpu = MeasuredWindows.processCPUSeconds(), start = DispatchTime.now().uptimeNanoseconds
        try await body()
        return MeasuredWindows.shared.close(started: start, cpu: cpu)
    }

    /// Our side of every local-writes workload: `records` inserts through a `SyncContext`
    /// (record + queue row each) in transactions of `batch`, checked afterwards, store closed.
    static func throughSyncTable(_ store: any LocalStore, records: Int, batch: Int) async throws -> Double {
        let context = try await SyncContext(store: store, remote: UnusedRemote())
        try await context.defineTable(schema)
        let seconds = try await measure {
            for start in stride(from: 0, to: records, by: batch) {
                let end = min(start + batch, records)
                try await context.transaction { tx in
                    for i in start..<end { try tx.insert(record(i), into: "items") }
                }
            }
        }
        let queued = try await context.queuedOperationCount()
        guard queued == records else { throw ValidationError("expected \(records) queued operations, found \(queued)") }
        try await store.close()
        return seconds
    }
}

/// 100,000 records through `SyncTable` into SQLite, against raw sqlite3 writing the same rows.
enum LocalWritesSQLite: BenchWorkload {
    static let name = "local-writes-sqlite"
    static let baseline = "raw-sqlite3"

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let store = try await SQLiteStore(path: directory.appendingPathComponent("bench.sqlite").path)
        return try await LocalWrites.throughSyncTable(store, records: records, batch: batch)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let path = directory.appendingPathComponent("bench.sqlite").path
        try await LocalWrites.emptySQLiteStore(at: path, defining: LocalWrites.schema)
        return try RawSQLiteBaseline(path: path).run(records: records, batch: batch)
    }
}

/// The bench never pushes; a call would be a bug in the bench.
struct UnusedRemote: RemoteStore {
    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        throw SyncError(.unsupported, "the benchmark does not push")
    }
    func pull(_ request: PullRequest) async throws -> PullPage {
        throw SyncError(.unsupported, "the benchmark does not pull")
    }
}

/// The baseline: the same record rows and queue rows, in the same transactions, into the same
/// tables and indexes, written with the sqlite3 C API and nothing else.
struct RawSQLiteBaseline {
    let path: String

    func run(records: Int, batch: Int) throws -> Double {
        let db = try RawSQLite.open(path, durable: true)
        defer { sqlite3_close_v2(db) }
        let item = try RawSQLite.prepare(db, """
            INSERT INTO "items" ("id", "version", "updatedAt", "deleted", "extra", "f_title", "f_n", "f_done", "f_note")
            VALUES (?1, NULL, NULL, 0, NULL, ?2, ?3, ?4, ?5)
            """)
        let operation = try RawSQLite.prepare(db, """
            INSERT INTO "__operations" ("id", "version", "updatedAt", "deleted", "extra", "f_sequence", "f_table",
              "f_itemId", "f_kind", "f_item", "f_baseVersion", "f_state", "f_attempts", "f_createdAt", "f_changedAt",
              "f_transaction", "f_sendId", "f_changedFields")
            VALUES (?1, NULL, NULL, 0, NULL, ?2, 'items', ?3, 'insert', ?4, NULL, 'pending', 0, ?5, ?5, ?6, ?1, ?7)
            """)
        defer { sqlite3_finalize(item); sqlite3_finalize(operation) }
        let transient = RawSQLite.transient
        let changed = ValueCodec.encode(Value.array(["done", "n", "note", "title"]))
        let cpu = MeasuredWindows.processCPUSeconds(), start = DispatchTime.now().uptimeNanoseconds
        var sequence: Int64 = 0
        for first in stride(from: 0, to: records, by: batch) {
            try RawSQLite.exec(db, "BEGIN IMMEDIATE")
            let transaction = UUID.random().uuidString
            let now = Timestamp.now().millisecondsSince1970
            for i in first..<min(first + batch, records) {
                let record = LocalWrites.record(i)
                sqlite3_bind_text(item, 1, record.id, -1, transient)
                sqlite3_bind_text(item, 2, record["title"].stringValue!, -1, transient)
                sqlite3_bind_int64(item, 3, record["n"].intValue!)
                sqlite3_bind_int64(item, 4, record["done"].boolValue! ? 1 : 0)
                sqlite3_bind_text(item, 5, record["note"].stringValue!, -1, transient)
                try RawSQLite.step(db, item)
                sequence += 1
                let encoded = ValueCodec.encode(Value.object(record.fields))
                sqlite3_bind_text(operation, 1, UUID.random().uuidString, -1, transient)
                sqlite3_bind_int64(operation, 2, sequence)
                sqlite3_bind_text(operation, 3, record.id, -1, transient)
                _ = encoded.withUnsafeBytes { sqlite3_bind_blob(operation, 4, $0.baseAddress, Int32($0.count), transient) }
                sqlite3_bind_int64(operation, 5, now)
                sqlite3_bind_text(operation, 6, transaction, -1, transient)
                _ = changed.withUnsafeBytes { sqlite3_bind_blob(operation, 7, $0.baseAddress, Int32($0.count), transient) }
                try RawSQLite.step(db, operation)
            }
            try RawSQLite.exec(db, "COMMIT")
        }
        return MeasuredWindows.shared.close(started: start, cpu: cpu)
    }

}
