import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import OfflineSyncURLSession
import Synchronization
import Testing

/// Swift Testing has an `Attachment` type of its own.
private typealias Attachment = OfflineSync.Attachment

/// Every attachment transfer is bounded in memory and can be stopped: a download over
/// URLSession (which cannot hold a response back) asks for one range at a time; a cancelled
/// caller returns at once, a download nobody waits for stops, and `close()` ends them all.
@Suite("Attachment transfers: bounded memory, cancellation, close", .timeLimit(.minutes(3)))
struct AttachmentTransferBoundsTests {
    /// `count` bytes of a sequence that repeats only every 1,000,003 bytes, so a range taken
    /// from the wrong place never matches.
    static func bytes(_ count: Int) -> [UInt8] {
        let period = (0..<1_000_003).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count { bytes += period.prefix(count - bytes.count) }
        return bytes
    }

    static func reference(_ bytes: [UInt8]) throws -> OfflineSync.Attachment {
        try Attachment(sha256: sha256Hex(bytes), size: Int64(bytes.count), contentType: "application/octet-stream")
    }

    /// Stores `bytes` on the live server for alice (over AsyncHTTPClient, streamed a MiB at a time).
    static func store(_ bytes: [UInt8], on live: LiveServer) async throws -> OfflineSync.Attachment {
        let reference = try Self.reference(bytes)
        let state = try await live.remote("alice").appendAttachment(reference, offset: 0, length: reference.size, complete: true) { at, count in
            Array(bytes[Int(at)..<Int(at) + count])
        }
        #expect(state.complete)
        return reference
    }

    // MARK: Memory

