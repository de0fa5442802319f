import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import OfflineSyncURLSession
import Testing

/// Swift Testing has an `Attachment` type of its own.
private typealias Attachment = OfflineSync.Attachment

/// A real reverse proxy on a loopback port that forwards every request (with its token,
/// type and `Range`), streams the answers through, and breaks off the first `cuts` answers to
/// `GET /v1/attachments/…` after `cutAfter` bytes of their body, closing the connection as a
/// network failure would. It records the `Range` of each attachment download.
struct DownloadCuttingProxy {
    let running: Task<Void, any Error>
    let port: Int
    let ranges: Box<[String]>

    struct Cut: Error {}

    var url: String { "http://127.0.0.1:\(port)" }

    static func start(target: String, cuts: Int, cutAfter: Int) async throws -> DownloadCuttingProxy {
        let ranges = Box<[String]>([])
        let router = Router()
        let forward: @Sendable (Request, HTTPRequest.Method) async throws -> Response = { request, method in
            let path = request.uri.path
            let download = method == .get && path.hasPrefix("/v1/attachments/")
            let cut = download && ranges.withLock { ranges -> Bool in
                ranges.append(request.headers[.range] ?? "")
                return ranges.count <= cuts
            }
            var outgoing = HTTPClientRequest(url: target + request.uri.description)
            outgoing.method = method == .get ? .GET : .POST
            for field in request.headers where [.authorization, .contentType, .accept, .range].contains(field.name) {
                outgoing.headers.add(name: field.name.rawName, value: field.value)
            }
            if method == .post { outgoing.body = .bytes(try await request.body.collect(upTo: 64 << 20)) }
            let answer = try await HTTPClient.shared.execute(outgoing, timeout: .seconds(30))
            var headers: HTTPFields = [:]
            if let type = answer.headers.first(name: "Content-Type") { headers[.contentType] = type }
            if let range = answer.headers.first(name: "Content-Range") { headers[.contentRange] = range }
            return Response(status: .init(code: Int(answer.status.code)), headers: headers, body: ResponseBody { writer in
                var sent = 0
                for try await chunk in answer.body {
                    if cut && sent + chunk.readableBytes > cutAfter {
                        try await writer.write(chunk.getSlice(at: chunk.readerIndex, length: cutAfter - sent)!)
                        throw Cut()   // Hummingbird closes the connection: the body breaks off
                    }
                    sent += chunk.readableBytes
                    try await writer.write(chunk)
                }
                try await writer.finish(nil)
            })
        }
        router.get("**") { request, _ in try await forward(request, .get) }
        router.post("**") { request, _ in try await forward(request, .post) }
        let app = try await LoopbackApp.start(router)
        return DownloadCuttingProxy(running: app.running, port: app.port, ranges: ranges)
    }

    var downloads: [String] { ranges.withLock { $0 } }
    func stop() { running.cancel() }
}

