import Foundation
import Hummingbird
import OfflineSync
@testable import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// Downloads as media players and HTTP caches use them: RFC 9110's single byte ranges (closed,
/// open, suffix), 416 only for a range no byte satisfies, conditional requests on the entity
/// tag, and `HEAD` answering the headers a `GET` would.
@Suite("Attachment ranges and conditional requests")
struct AttachmentRangeTests {
    static let bytes: [UInt8] = (0..<1_500_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 9) }
    static let hash = sha256Hex(bytes)

    @Test("closed, open and suffix ranges; 416 with bytes */size; If-None-Match, If-Range, If-Match; HEAD's headers")
    func rangesOverHTTP() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            #expect(try await AttachmentHTTPTests.upload(Self.bytes, hash: Self.hash, token: token, base: base).status == 200)
            let url = "\(base)/v1/attachments/\(Self.hash)", size = Self.bytes.count, etag = "\"\(Self.hash)\""
            func get(_ extra: [(String, String)], method: NIOHTTP1.HTTPMethod = .GET) async throws -> RawResponse {
                try await http(method, url, headers: AttachmentHTTPTests.headers(token, extra))
            }
            // AVPlayer's first probe, then a closed range across a stored piece's end.
            let probe = try await get([("Range", "bytes=0-1")])
            #expect(probe.status == 206)
            #expect(probe.body == Array(Self.bytes[0...1]))
            #expect(probe.header("Content-Range") == "bytes 0-1/\(size)")
            #expect(probe.header("Content-Length") == "2")
            let closed = try await get([("Range", "bytes=1048000-1049999")])
            #expect(closed.status == 206)
            #expect(closed.body == Array(Self.bytes[1_048_000...1_049_999]))
            #expect(closed.header("Content-Range") == "bytes 1048000-1049999/\(size)")
            let clamped = try await get([("Range", "bytes=\(size - 10)-\(size + 100)")])
            #expect(clamped.status == 206)
            #expect(clamped.body == Array(Self.bytes[(size - 10)...]))
            let suffix = try await get([("Range", "bytes=-100")])
            #expect(suffix.status == 206)
            #expect(suffix.body == Array(Self.bytes[(size - 100)...]))
            #expect(suffix.header("Content-Range") == "bytes \(size - 100)-\(size - 1)/\(size)")
            let open = try await get([("Range", "bytes=1400000-")])
            #expect(open.body == Array(Self.bytes[1_400_000...]))
            for unsatisfiable in ["bytes=\(size)-", "bytes=\(size)-\(size + 5)", "bytes=-0"] {
                let refused = try await get([("Range", unsatisfiable)])
                #expect(refused.status == 416, "\(unsatisfiable)")
                #expect(refused.header("Content-Range") == "bytes */\(size)", "\(unsatisfiable)")
            }
            // Ranges this server does not serve are ignored: the whole file.
            for ignored in ["items=0-5", "bytes=5-2", "bytes=0-1,5-6", "bytes=abc"] {
                let whole = try await get([("Range", ignored)])
                #expect(whole.status == 200, "\(ignored)")
                #expect(whole.body.count == size, "\(ignored)")
            }
            // Conditional requests.
            let cached = try await get([("If-None-Match", etag)])
            #expect(cached.status == 304)
            #expect(cached.body.isEmpty)
            #expect(cached.header("ETag") == etag)
            // RFC 9110 (8.6): a 304 carries no Content-Length but the 200's (or none).
            #expect(cached.header("Content-Length") == nil || cached.header("Content-Length") == String(size),
                    "\(cached.header("Content-Length") ?? "")")
            #expect(try await get([("If-None-Match", "\"other\", W/\(etag)")]).status == 304, "weak comparison")
            #expect(try await get([("If-None-Match", "\"other\"")]).status == 200)
            let current = try await get([("Range", "bytes=10-19"), ("If-Range", etag)])
            #expect(current.status == 206)
            #expect(current.body == Array(Self.bytes[10...19]))
            let stale = try await get([("Range", "bytes=10-19"), ("If-Range", "\"stale\"")])
            #expect(stale.status == 200)
            #expect(stale.body.count == size)
            #expect(try await get([("Range", "bytes=10-19"), ("If-Range", "Tue, 01 Dec 2026 00:00:00 GMT")]).status == 200)
            #expect(try await get([("If-Match", "\"stale\"")]).status == 412)
            #expect(try await get([("If-Match", etag)]).status == 200)
            // Every answer: nosniff; HEAD has GET's headers and no body, and ignores Range.
            #expect(probe.header("X-Content-Type-Options") == "nosniff")
            let head = try await get([], method: .HEAD)
            let whole = try await get([])
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            for name in ["Content-Length", "Content-Type", "ETag", "Accept-Ranges", "Cache-Control", "X-Content-Type-Options"] {
                #expect(head.header(name) == whole.header(name), "\(name)")
            }
            #expect(try await get([("Range", "bytes=0-1")], method: .HEAD).status == 200)
            #expect(try await get([("If-None-Match", etag)], method: .HEAD).status == 304)
        }
    }

    @Test("a 304 says the file's size as its Content-Length, never the 0 of its empty body, and keeps the other headers")
    func notModifiedLength() {
        let answer = Routes.notModified([.eTag: "\"\(Self.hash)\"", .cacheControl: "private"], size: 1_500_000)
        #expect(answer.status == .notModified)
        #expect(answer.headers[.contentLength] == "1500000")
        #expect(answer.headers[.eTag] == "\"\(Self.hash)\"")
        #expect(answer.headers[.cacheControl] == "private")
        #expect(answer.body.contentLength == 0)
    }

    @Test("an empty file: bytes=0- is 416 with bytes */0, a suffix is the whole empty file")
    func emptyFile() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            let empty = sha256Hex([])
            let stored = try await http(.POST, "\(base)/v1/attachments/\(empty)", headers: AttachmentHTTPTests.headers(token, [
                ("Upload-Complete", "?1"), ("Upload-Length", "0"),
            ]), body: [])
            #expect(stored.status == 200)
            let url = "\(base)/v1/attachments/\(empty)"
            let open = try await http(.GET, url, headers: AttachmentHTTPTests.headers(token, [("Range", "bytes=0-")]))
            #expect(open.status == 416)
            #expect(open.header("Content-Range") == "bytes */0")
            let suffix = try await http(.GET, url, headers: AttachmentHTTPTests.headers(token, [("Range", "bytes=-5")]))
            #expect(suffix.status == 200)
            #expect(suffix.header("Content-Length") == "0")
            #expect(try await http(.GET, url, headers: AttachmentHTTPTests.headers(token)).status == 200)
        }
    }

    @Test("the decision table, without a server", arguments: [
        ("bytes=0-0", 10, DownloadAnswer.partial(first: 0, last: 0)),
        ("bytes=9-", 10, .partial(first: 9, last: 9)),
        ("bytes=10-", 10, .unsatisfiable),
        ("bytes=-20", 10, .partial(first: 0, last: 9)),
        ("bytes=-0", 10, .unsatisfiable),
        ("BYTES = 2-3", 10, .partial(first: 2, last: 3)),
        ("bytes=3-2", 10, .whole),
        ("bytes=1-2, 4-5", 10, .whole),
        ("bytes=-", 10, .whole),
        ("bytes=1234567890123456789-", 10, .whole),
        ("lines=1-2", 10, .whole),
        ("bytes=0-", 0, .unsatisfiable),
        ("bytes=-1", 0, .whole),
    ])
    func decisions(range: String, size: Int, expected: DownloadAnswer) {
        let answer = DownloadAnswer.decide(range: range, ifRange: nil, ifMatch: nil, ifNoneMatch: nil,
                                           etag: "\"t\"", size: Int64(size), rangeApplies: true)
        #expect(answer == expected)
    }
}

import NIOHTTP1