    // Against the old transport the peak is most of the file: one GET for all of it, which
    // URLSession pushes into the exchange as fast as the loopback carries it.
    @Test("a download over URLSession larger than its range, read slowly, never has more than one range waiting in the transport")
    func boundedOverURLSession() async throws {
        try await LiveServer.with { live in
            let file = Self.bytes(20 << 20)
            let reference = try await Self.store(file, on: live)
            #expect(try await live.remote("alice").native.attachmentDownloadWindow == nil,
                    "AsyncHTTPClient reads a body with back-pressure: one request for the rest")
            let transport = URLSessionTransport()
            let token = try await live.token("alice")
            let remote = URLSessionRemoteStore(baseURL: live.baseURL, transport: transport) { token }
            let window = try #require(remote.native.attachmentDownloadWindow)
            let received = Box<[UInt8]>([])
            let found = try await remote.readAttachment(reference, from: 0) { piece in
                let (before, after) = received.withLock { bytes -> (Int, Int) in
                    let before = bytes.count
                    bytes += piece
                    return (before, bytes.count)
                }
                // Slower than the network, as the disk and the hash behind a download can be.
                if before >> 20 != after >> 20 { try await Task.sleep(for: .milliseconds(25)) }
            }
            #expect(found)
            #expect(received.value.count == file.count)
            #expect(sha256Hex(received.value) == reference.sha256, "every range came from its place")
            let peak = transport.peakBufferedBytes
            #expect(peak > 0, "the reader fell behind the network")
            #expect(peak <= Int(window), "at most one range waited unread: \(peak) bytes, a range is \(window)")
            #expect(transport.bufferedBytes == 0)
            #expect(transport.runningRequests == 0)
        }
    }

    // The old remote asked for the rest of the file by hash alone: a size that differs was
    // found only once every byte had arrived (by the context's hash check), never by the remote.
    @Test("every answer must agree with the reference's size: another size is attachmentDamaged before any byte is handed over")
    func sizeChecked() async throws {
        try await LiveServer.with { live in
            let reference = try await Self.store(Self.bytes(100_000), on: live)
            let wrong = try Attachment(sha256: reference.sha256, size: reference.size + 1, contentType: reference.contentType)
            func check(_ remote: any AttachmentRemote) async {
                let handed = Box(0)
                let code = await syncErrorCode {
                    _ = try await remote.readAttachment(wrong, from: 0) { piece in handed.withLock { $0 += piece.count } }
                }
                #expect(code == .attachmentDamaged, "\(type(of: remote))")
                #expect(handed.value == 0, "\(type(of: remote))")
            }
            let token = try await live.token("alice")
            await check(URLSessionRemoteStore(baseURL: live.baseURL, transport: URLSessionTransport()) { token })
            let overAsyncHTTPClient = try await live.remote("alice")
            await check(overAsyncHTTPClient)
        }
    }

    @Test("Content-Range fields: a range, an unsatisfied range, and what is refused", arguments: [
        ("bytes 0-1/10", ContentRange(range: 0...1, complete: 10)),
        (" BYTES 4194304-8388607/20971520 ", ContentRange(range: 4_194_304...8_388_607, complete: 20_971_520)),
        ("bytes */0", ContentRange(range: nil, complete: 0)),
        ("bytes 5-2/10", nil), ("bytes 0-10/10", nil), ("bytes 0-1/*", nil), ("items 0-1/10", nil),
        ("bytes 0-1", nil), ("bytes -1-2/10", nil), ("bytes 0-1/1234567890123456789", nil),
    ] as [(String, ContentRange?)])
    func contentRange(field: String, expected: ContentRange?) {
        #expect(ContentRange(field) == expected)
    }

    // MARK: Servers and proxies that do not honour Range (plain sockets)

    /// A reference to `size` bytes whose hash nothing here checks (the remote reads; only a
    /// context checks the hash).
    static func unchecked(size: Int) throws -> OfflineSync.Attachment {
        try Attachment(sha256: String(repeating: "ab", count: 32), size: Int64(size), contentType: "application/octet-stream")
    }

    // Against the old remote, which took a 200 to its first range for the whole file: it read
    // all 64 MiB, and the transport held most of them unread behind the slow reader.
    @Test("over URLSession, a 200 with a whole file larger than the range asked for is refused (rejected) before a byte is handed over; what waits unread stays under the transport's cap")
    func wholeFileForARangeRefused() async throws {
        let size = 64 << 20
        let server = try RawFileServer(size: size, answer: .whole, content: RawFileServer.pattern)
        defer { server.stop() }
        let transport = URLSessionTransport()
        let remote = URLSessionRemoteStore(baseURL: "http://127.0.0.1:\(server.port)", transport: transport) { "token" }
        let reference = try Self.unchecked(size: size)
        let handed = Box(0)
        let error = await syncError {
            _ = try await remote.readAttachment(reference, from: 0) { piece in
                handed.withLock { $0 += piece.count }
                // Slower than the network, as the disk and the hash behind a download can be.
                try await Task.sleep(for: .milliseconds(25))
            }
        }
        #expect(error?.code == .rejected, "\(String(describing: error))")
        #expect(handed.value == 0)
        #expect(server.requests.first?.lowercased().contains("range: bytes=0-4194303") == true, "\(server.requests)")
        #expect(transport.peakBufferedBytes <= URLSessionTransport.maxUnreadBytes, "\(transport.peakBufferedBytes) bytes waited unread")
        #expect(await Self.ends(transport), "the request was cancelled: \(transport.runningRequests) still running")
        #expect(transport.bufferedBytes == 0)
    }

    @Test("through a context over URLSession, a download a server answers with a whole file larger than a range fails typed, and no file takes the hash")
    func wholeFileForARangeStoresNothing() async throws {
        let size = 64 << 20
        let server = try RawFileServer(size: size, answer: .whole, content: RawFileServer.pattern)
        defer { server.stop() }
        try await withTemporaryDirectory { directory in
            let transport = URLSessionTransport()
            let store = try await SQLiteStore(path: directory.appendingPathComponent("c.sqlite").path)
            let context = try await SyncContext(store: store, remote: URLSessionRemoteStore(baseURL: "http://127.0.0.1:\(server.port)",
                                                                                              transport: transport) { "token" })
            let reference = try Self.unchecked(size: size)
            let code = await syncErrorCode { _ = try await context.attachmentData(reference) }
            #expect(code == .rejected)
            #expect(try store.attachmentFiles?.size(of: reference.sha256) == nil, "nothing was stored as the file")
            #expect(transport.peakBufferedBytes <= URLSessionTransport.maxUnreadBytes, "\(transport.peakBufferedBytes) bytes waited unread")
            try await context.close()
        }
    }

    // Against the old transport every chunk was kept: the reader, slower than the network,
    // came to its range's end only after tens of MiB had piled up unread behind it.
    @Test("over URLSession, a 206 that goes on past its range faster than the reader reads is cut at the transport's cap, and the download fails typed")
    func overlongRangeCut() async throws {
        let size = 64 << 20
        let server = try RawFileServer(size: size, answer: .overlong(extra: 256 << 20), content: RawFileServer.pattern)
        defer { server.stop() }
        let transport = URLSessionTransport()
        let remote = URLSessionRemoteStore(baseURL: "http://127.0.0.1:\(server.port)", transport: transport) { "token" }
        let reference = try Self.unchecked(size: size)
        let handed = Box(0)
        let error = await syncError {
            _ = try await remote.readAttachment(reference, from: 0) { piece in
                handed.withLock { $0 += piece.count }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        // Cut by the transport (the answer broke off: transient); or, had the reader come to the
        // range's end first, refused by the remote.
        #expect(error?.code == .transient || error?.code == .attachmentDamaged, "\(String(describing: error))")
        #expect(handed.value <= 4 << 20, "never more than the range")
        #expect(transport.peakBufferedBytes <= URLSessionTransport.maxUnreadBytes, "\(transport.peakBufferedBytes) bytes waited unread")
        #expect(await Self.ends(transport), "the request was cancelled: \(transport.runningRequests) still running")
        #expect(transport.bufferedBytes == 0)
    }

    /// A remote at `baseURL`, over URLSession or AsyncHTTPClient.
    static func remote(_ baseURL: String, overURLSession: Bool, transport: URLSessionTransport = URLSessionTransport()) -> any AttachmentRemote {
        if overURLSession { return URLSessionRemoteStore(baseURL: baseURL, transport: transport) { "token" } }
        return HTTPRemoteStore(baseURL: baseURL, token: { "token" })
    }

    // Against the old remote a 200 to a range from an offset was a refusal: the download could
    // not go on, and the bytes it had kept waited for days.
    @Test("a resumed download from a server that ignores Range reads its 200 from the start and hands over the bytes from the offset on",
          arguments: [true, false])
    func resumeFromAWholeFile(overURLSession: Bool) async throws {
        let file = Self.bytes(1_000_000)
        let reference = try Self.reference(file)
        let server = try RawFileServer(size: file.count, answer: .whole) { offset, count in
            Array(file[offset..<min(offset + count, file.count)])
        }
        defer { server.stop() }
        let remote = Self.remote("http://127.0.0.1:\(server.port)", overURLSession: overURLSession)
        let received = Box<[UInt8]>([])
        let found = try await remote.readAttachment(reference, from: 400_000) { piece in received.withLock { $0 += piece } }
        #expect(found)
        #expect(received.value == Array(file[400_000...]))
        #expect(server.requests.first?.lowercased().contains("range: bytes=400000-") == true, "\(server.requests)")
    }

    @Test("a resumed download of a file larger than a range, from a server that ignores Range: over URLSession refused typed before a byte is handed over; over AsyncHTTPClient read from the 200's start")
    func resumeFromALargeWholeFile() async throws {
        let file = Self.bytes(6 << 20)
        let reference = try Self.reference(file)
        let server = try RawFileServer(size: file.count, answer: .whole) { offset, count in
            Array(file[offset..<min(offset + count, file.count)])
        }
        defer { server.stop() }
        let baseURL = "http://127.0.0.1:\(server.port)"
        let transport = URLSessionTransport()
        let handed = Box(0)
        let error = await syncError {
            _ = try await Self.remote(baseURL, overURLSession: true, transport: transport).readAttachment(reference, from: 1 << 20) { piece in
                handed.withLock { $0 += piece.count }
            }
        }
        #expect(error?.code == .rejected, "\(String(describing: error))")
        #expect(handed.value == 0)
        #expect(transport.peakBufferedBytes <= URLSessionTransport.maxUnreadBytes, "\(transport.peakBufferedBytes) bytes waited unread")
        let received = Box<[UInt8]>([])
        let found = try await Self.remote(baseURL, overURLSession: false).readAttachment(reference, from: 1 << 20) { piece in
            received.withLock { $0 += piece }
        }
        #expect(found)
        #expect(received.value == Array(file[(1 << 20)...]))
    }

    // MARK: Cancellation and close, in process

    // Against the old `AttachmentDownloads.run`, which awaited the download's task: the
    // cancelled caller stays until the remote lets the download go on (no outcome in time).
    @Test("two callers share one download; the one cancelled returns at once, and the other gets the file from the same download")
    func sharedDownloadOutlivesACancelledCaller() async throws {
        let file = Self.bytes(3_000_000)
        let remote = GatedRemote(file: file, split: 1_000_000)
        defer { remote.release.open() }
        let context = try await SyncContext(store: InMemoryStore(), remote: remote)
        let reference = try Self.reference(file)
        let first = Task { try await context.attachmentData(reference) }
        await remote.begun.wait()
        let second = Task { try await context.attachmentData(reference) }
        // A precondition, not what is tested: the second caller has joined the download.
        #expect(await eventually { context.callersWaitingForDownload(of: reference.sha256) == 2 })
        first.cancel()
        guard case .failure(let error)? = await awaitOutcome(of: first, within: .seconds(10)) else {
            Issue.record("the cancelled caller did not return while the download waited")
            return
        }
        #expect(error is CancellationError, "\(error)")
        remote.release.open()
        let data = try #require(await awaitOutcome(of: second, within: .seconds(30))).get()
        #expect(data.count == file.count && sha256Hex(Array(data)) == reference.sha256)
        #expect(remote.reads.value == 1 && remote.endings.value == ["released"], "one download, never cancelled: \(remote.endings.value)")
        try await context.close()
    }

    // Against the old code the caller stays until the remote goes on, and the read is never
    // cancelled (`endings` stays empty).
    @Test("a caller cancelled while the remote is silent returns at once; the download nobody waits for stops, and the next call fetches the file")
    func cancelledCallerStopsTheDownload() async throws {
        let file = Self.bytes(3_000_000)
        let remote = GatedRemote(file: file, split: 1_000_000)
        defer { remote.release.open() }
        let context = try await SyncContext(store: InMemoryStore(), remote: remote)
        let reference = try Self.reference(file)
        let reader = Task { try await context.attachmentData(reference) }
        await remote.begun.wait()
        reader.cancel()
        guard case .failure(let error)? = await awaitOutcome(of: reader, within: .seconds(10)) else {
            Issue.record("the cancelled caller did not return while the remote was silent")
            return
        }
        #expect(error is CancellationError, "\(error)")
        await remote.ended.wait()
        #expect(remote.endings.value == ["cancelled"])
        remote.release.open()
        let data = try await context.attachmentData(reference)
        #expect(data.count == file.count && sha256Hex(Array(data)) == reference.sha256)
        try await context.close()
    }

    // Against the old `close()`, which left downloads running: it returns with the read still
    // waiting (`endings` empty), and the caller never returns.
    @Test("close() ends a running download and returns once it has; its caller gets storeClosed")
    func closeEndsADownload() async throws {
        let file = Self.bytes(3_000_000)
        let remote = GatedRemote(file: file, split: 1_000_000)
        defer { remote.release.open() }
        let context = try await SyncContext(store: InMemoryStore(), remote: remote)
        let reader = Task { try await context.attachmentData(try Self.reference(file)) }
        await remote.begun.wait()
        try await context.close()
        #expect(remote.endings.value == ["cancelled"], "close returned once the download had ended")
        guard case .failure(let error)? = await awaitOutcome(of: reader, within: .seconds(10)) else {
            Issue.record("the caller did not return when the context closed")
            return
        }
        #expect((error as? SyncError)?.code == .storeClosed, "\(error)")
    }

    // Against the old `close()` the upload goes on waiting (`endings` empty when it returns).
    @Test("close() ends a push's upload under way and returns once it has; the push fails with storeClosed")
    func closeEndsAnUpload() async throws {
        let remote = GatedRemote(file: [], split: 0)
        defer { remote.release.open() }
        let context = try await SyncContext(store: InMemoryStore(), remote: remote)
        try await context.defineTable(TableSchema("notes"))
        let photo = try await context.addAttachment(Self.bytes(1000), contentType: "image/png")
        try await context.table("notes").insert(Record(id: "n1", fields: ["photo": photo.value]))
        let push = Task { try await context.push() }
        await remote.begun.wait()
        try await context.close()
        #expect(remote.endings.value == ["cancelled"], "close returned once the upload had ended")
        guard case .failure(let error)? = await awaitOutcome(of: push, within: .seconds(10)) else {
            Issue.record("the push did not end when the context closed")
            return
        }
        #expect((error as? SyncError)?.code == .storeClosed, "\(error)")
    }

    // MARK: Cancellation and close, over URLSession with a server gone silent

    /// Alice's file of 3,000,000 bytes on a live server, read by a context on a SQLite store
    /// through a proxy that stops the download's answer after 1,500,000 bytes and sends
    /// nothing more; `body` gets the context, the task awaiting `attachmentData` (once its
    /// first MiB has arrived) and the transport.
    static func withSilentDownload(_ body: (SyncContext, Task<Data, any Error>, URLSessionTransport) async throws -> Void) async throws {
        try await LiveServer.with { live in
            try await withTemporaryDirectory { directory in
                let reference = try await Self.store(Self.bytes(3_000_000), on: live)
                let proxy = try await CuttingProxy.start(target: live.baseURL, cuts: 1, cutAfter: 1_500_000, stall: true,
                                                         cutting: .attachmentDownloads)
                defer { proxy.stop() }
                let transport = URLSessionTransport()
                let token = try await live.token("alice")
                let context = try await SyncContext(store: try await SQLiteStore(path: directory.appendingPathComponent("b.sqlite").path),
                                                    remote: URLSessionRemoteStore(baseURL: proxy.url, transport: transport) { token })
                var events = context.events().makeAsyncIterator()
                let reader = Task { try await context.attachmentData(reference) }
                while let event = await events.next() {
                    if case .attachmentProgress(_, let direction, _, _) = event, direction == .download { break }
                }
                try await body(context, reader, transport)
                try? await context.close()
            }
        }
    }

    /// Whether `transport`'s requests have all ended within a generous bound.
    static func ends(_ transport: URLSessionTransport) async -> Bool {
        let idle = Task { () async throws -> Void in await transport.whenIdle() }
        defer { idle.cancel() }
        return await awaitOutcome(of: idle, within: .seconds(10)) != nil
    }

    // Against the old code the caller waits for the silent answer (URLSession's own timeout,
    // 30 s, then a retry) and its request runs on.
    @Test("over URLSession, with the server silent mid-file: a cancelled caller returns at once, and its request is cancelled")
    func cancelOverURLSession() async throws {
        try await Self.withSilentDownload { _, reader, transport in
            reader.cancel()
            guard case .failure(let error)? = await awaitOutcome(of: reader, within: .seconds(10)) else {
                Issue.record("the cancelled caller did not return while the server was silent")
                return
            }
            #expect(error is CancellationError, "\(error)")
            #expect(await Self.ends(transport), "the request was cancelled: \(transport.runningRequests) still running")
            #expect(transport.bufferedBytes == 0)
        }
    }

    // Against the old `close()` the download's request runs on and its caller waits for it.
    @Test("over URLSession, with the server silent mid-file: close() ends the download and its request")
    func closeOverURLSession() async throws {
        try await Self.withSilentDownload { context, reader, transport in
            try await context.close()
            guard case .failure(let error)? = await awaitOutcome(of: reader, within: .seconds(10)) else {
                Issue.record("the caller did not return when the context closed")
                return
            }
            #expect((error as? SyncError)?.code == .storeClosed, "\(error)")
            #expect(await Self.ends(transport), "the request was cancelled: \(transport.runningRequests) still running")
        }
    }
}

// MARK: Helpers

/// `task`'s outcome if it ends within `limit`, `nil` if not (it is left running). The limit is
/// a generous bound on a wait for a signal, never what a test measures.
func awaitOutcome<T: Sendable>(of task: Task<T, any Error>, within limit: Duration) async -> Result<T, any Error>? {
    await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>?, Never>) in
        let once = ResumeOnce(continuation)
        Task { once.resume(await task.result) }
        Task {
            try? await Task.sleep(for: limit)
            once.resume(nil)
        }
    }
}

