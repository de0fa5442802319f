import ArgumentParser
import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite

/// `attachment-resume`: the 256 MiB upload's process killed (SIGKILL) once half the file is
/// on the server, then started again on the same store. Counted at the server
/// (`offline_sync_attachment_bytes_total`): the bytes the restarted process sent, against a
/// client without resumption, which sends the whole file again (`ratio`; goal ≤ 0.55). The
/// seconds are the restarted process's.
enum AttachmentResume: BenchWorkload {
    static let name = "attachment-resume"
    static let baseline = "upload-again-from-zero"
    static var fixedRecords: Int? { 1 }
    static var ratioMetric: String? { "bytesSentAfterRestart" }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let file = directory.appendingPathComponent("photo.bin")
        _ = try AttachmentBench.makeFile(at: file, size: AttachmentBench.size, seed: 3)
        let (server, secret, adminKey) = try AttachmentBench.startServer(directory: directory)
        defer { _ = server.stop() }
        let store = directory.appendingPathComponent("client.sqlite")
        let killed = try runChild(store: store, file: file, server: server, secret: secret, killAt: 0.5)
        guard killed.exitedBySignal, killed.terminationStatus == SIGKILL else {
            throw SyncError(.storageFailure, "the first upload process was not killed (status \(killed.terminationStatus))")
        }
        let before = try await AttachmentBench.bytesReceived(server, adminKey: adminKey)
        var finished: ChildProcess?
        let seconds = try await LocalWrites.measure {
            finished = try runChild(store: store, file: file, server: server, secret: secret, killAt: nil)
        }
        guard finished?.terminationStatus == 0, finished?.exitedBySignal == false else {
            throw SyncError(.storageFailure, "the restarted upload process failed (status \(finished?.terminationStatus ?? -1))")
        }
        let after = try await AttachmentBench.bytesReceived(server, adminKey: adminKey)
        BenchMetrics.shared.set("bytesSentBeforeKill", Double(before))
        BenchMetrics.shared.set("bytesSentAfterRestart", Double(after - before))
        BenchMetrics.shared.set("bytesSentInAll", Double(after))
        AttachmentBench.noteServerMemory(server)
        return seconds
    }

    /// A client that cannot resume sends the whole file again after its restart.
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentBench.plainUpload(directory: directory, seed: 3) { server, adminKey in
            BenchMetrics.shared.set("bytesSentAfterRestart", Double(try await AttachmentBench.bytesReceived(server, adminKey: adminKey)))
        }
    }

    /// Runs `attachment-upload-child` to its end (or its kill) and returns the process.
    static func runChild(store: URL, file: URL, server: ServerProcess, secret: String, killAt: Double?) throws -> ChildProcess {
        var environment = ProcessInfo.processInfo.environment
        environment["OFFLINE_SYNC_TOKEN_SECRET"] = secret
        let process = try ChildProcess(executable: URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path,
                                       arguments: ["attachment-upload-child", "--store", store.path, "--file", file.path,
                                                   "--server", server.baseURL] + (killAt.map { ["--kill-at", String($0)] } ?? []),
                                       environment: environment)
        process.waitUntilExit()
        return process
    }
}

