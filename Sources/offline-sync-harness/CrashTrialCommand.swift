import ArgumentParser
import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP

/// `offline-sync-harness crash-trial-client`: the client side of the crash trials. It is meant to be
/// killed with SIGKILL at any moment and started again on the same store and log.
///
/// Each step inserts the record `<prefix>-<i>` and sets the record `<prefix>-counter` to
/// `i`, in one local transaction; once the transaction has returned, `i` is appended to
/// the acknowledgement log and the log is flushed to disk: from then on, the change was
/// acknowledged to the app and must reach the server exactly once. Every few steps it pushes
/// (a push may be under way when the kill comes). A restarted client resumes after the last
/// acknowledged step; with `--until-step`, it stops making steps there and keeps pushing
/// until killed. With `--sync`, each push is a full sync run of the table (a pull, paged by
/// `--pull-page-size`, then a push), so kills also land mid pull page. With `--drain`, it
/// makes no new changes: it pushes (or syncs) until the queue is empty, prints
/// `drained pending=<n> errors=<n> rows=<n>`, and with `--dump FILE` writes the local table,
/// one `<id> <n>` line per live record in id order, for the trial to compare with the server.
/// With `--attachments`, each new record also carries a file (``TrialAttachments``), and the
/// client checks every byte of every file it reads (a wrong one exits with status 3).
struct CrashTrialClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "crash-trial-client",
                                                    abstract: "Internal: the client of the crash trials.", shouldDisplay: false)

    @Option var store: String
    @Option var server: String
    @Option var prefix: String
    @Option var steps: Int
    @Option var acks: String
    @Option var pushEvery: Int = 5
    /// Makes no step at or past this one in this run: after it, the client only pushes, over
    /// and over, until it is killed (so a trial's kill never comes after the whole run).
    @Option var untilStep: Int?
    @Flag var drain = false
    /// Syncs (pull then push) instead of only pushing.
    @Flag var sync = false
    @Option var pullPageSize: Int = 500
    /// With `--drain`: where to write the local table.
    @Option var dump: String?
    /// Each step's record carries an attachment (``TrialAttachments``); a syncing client reads
    /// the other client's files as they arrive, and a drain reads every file, checking each byte.
    @Flag var attachments = false

    static let table = TableSchema("trial", fields: [FieldDefinition("n", .int)])

    func run() async throws {
        guard let token = ProcessInfo.processInfo.environment["OFFLINE_SYNC_TRIAL_TOKEN"] else {
            throw ValidationError("OFFLINE_SYNC_TRIAL_TOKEN must hold the bearer token")
        }
        let storeArguments = try StoreArguments.parse(["--store", store])
        let (location, adapter) = try StoreRegistry.builtIn.resolve(try storeArguments.url())
        let local = try await adapter.open(location, try storeArguments.options(for: location))
        let remote = HTTPRemoteStore(baseURL: server, configuration: .init(requestTimeout: .seconds(10), maxAttempts: 3), token: { token })
        let context = try await SyncContext(store: local, remote: remote, options: SyncOptions(pullPageSize: pullPageSize))
        try await context.defineTable(Self.table)
        let sync = self.sync
        let attachments = self.attachments, prefix = self.prefix
        @Sendable func exchange() async throws {
            if sync { try await context.sync(["trial"]) } else { _ = try await context.push() }
            if attachments, sync {
                // Another client's files, as an app opens them: a few per exchange.
                let others = try await context.table("trial").query().filter { !$0.id.hasPrefix("\(prefix)-") }
                var fresh: [Record] = []
                for row in others {
                    if let file = try Attachment(value: row["file"]), try await context.attachmentState(file) == .remote { fresh.append(row) }
                }
                _ = try await TrialAttachments.check(fresh, context: context, strict: false, limit: 3)
            }
        }

        if drain {
            try await drainAndReport(context: context, local: local, exchange: exchange)
            return
        }

        let log = URL(fileURLWithPath: acks)
        if !FileManager.default.fileExists(atPath: log.path) { _ = FileManager.default.createFile(atPath: log.path, contents: nil) }
        let acknowledged = String(decoding: try Data(contentsOf: log), as: UTF8.self).split(separator: "\n").compactMap { Int($0) }
        let handle = try FileHandle(forWritingTo: log)
        try handle.seekToEnd()
        let start = (acknowledged.max() ?? -1) + 1
        let end = min(steps, untilStep ?? steps)
        for step in start..<max(start, end) {
            var fields: [String: Value] = ["n": .int(Int64(step))]
            if attachments, try await context.table("trial").get("\(prefix)-\(step)") == nil {
                let file = try await context.addAttachment(TrialAttachments.bytes(prefix: prefix, step: step), contentType: "application/octet-stream")
                fields["file"] = file.value
            }
            let inserted = fields
            try await context.transaction { txn in
                // A step that committed but was killed before its acknowledgement is done again
                // over itself: the insert exists, so only the counter is set (to the same value).
                if try txn.record(in: "trial", id: "\(prefix)-\(step)") == nil {
                    _ = try txn.insert(Record(id: "\(prefix)-\(step)", fields: inserted), into: "trial")
                }
                _ = try txn.save(Record(id: "\(prefix)-counter", fields: ["n": .int(Int64(step))]), in: "trial")
            }
            try handle.write(contentsOf: Data("\(step)\n".utf8))
            try handle.synchronize()
            if step % pushEvery == pushEvery - 1 {
                do { try await exchange() } catch let error as SyncError where error.code == .transient {}
            }
        }
        try handle.close()
        if end < steps {
            while true {
                do { try await exchange() } catch let error as SyncError where error.code == .transient {}
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        print("done")
        try await local.close()
    }

    /// `--drain`: pushes (or syncs) until the queue is empty, writes `--dump`, checks every
    /// file with `--attachments`, prints the `drained` line and closes the store.
    private func drainAndReport(context: SyncContext, local: any LocalStore,
                                exchange: @Sendable () async throws -> Void) async throws {
        var rounds = 0
        var done = false
        while rounds < 50 {
            if done, try await context.queuedOperationCount() == 0 { break }
            rounds += 1
            do {
                try await exchange()
                done = true
            } catch let error as SyncError where error.code == .transient {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        let pending = try await context.queuedOperationCount()
        let errors = try await context.operationErrors().count
        let rows = try await local.read { txn in try txn.records(in: "trial", matching: .all) }
            .filter { !$0.deleted }.sorted { $0.id < $1.id }
        if let dump {
            let lines = rows.map { "\($0.id) \($0["n"].intValue.map(String.init) ?? "-")\n" }.joined()
            try Data(lines.utf8).write(to: URL(fileURLWithPath: dump))
        }
        var verified = ""
        if attachments {
            let (checked, unavailable) = try await TrialAttachments.check(rows, context: context, strict: true)
            verified = " verified=\(checked) unavailable=\(unavailable)"
        }
        print("drained pending=\(pending) errors=\(errors) rows=\(rows.count)\(verified)")
        try await local.close()
    }
}
