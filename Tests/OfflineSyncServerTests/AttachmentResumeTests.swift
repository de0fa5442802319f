import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import OfflineSyncURLSession
import Testing

/// Swift Testing has an `Attachment` type of its own.
private typealias Attachment = OfflineSync.Attachment

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
    static func cutOffDownload(_ live: LiveServer, _ proxy: CuttingProxy, _ path: String) async throws -> OfflineSync.Attachment {
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

    /// The `Range` a download over `URLSessionRemoteStore` asks with from `offset`: one range of
    /// its transport's size (it cannot hold a response back, so it never asks for more).
    static func window(from offset: Int) -> String {
        "bytes=\(offset)-\(offset + URLSessionTransport.shared.streamedResponseLimit! - 1)"
    }

    /// The kept download of `hash` beside the SQLite store at `path`.
    static func keptFile(_ path: String, _ hash: String) -> String { "\(path)-attachments/tmp/\(hash).download" }

    static func fileSize(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
    }

    /// Runs `body` after ``cutOffDownload(_:_:_:)`` with a live server, the proxy, the second
    /// device's store path and the photo; `reopen` opens a new context on that store through
    /// the proxy, as the app would after it was killed.
    static func afterCutOffDownload(_ body: (CuttingProxy, String, OfflineSync.Attachment,
                                             _ reopen: () async throws -> SyncContext) async throws -> Void) async throws {
        try await LiveServer.with { live in
            try await withTemporaryDirectory { directory in
                let proxy = try await CuttingProxy.start(target: live.baseURL, cuts: 3, cutAfter: Self.cutAfter, cutting: .attachmentDownloads)
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
            let tries = proxy.ranges
            #expect(tries == [Self.window(from: 0), Self.window(from: Self.cutAfter), Self.window(from: 2 * Self.cutAfter)],
                    "each try went on from the last: \(tries)")
            #expect(Self.fileSize(Self.keptFile(path, photo.sha256)) == 3 * Self.cutAfter, "every byte received is kept")

            // The app starts again: a new store and context on the same files.
            let again = try await reopen()
            #expect(try await again.attachmentState(photo) == .remote)
            let (progress, watching) = AttachmentSyncTests.Progress.watch(again)
            let data = try await again.attachmentData(photo)
            #expect(data == Data(Self.photo), "the file the app gets is the photo")
            again.finishEvents()
            await watching.value
            #expect(proxy.ranges.dropFirst(3) == [Self.window(from: 3 * Self.cutAfter)], "only the rest was asked for: \(proxy.ranges)")
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
            #expect(proxy.ranges.dropFirst(3) == [Self.window(from: 3 * Self.cutAfter), Self.window(from: 0)],
                    "the rest, then, after the hash failed, the whole file: \(proxy.ranges)")
            #expect(Self.fileSize(Self.keptFile(path, photo.sha256)) == nil)
            try await again.close()
        }
    }
}