/// `offline-sync-harness attachment-upload-child`: the upload process of `attachment-resume`.
/// On a store without the record `p1`, it adds the file as an attachment and writes `p1`
/// referencing it; then it pushes. With `--kill-at F`, it kills itself (SIGKILL) as soon as
/// the server has confirmed F of the file; without, it exits 0 when the push is done.
struct AttachmentUploadChildCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "attachment-upload-child",
                                                    abstract: "Internal: the upload process of attachment-resume.", shouldDisplay: false)

    @Option var store: String
    @Option var file: String
    @Option var server: String
    @Option var killAt: Double?

    func run() async throws {
        guard let secret = ProcessInfo.processInfo.environment["OFFLINE_SYNC_TOKEN_SECRET"] else {
            throw ValidationError("OFFLINE_SYNC_TOKEN_SECRET is not set")
        }
        let token = try await TokenAuthority(secret: Array(secret.utf8)).mint(identity: SyncBench.identity)
        let context = try await SyncContext(store: try await SQLiteStore(path: store),
                                            remote: HTTPRemoteStore(baseURL: server) { token })
        try await context.defineTable(AttachmentBench.schema)
        if try await context.table("photos").get("p1") == nil {
            let attachment = try await context.addAttachment(contentsOf: URL(fileURLWithPath: file), contentType: "application/octet-stream")
            try await context.table("photos").insert(Record(id: "p1", fields: ["file": attachment.value]))
        }
        if let killAt {
            let events = context.events()
            Task {
                for await event in events {
                    if case let .attachmentProgress(_, .upload, done, total) = event, Double(done) >= killAt * Double(total) {
                        kill(getpid(), SIGKILL)
                    }
                }
            }
        }
        let summary = try await context.push()
        guard summary.applied == 1 else { throw ValidationError("the push applied \(summary.applied)") }
        try await context.close()
    }
}

/// `attachment-small`: 1,000 records with a 50 KiB photo each, pushed by one device and
/// pulled with `.all` prefetch by a second, against the same records carrying the bytes
/// inline in a field. Measured: the push and the pull (the photos are written beforehand).
/// Goal: ≤ 1.5× the inline records' time.
enum AttachmentSmall: BenchWorkload {
    static let name = "attachment-small"
    static let baseline = "bytes-inline"
    static let count = 1000
    static let photoSize = 50 << 10
    static var fixedRecords: Int? { count }

    static func photo(_ index: Int) -> [UInt8] {
        var random = SplitMix64(seed: UInt64(index) &+ 1000)
        return (0..<photoSize / 8).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } }
    }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, inline: false)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, inline: true)
    }

    static func run(directory: URL, inline: Bool) async throws -> Double {
        let (server, secret, _) = try AttachmentBench.startServer(directory: directory)
        defer { _ = server.stop() }
        let writer = try await AttachmentBench.client("writer", directory: directory, server: server, secret: secret)
        var options = SyncOptions()
        options.attachments.prefetch = ["photos": .all]
        let reader = try await AttachmentBench.client("reader", directory: directory, server: server, secret: secret, options: options)
        for start in stride(from: 0, to: count, by: 100) {
            var made: [Value] = []
            for index in start..<start + 100 {
                let bytes = photo(index)
                made.append(inline ? .bytes(bytes) : try await writer.addAttachment(bytes, contentType: "image/jpeg").value)
            }
            let values = made
            try await writer.transaction { txn in
                for (offset, value) in values.enumerated() {
                    try txn.insert(Record(id: String(format: "p%04d", start + offset), fields: ["title": "photo", "photo": value]), into: "photos")
                }
            }
        }
        var pushed = 0, pulled = 0
        var pushSeconds = 0.0
        let seconds = try await LocalWrites.measure {
            let start = ContinuousClock.now
            pushed = try await writer.push().applied
            pushSeconds = (ContinuousClock.now - start) / .seconds(1)
            pulled = try await reader.table("photos").pull().received
        }
        BenchMetrics.shared.set("pushSeconds", pushSeconds)
        BenchMetrics.shared.set("pullSeconds", seconds - pushSeconds)
        guard pushed == count, pulled == count else { throw SyncError(.storageFailure, "pushed \(pushed), pulled \(pulled) of \(count)") }
        if !inline {
            let rows = try await reader.table("photos").query()
            for row in rows {
                guard let reference = try OfflineSync.Attachment(value: row["photo"]),
                      try await reader.attachmentState(reference) == .local else {
                    throw SyncError(.storageFailure, "photo of \(row.id) was not prefetched")
                }
            }
        }
        AttachmentBench.noteServerMemory(server)
        try await writer.close()
        try await reader.close()
        return seconds
    }
}
