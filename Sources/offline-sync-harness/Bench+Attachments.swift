import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncConformance
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncURLSession

/// What the attachment workloads share: a server process with an admin key (its metrics
/// count the attachment bytes it received), big files written once per run, plain requests
/// for the baselines, and the server's peak memory.
enum AttachmentBench {
    /// The big file's size: 256 MiB.
    static let size = 256 << 20
    static let schema = TableSchema("photos", fields: [FieldDefinition("title", .string)])

    /// Starts `offline-sync serve` over a fresh SQLite store in `directory/server`, with an
    /// admin key for `/metrics`; returns it, the token secret and the admin key.
    static func startServer(directory: URL) throws -> (server: ServerProcess, secret: String, adminKey: String) {
        let data = directory.appendingPathComponent("server")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let secret = SyncBench.secret(), adminKey = SyncBench.secret()
        let server = try ServerProcess.start(data: data, secret: secret, environment: ["OFFLINE_SYNC_ADMIN_KEY": adminKey])
        return (server, secret, adminKey)
    }

    static func token(_ secret: String) async throws -> String {
        try await TokenAuthority(secret: Array(secret.utf8)).mint(identity: SyncBench.identity)
    }

    /// Writes `size` bytes of a fixed pseudo-random sequence (nothing compresses it) to
    /// `url`, a MiB at a time, and flushes it to the disk, as an app's photo long on the device
    /// would be (so its write-back does not land in the measured time); returns the reference
    /// it makes.
    static func makeFile(at url: URL, size: Int, seed: UInt64) throws -> OfflineSync.Attachment {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw SyncError(.storageFailure, "cannot create \(url.path)") }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var random = SplitMix64(seed: seed)
        var hasher = AttachmentHasher()
        var written = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while written < size {
            let count = min(chunk.count, size - written)
            chunk.withUnsafeMutableBytes { buffer in
                for word in stride(from: 0, to: count, by: 8) {
                    var value = random.next()
                    withUnsafeBytes(of: &value) { bytes in
                        for byte in 0..<min(8, count - word) { buffer[word + byte] = bytes[byte] }
                    }
                }
            }
            let piece = chunk[..<count]
            piece.withUnsafeBytes { hasher.update($0) }
            try handle.write(contentsOf: piece)
            written += count
        }
        try handle.synchronize()
        return try OfflineSync.Attachment(sha256: hasher.finish(), size: Int64(size), contentType: "application/octet-stream")
    }

    /// The baseline upload: the file in one plain request (the attachment route, the whole
    /// body, `Upload-Complete: ?1`), its body streamed from the file; with `hashing`, each
    /// chunk hashed (SHA-256) as it is read, and the digest checked at the end, as a client
    /// that verifies what it sends would.
    static func postWhole(_ file: URL, as attachment: OfflineSync.Attachment, to server: ServerProcess, token: String,
                          hashing: Bool = false) async throws {
        var request = HTTPClientRequest(url: server.baseURL + "/v1/attachments/\(attachment.sha256)")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Upload-Draft-Interop-Version", value: "6")
        request.headers.add(name: "Upload-Complete", value: "?1")
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.body = .stream(FileChunks(url: file, expectedSHA256: hashing ? attachment.sha256 : nil), length: .known(attachment.size))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(600))
        _ = try await response.body.collect(upTo: 1 << 20)
        guard (200...204).contains(response.status.code) else {
            throw SyncError(.storageFailure, "the plain upload answered \(response.status.code)")
        }
    }

    /// The baseline of the upload workloads, measured: a fresh file of `seed` sent in one
    /// plain request (``postWhole(_:as:to:token:hashing:)``) to a fresh server, which `after`
    /// may read before it stops.
    static func plainUpload(directory: URL, seed: UInt64, hashing: Bool = false,
                            after: (ServerProcess, _ adminKey: String) async throws -> Void) async throws -> Double {
        let file = directory.appendingPathComponent("photo.bin")
        let attachment = try makeFile(at: file, size: size, seed: seed)
        let (server, secret, adminKey) = try startServer(directory: directory)
        defer { _ = server.stop() }
        let token = try await token(secret)
        let seconds = try await LocalWrites.measure { try await postWhole(file, as: attachment, to: server, token: token, hashing: hashing) }
        try await after(server, adminKey)
        return seconds
    }

    /// The baseline download: one plain GET of the file, written to `destination`; with
    /// `hashing`, each buffer hashed (SHA-256) as it arrives, and the digest checked at the
    /// end, as a client that verifies what it receives would.
    static func getWhole(_ attachment: OfflineSync.Attachment, from server: ServerProcess, token: String, to destination: URL,
                         hashing: Bool = false) async throws {
        var request = HTTPClientRequest(url: server.baseURL + "/v1/attachments/\(attachment.sha256)")
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(600))
        guard response.status.code == 200 else { throw SyncError(.storageFailure, "the plain download answered \(response.status.code)") }
        guard FileManager.default.createFile(atPath: destination.path, contents: nil) else {
            throw SyncError(.storageFailure, "cannot create \(destination.path)")
        }
        let handle = try FileHandle(forWritingTo: destination)
        defer { try? handle.close() }
        var received: Int64 = 0
        var hasher = hashing ? AttachmentHasher() : nil
        for try await buffer in response.body {
            if hasher != nil { buffer.withUnsafeReadableBytes { hasher!.update($0) } }
            try handle.write(contentsOf: buffer.readableBytesView)
            received += Int64(buffer.readableBytes)
        }
        guard received == attachment.size else { throw SyncError(.storageFailure, "the plain download brought \(received) bytes") }
        if let hasher, hasher.finish() != attachment.sha256 {
            throw SyncError(.storageFailure, "the plain download's bytes do not hash to \(attachment.sha256)")
        }
    }

    /// Attachment bytes the server has received so far (its `offline_sync_attachment_bytes_total`).
    static func bytesReceived(_ server: ServerProcess, adminKey: String) async throws -> Int64 {
        var request = HTTPClientRequest(url: server.baseURL + "/metrics")
        request.headers.add(name: "X-Admin-Key", value: adminKey)
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let text = String(buffer: try await response.body.collect(upTo: 8 << 20))
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("offline_sync_attachment_bytes_total{direction=\"received\"}") }),
              let value = line.split(separator: " ").last.flatMap({ Double($0) }) else {
            throw SyncError(.storageFailure, "the server's metrics have no attachment bytes")
        }
        return Int64(value)
    }

    /// Notes the server's peak memory in the results (`serverPeakRSSMiB`).
    static func noteServerMemory(_ server: ServerProcess) {
        if let peak = server.peakRSSBytes() { BenchMetrics.shared.set("serverPeakRSSMiB", Double(peak) / 1_048_576) }
    }

    /// A client over SQLite in `directory/<name>.sqlite`, on the bench identity, with the
    /// photos table, through `remote` (by default an `HTTPRemoteStore`, AsyncHTTPClient's).
    static func client(_ name: String, directory: URL, server: ServerProcess, secret: String,
                       options: SyncOptions = SyncOptions(), remote: (any RemoteStore)? = nil) async throws -> SyncContext {
        let store = try await SQLiteStore(path: directory.appendingPathComponent("\(name).sqlite").path)
        let through: any RemoteStore
        if let remote { through = remote } else { through = try await SyncBench.remote(server, secret: secret) }
        let context = try await SyncContext(store: store, remote: through, options: options)
        try await context.defineTable(schema)
        return context
    }

    /// A `URLSessionRemoteStore` for the bench identity over `transport` (Foundation's
    /// URLSession: on Linux, libcurl through FoundationNetworking).
    static func urlSessionRemote(_ server: ServerProcess, secret: String, transport: URLSessionTransport) async throws -> URLSessionRemoteStore {
        let token = try await token(secret)
        return URLSessionRemoteStore(baseURL: server.baseURL, transport: transport, token: { token })
    }

    /// Writes `file` as an attachment of a new record and pushes until the server has
    /// acknowledged the record.
    static func addAndPush(_ file: URL, on context: SyncContext, id: String) async throws -> OfflineSync.Attachment {
        let start = ContinuousClock.now
        let attachment = try await context.addAttachment(contentsOf: file, contentType: "application/octet-stream")
        try await context.table("photos").insert(Record(id: id, fields: ["title": "big", "file": attachment.value]))
        BenchMetrics.shared.set("localWriteSeconds", (ContinuousClock.now - start) / .seconds(1))
        let summary = try await context.push()
        guard summary.applied == 1, try await context.queuedOperationCount() == 0 else {
            throw SyncError(.storageFailure, "the record's push applied \(summary.applied)")
        }
        return attachment
    }
}