/// Resumes a continuation with the first value it is given.
final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, Never>?>

    init(_ continuation: CheckedContinuation<T, Never>) {
        self.continuation = Mutex(continuation)
    }

    func resume(_ value: T) {
        let first = continuation.withLock { stored -> CheckedContinuation<T, Never>? in
            defer { stored = nil }
            return stored
        }
        first?.resume(returning: value)
    }
}

/// A signal tasks wait for until it opens; a wait whose task is cancelled ends at once.
final class CancellableGate: Sendable {
    private struct State {
        var open = false
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var lastId: UInt64 = 0
    }

    private let state = Mutex(State())

    /// `true` once the gate is open; `false` when the waiting task was cancelled first.
    func wait() async -> Bool {
        let id = state.withLock { state -> UInt64 in
            state.lastId += 1
            return state.lastId
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = state.withLock { state -> Bool? in
                    if state.open { return true }
                    if Task.isCancelled { return false }
                    state.waiters[id] = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: false)
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.open = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }
}

/// A remote that holds one file and serves it in two parts: the first `split` bytes at once,
/// the rest once ``release`` opens. Its appends wait for ``release`` too. A read or an append
/// whose task is cancelled while it waits ends as the HTTP remotes' do (`cancelled`).
final class GatedRemote: RemoteStore, AttachmentRemote {
    let file: [UInt8]
    let split: Int
    /// Lets the reads and appends waiting go on.
    let release = CancellableGate()
    /// Opened once a read has handed over its first part, or an append has begun.
    let begun = Gate()
    /// Opened once a read or an append has stopped waiting, released or cancelled.
    let ended = Gate()
    /// How each read or append that waited ended: `released` or `cancelled`.
    let endings = Box<[String]>([])
    /// Reads begun.
    let reads = Box(0)

    init(file: [UInt8], split: Int) {
        self.file = file
        self.split = split
    }

    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        throw SyncError(.unsupported, "this remote moves files only")
    }

    func pull(_ request: PullRequest) async throws -> PullPage {
        throw SyncError(.unsupported, "this remote moves files only")
    }

    func attachmentUploadState(_ sha256: String) async throws -> AttachmentUploadState? { nil }

    func appendAttachment(_ attachment: OfflineSync.Attachment, offset: Int64, bytes: [UInt8], complete: Bool) async throws -> AttachmentUploadState {
        begun.open()
        try await hold()
        return AttachmentUploadState(offset: offset + Int64(bytes.count), complete: complete)
    }

    func readAttachment(_ sha256: String, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        reads.withLock { $0 += 1 }
        try await body(Array(file[Int(offset)..<split]))
        begun.open()
        try await hold()
        try await body(Array(file[split...]))
        return true
    }

    /// Waits for ``release``; a cancelled wait ends the transfer as the HTTP remotes do.
    private func hold() async throws {
        let released = await release.wait()
        endings.withLock { $0.append(released ? "released" : "cancelled") }
        ended.open()
        if !released { throw SyncError(.cancelled, "the transfer was cancelled") }
    }
}