/// Downloads that survive the app: bytes a cut-off download received are kept beside the
/// store, and the next download — in a context opened afterwards, as after the app was
/// killed — asks only for the rest.
@Suite("Attachments: downloads resume across contexts")
struct AttachmentResumeTests {
    static let schema = TableSchema("inspections", fields: [FieldDefinition("site", .string)])
    static let photo: [UInt8] = (0..<2_500_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_246_822_519) >> 11) }
    /// Three cut answers (the context's tries of one download) of this many bytes each.
    static let cutAfter = 600_000

    /// Alice's first device uploads the photo with its record; her second device, on a
    /// SQLite store in `directory`, pulls the record through `proxy` and tries the photo,
    /// whose three tries are cut off: the context gives up with `attachmentUnavailable`.
    static func cutOffDownload(_ live: LiveServer, _ proxy: DownloadCuttingProxy, _ path: String) async throws -> OfflineSync.Attachment {
        let first = try await SyncContext(store: InMemoryStore(), remote: try await live.remote("alice"))
        try await first.defineTable(schema)
        let photo = try await first.addAttachment(Self.photo, contentType: "image/jpeg")
        try await first.table("inspections").insert(Record(id: "i1", fields: ["photo": photo.value]))
        _ = try await first.push()
        try await first.close()

        let token = try await live.token("alice")
        let second = try await SyncContext(store: try await SQLiteStore(path: path), remote: URLSessionRemoteStore(baseURL: proxy.url) { token })
        try await second.defineTable(schema)
        try await second.table("inspections").pull()
        do {
            _ = try await second.attachmentData(photo)
            Issue.record("a download cut off at every try succeeded")
        } catch let error as SyncError {
            #expect(error.code == .attachmentUnavailable, "\(error)")
        }
        try await second.close()
        return photo
    }

    /// The kept download of `hash` beside the SQLite store at `path`.
    static func keptFile(_ path: String, _ hash: String) -> String { "\(path)-attachments/tmp/\(hash).download" }

    static func fileSize(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
    }

    /// Runs `body` after ``cutOffDownload(_:_:_:)`` with a live server, the proxy, the second
    /// device's store path and the photo; `reopen` opens a new context on that store through
    /// the proxy, as the app would after it was killed.
    static func afterCutOffDownload(_ body: (DownloadCuttingProxy, String, OfflineSync.Attachment,
                                             _ reopen: () async throws -> SyncContext) async throws -> Void) async throws {
        try await LiveServer.with { live in
            try await withTemporaryDirectory { directory in
                let proxy = try await DownloadCuttingProxy.start(target: live.baseURL, cuts: 3, cutAfter: Self.cutAfter)
                defer { proxy.stop() }
                let path = directory.appendingPathComponent("b.sqlite").path
                let photo = try await Self.cutOffDownload(live, proxy, path)
                let token = try await live.token("alice")
                try await body(proxy, path, photo) {
                    try await SyncContext(store: try await SQLiteStore(path: path), remote: URLSessionRemoteStore(baseURL: proxy.url) { token })
                }
            }
        }
    }

    @Test("a download cut off three times keeps its bytes; a context opened later asks only for the rest and checks the whole file")
    func resumesInNewContext() async throws {
        try await Self.afterCutOffDownload { proxy, path, photo, reopen in
            let tries = proxy.downloads
            #expect(tries == ["", "bytes=\(Self.cutAfter)-", "bytes=\(2 * Self.cutAfter)-"], "each try went on from the last: \(tries)")
            #expect(Self.fileSize(Self.keptFile(path, photo.sha256)) == 3 * Self.cutAfter, "every byte received is kept")

            // The app starts again: a new store and context on the same files.
            let again = try await reopen()
            #expect(try await again.attachmentState(photo) == .remote)
            let (progress, watching) = AttachmentSyncTests.Progress.watch(again)
            let data = try await again.attachmentData(photo)
            #expect(data == Data(Self.photo), "the file the app gets is the photo")
            again.finishEvents()
            await watching.value
            #expect(proxy.downloads.dropFirst(3) == ["bytes=\(3 * Self.cutAfter)-"], "only the rest was asked for: \(proxy.downloads)")
            let done = progress.all.filter { $0.direction == .download }.map(\.done)
            #expect(done.first == Int64(3 * Self.cutAfter) && done.last == Int64(Self.photo.count), "\(done)")
            #expect(Self.fileSize(Self.keptFile(path, photo.sha256)) == nil, "the kept download became the stored file")
            #expect(try await again.attachmentState(photo) == .local)
            try await again.close()
        }
    }

    @Test("kept bytes that were altered fail the hash: dropped, the file fetched whole again, and no altered byte reaches the app")
    func alteredKeptBytesRefetched() async throws {
        try await Self.afterCutOffDownload { proxy, path, photo, reopen in
            let kept = try #require(FileHandle(forUpdatingAtPath: Self.keptFile(path, photo.sha256)))
            try kept.seek(toOffset: 1000)
            try kept.write(contentsOf: Data(repeating: 0xA5, count: 16))
            try kept.close()

            let again = try await reopen()
            let data = try await again.attachmentData(photo)
            #expect(data == Data(Self.photo), "the file the app gets is the photo")
            #expect(proxy.downloads.dropFirst(3) == ["bytes=\(3 * Self.cutAfter)-", ""],
                    "the rest, then, after the hash failed, the whole file: \(proxy.downloads)")
            #expect(Self.fileSize(Self.keptFile(path, photo.sha256)) == nil)
            try await again.close()
        }
    }
}