/// A file's bytes, a MiB at a time, as a request body; with `expectedSHA256`, hashed as
/// they are read, the sequence throwing at its end if they do not hash to it.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let url: URL
    var expectedSHA256: String?

    struct AsyncIterator: AsyncIteratorProtocol {
        let handle: FileHandle?
        let expected: String?
        var hasher: AttachmentHasher?

        mutating func next() async throws -> ByteBuffer? {
            guard let handle, let data = try handle.read(upToCount: 1 << 20), !data.isEmpty else {
                try handle?.close()
                if let expected, hasher?.finish() != expected {
                    throw SyncError(.storageFailure, "the file's bytes do not hash to \(expected)")
                }
                return nil
            }
            if hasher != nil { data.withUnsafeBytes { hasher!.update($0) } }
            return ByteBuffer(bytes: data)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(handle: FileHandle(forReadingAtPath: url.path), expected: expectedSHA256,
                      hasher: expectedSHA256 == nil ? nil : AttachmentHasher())
    }
}

/// `attachment-upload`: a 256 MiB file from the local write (`addAttachment(contentsOf:)`)
/// until the server acknowledges its record, against the same bytes in one plain request
/// through the same server. Goal: ≥ 0.8× the plain request's throughput, client and server
/// peak RSS ≤ 64 MiB each.
enum AttachmentUpload: BenchWorkload {
    static let name = "attachment-upload"
    static let baseline = "one-plain-request"
    static var fixedRecords: Int? { 1 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, overURLSession: false)
    }

    /// Our side, through `HTTPRemoteStore` or, `overURLSession`, `URLSessionRemoteStore`.
    static func run(directory: URL, overURLSession: Bool) async throws -> Double {
        let file = directory.appendingPathComponent("photo.bin")
        _ = try AttachmentBench.makeFile(at: file, size: AttachmentBench.size, seed: 1)
        let (server, secret, _) = try AttachmentBench.startServer(directory: directory)
        defer { _ = server.stop() }
        var remote: (any RemoteStore)?
        if overURLSession { remote = try await AttachmentBench.urlSessionRemote(server, secret: secret, transport: URLSessionTransport()) }
        let context = try await AttachmentBench.client("client", directory: directory, server: server, secret: secret, remote: remote)
        let seconds = try await LocalWrites.measure { _ = try await AttachmentBench.addAndPush(file, on: context, id: "p1") }
        AttachmentBench.noteServerMemory(server)
        try await context.close()
        return seconds
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentBench.plainUpload(directory: directory, seed: 1) { server, _ in AttachmentBench.noteServerMemory(server) }
    }
}

/// `attachment-download`: that file fetched on first access (`attachmentFileURL`) by a
/// second device that pulled its record, against one plain GET of it to a file. Goal: ≥ 0.8×
/// the plain request's throughput, peak RSS ≤ 64 MiB each.
enum AttachmentDownload: BenchWorkload {
    static let name = "attachment-download"
    static let baseline = "one-plain-request"
    static var fixedRecords: Int? { 1 }

    /// A server holding the file and a record referencing it (set up, not measured).
    static func prepared(_ directory: URL) async throws -> (ServerProcess, String, OfflineSync.Attachment) {
        let file = directory.appendingPathComponent("photo.bin")
        let attachment = try AttachmentBench.makeFile(at: file, size: AttachmentBench.size, seed: 2)
        let (server, secret, _) = try AttachmentBench.startServer(directory: directory)
        try await AttachmentBench.postWhole(file, as: attachment, to: server, token: try await AttachmentBench.token(secret))
        try FileManager.default.removeItem(at: file)
        let remote = try await SyncBench.remote(server, secret: secret)
        let result = try await remote.push([PushOperation(id: "op-1", table: "photos", itemId: "p1", kind: .insert,
                                                          item: Record(id: "p1", fields: ["file": attachment.value]), baseVersion: nil)])
        guard case .applied = result.first?.outcome else { throw SyncError(.storageFailure, "the record was not stored: \(result)") }
        return (server, secret, attachment)
    }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, overURLSession: false)
    }

    /// Our side, through `HTTPRemoteStore` or, `overURLSession`, `URLSessionRemoteStore`
    /// (which also notes the most bytes its transport ever held unread,
    /// `transportPeakBufferedMiB`).
    static func run(directory: URL, overURLSession: Bool) async throws -> Double {
        let (server, secret, attachment) = try await prepared(directory)
        defer { _ = server.stop() }
        // Made only for the URLSession side: the other never starts a session.
        let transport = overURLSession ? URLSessionTransport() : nil
        var remote: (any RemoteStore)?
        if let transport { remote = try await AttachmentBench.urlSessionRemote(server, secret: secret, transport: transport) }
        let context = try await AttachmentBench.client("second", directory: directory, server: server, secret: secret, remote: remote)
        try await context.table("photos").pull()
        var url: URL?
        let seconds = try await LocalWrites.measure { url = try await context.attachmentFileURL(attachment) }
        let size = try url.flatMap { try FileManager.default.attributesOfItem(atPath: $0.path)[.size] as? Int64 }
        guard size == attachment.size else { throw SyncError(.storageFailure, "the downloaded file has \(size ?? -1) bytes") }
        if let transport { BenchMetrics.shared.set("transportPeakBufferedMiB", Double(transport.peakBufferedBytes) / 1_048_576) }
        AttachmentBench.noteServerMemory(server)
        try await context.close()
        return seconds
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await plain(directory: directory, hashing: false)
    }

    /// The baseline: one plain GET of the file to a file, hashed as it arrives with `hashing`.
    static func plain(directory: URL, hashing: Bool) async throws -> Double {
        let (server, secret, attachment) = try await prepared(directory)
        defer { _ = server.stop() }
        let token = try await AttachmentBench.token(secret)
        let destination = directory.appendingPathComponent("downloaded.bin")
        let seconds = try await LocalWrites.measure {
            try await AttachmentBench.getWhole(attachment, from: server, token: token, to: destination, hashing: hashing)
        }
        AttachmentBench.noteServerMemory(server)
        return seconds
    }
}

/// `attachment-upload-urlsession`: attachment-upload through `URLSessionRemoteStore`, whose
/// transport sends a body whole (4 MiB per request), against the same plain request. Goal:
/// client peak RSS ≤ 64 MiB, as through AsyncHTTPClient.
enum AttachmentUploadURLSession: BenchWorkload {
    static let name = "attachment-upload-urlsession"
    static let baseline = "one-plain-request"
    static var fixedRecords: Int? { 1 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentUpload.run(directory: directory, overURLSession: true)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentUpload.raw(directory: directory, records: records, batch: batch)
    }
}

/// `attachment-download-urlsession`: attachment-download through `URLSessionRemoteStore`,
/// whose transport holds what arrives until it is read and so asks for the file 4 MiB at a
/// time, against the same plain GET. Goal: client peak RSS ≤ 64 MiB, as through
/// AsyncHTTPClient; `transportPeakBufferedMiB` is the most the transport held unread.
enum AttachmentDownloadURLSession: BenchWorkload {
    static let name = "attachment-download-urlsession"
    static let baseline = "one-plain-request"
    static var fixedRecords: Int? { 1 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentDownload.run(directory: directory, overURLSession: true)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentDownload.raw(directory: directory, records: records, batch: batch)
    }
}

// The same four transfers against baselines that hash as they go: a client verifies a file's
// SHA-256 before an app sees it (and before it sends it), so the fair plain request hashes
// its bytes too, on the thread that moves them.

/// `attachment-upload-vs-hash`: attachment-upload against one plain request whose body is
/// hashed as it is read from the file. Goal: ≥ 0.85× its throughput.
enum AttachmentUploadVsHash: BenchWorkload {
    static let name = "attachment-upload-vs-hash"
    static let baseline = "one-plain-request-hashed"
    static var fixedRecords: Int? { 1 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentUpload.run(directory: directory, overURLSession: false)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentBench.plainUpload(directory: directory, seed: 1, hashing: true) { server, _ in
            AttachmentBench.noteServerMemory(server)
        }
    }
}

/// `attachment-download-vs-hash`: attachment-download against one plain GET hashed as it
/// arrives. Goal: ≥ 0.85× its throughput.
enum AttachmentDownloadVsHash: BenchWorkload {
    static let name = "attachment-download-vs-hash"
    static let baseline = "one-plain-request-hashed"
    static var fixedRecords: Int? { 1 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentDownload.run(directory: directory, overURLSession: false)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentDownload.plain(directory: directory, hashing: true)
    }
}

/// `attachment-upload-urlsession-vs-hash`: attachment-upload-urlsession against the hashed
/// plain request.
enum AttachmentUploadURLSessionVsHash: BenchWorkload {
    static let name = "attachment-upload-urlsession-vs-hash"
    static let baseline = "one-plain-request-hashed"
    static var fixedRecords: Int? { 1 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentUpload.run(directory: directory, overURLSession: true)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentUploadVsHash.raw(directory: directory, records: records, batch: batch)
    }
}

/// `attachment-download-urlsession-vs-hash`: attachment-download-urlsession against the
/// hashed plain GET.
enum AttachmentDownloadURLSessionVsHash: BenchWorkload {
    static let name = "attachment-download-urlsession-vs-hash"
    static let baseline = "one-plain-request-hashed"
    static var fixedRecords: Int? { 1 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentDownload.run(directory: directory, overURLSession: true)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await AttachmentDownload.plain(directory: directory, hashing: true)
    }
}
