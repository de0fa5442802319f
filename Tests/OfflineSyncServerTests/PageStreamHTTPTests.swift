import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

@Suite("Page stream over HTTP: POST /v2/pull")
struct PageStreamHTTPTests {
    static let rows = 1_050

    /// Pushes `rows` records of `identity` into `todos`.
    static func seed(_ live: LiveServer, identity: String = "alice", rows: Int = rows) async throws {
        let remote = try await live.remote(identity)
        for start in stride(from: 0, to: rows, by: 500) {
            _ = try await remote.push((start..<min(start + 500, rows)).map { i in
                PushOperation(id: "\(identity)-\(i)", table: "todos", itemId: "\(identity)-\(i)", kind: .insert,
                              item: Record(id: "\(identity)-\(i)", fields: ["title": .string("todo \(i) é"), "n": .int(Int64(i)),
                                                                            "at": .date(Timestamp(millisecondsSince1970: Int64(i)))]),
                              baseVersion: nil)
            })
        }
    }

    /// Every record of `identity`'s `todos`, read one `/v1/pull` page at a time.
    static func pagedRecords(_ live: LiveServer, _ identity: String) async throws -> [Record] {
        let remote = try await live.remote(identity)
        var records: [Record] = []
        var cursor: String?
        while true {
            let page = try await remote.pull(PullRequest(table: "todos", cursor: cursor, limit: 1000))
            records += page.records
            cursor = page.nextCursor
            if page.endsPull { return records }
        }
    }

    /// Pulls `todos` through a context over `remote` into a new SQLite store; returns the
    /// summary and the stored records. `progressTimeout` is the context's deadline for an
    /// answer (see ``SyncOptions/progressTimeout``).
    static func pull(_ remote: HTTPRemoteStore, in directory: URL, name: String,
                     progressTimeout: Duration = .seconds(30)) async throws -> (PullSummary, [Record]) {
        let store = try await SQLiteStore(path: directory.appendingPathComponent("\(name).sqlite").path)
        let context = try await SyncContext(store: store, remote: remote,
                                            options: SyncOptions(pullPageSize: 100, progressTimeout: progressTimeout))
        try await context.defineTable(TableSchema("todos", fields: [FieldDefinition("title", .string), FieldDefinition("n", .int)]))
        let summary = try await context.pull("todos", queryId: "all")
        let stored = try await context.read { try $0.records(in: "todos", matching: Query(order: [SortKey("id")])) }
        try await context.close()
        return (summary, stored)
    }

    @Test("a context pulls over the page stream in several responses and stores exactly the rows page-by-page pulls give")
    func streamsInSeveralResponses() async throws {
        try await withTemporaryDirectory { directory in
            try await LiveServer.with(configure: { $0.pagesPerStream = 3 }) { live in
                try await Self.seed(live)
                try await Self.seed(live, identity: "bob", rows: 5)
                let proxy = try await CuttingProxy.start(target: live.baseURL, cuts: 0, cutAfter: 0)
                defer { proxy.stop() }
                let token = try await live.token("alice")
                let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(proxy.port)", token: { token })
                let (summary, stored) = try await Self.pull(remote, in: directory, name: "streamed")
                #expect(summary.received == Self.rows && summary.added == Self.rows && summary.pages == 11)
                #expect(proxy.count("/v2/pull") == 4, "11 pages at 3 per response")
                #expect(proxy.count("/v1/pull") == 0)
                let expected = try await Self.pagedRecords(live, "alice").sorted { $0.id < $1.id }
                #expect(stored.count == expected.count)
                #expect(stored == expected, "the same records, versions and timestamps as /v1/pull's pages")
                #expect(!stored.contains { $0.id.hasPrefix("bob") }, "only alice's rows")
            }
        }
    }

    @Test("a stream that breaks off mid-page is asked again from the last stored page: no row lost or read twice")
    func resumesAfterBreakingOff() async throws {
        try await withTemporaryDirectory { directory in
            try await LiveServer.with { live in
                try await Self.seed(live)
                // Each cut falls inside a page: 100 records are a few kilobytes.
                let proxy = try await CuttingProxy.start(target: live.baseURL, cuts: 2, cutAfter: 7_000)
                defer { proxy.stop() }
                let token = try await live.token("alice")
                let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(proxy.port)",
                                             configuration: .init(initialBackoff: .milliseconds(10)), token: { token })
                // The context's progress deadline is not what this test is about: under the
                // whole suite's load the loopback server once answered nothing for its 30 s.
                let (summary, stored) = try await Self.pull(remote, in: directory, name: "resumed", progressTimeout: .seconds(150))
                #expect(summary.received == Self.rows, "every row once: a cut page is read again whole, not twice")
                #expect(summary.added == Self.rows)
                #expect(stored.count == Self.rows)
                #expect(proxy.count("/v2/pull") == 3, "two broken responses, then one that finishes")
            }
        }
    }

    @Test("a stream that goes silent mid-page is given up after the request timeout and asked again: no row lost or read twice",
          .timeLimit(.minutes(3)))
    func resumesAfterSilence() async throws {
        try await withTemporaryDirectory { directory in
            try await LiveServer.with { live in
                try await Self.seed(live)
                // The proxy holds each of the first two answers open, silent, until the test
                // ends: only the client's own timeout (6 s) lets the pull finish at all (the
                // time limit fails a client that waits for the server).
                let proxy = try await CuttingProxy.start(target: live.baseURL, cuts: 2, cutAfter: 7_000, stall: true)
                defer { proxy.stop() }
                let token = try await live.token("alice")
                // 6 s and ten attempts: under a loaded full run a healthy answer took over 3 s
                // five times and then ten times in a row (a retry loses nothing).
                let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(proxy.port)",
                                             configuration: .init(requestTimeout: .seconds(6), maxAttempts: 10,
                                                                  initialBackoff: .milliseconds(10)),
                                             token: { token })
                // The context's own deadline is not what this test is about: under a loaded
                // full run, two silent answers and their retries can together outlast its 30 s.
                let (summary, stored) = try await Self.pull(remote, in: directory, name: "silenced", progressTimeout: .seconds(150))
                #expect(summary.received == Self.rows && summary.added == Self.rows && stored.count == Self.rows)
                // At least the two silent answers and one that finishes (a machine loaded enough
                // to keep a healthy answer silent for 6 s adds a retry, which loses nothing).
                #expect(proxy.count("/v2/pull") >= 3)
            }
        }
    }

    @Test("a server without the page stream is pulled page by page through /v1/pull")
    func fallsBackToPages() async throws {
        try await withTemporaryDirectory { directory in
            try await LiveServer.with(configure: { $0.streamsPages = false }) { live in
                try await Self.seed(live)
                let proxy = try await CuttingProxy.start(target: live.baseURL, cuts: 0, cutAfter: 0)
                defer { proxy.stop() }
                let token = try await live.token("alice")
                let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(proxy.port)", token: { token })
                let (summary, stored) = try await Self.pull(remote, in: directory, name: "paged")
                #expect(summary.received == Self.rows && stored.count == Self.rows)
                #expect(proxy.count("/v2/pull") == 1, "asked once, answered 404")
                #expect(proxy.count("/v1/pull") == 11)
            }
        }
    }

    @Test("refusals come before the stream, as JSON errors: no token, no or another format version, bad cursor, page too large")
    func refusals() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice")
            let auth = ("Authorization", "Bearer \(token)")
            let accept = ("Accept", "\(PageStream.mediaType); version=1")
            let body = Array(#"{"table":"todos","limit":10}"#.utf8)

            let anonymous = try await http(.POST, live.baseURL + "/v2/pull", headers: [accept], body: body)
            #expect(anonymous.status == 401 && anonymous.errorCode == "unauthorized")

            let noAccept = try await http(.POST, live.baseURL + "/v2/pull", headers: [auth], body: body)
            #expect(noAccept.status == 406 && noAccept.errorCode == "notAcceptable")

            let future = try await http(.POST, live.baseURL + "/v2/pull", headers: [auth, ("Accept", "\(PageStream.mediaType); version=2")], body: body)
            #expect(future.status == 406 && future.errorCode == "unsupportedVersion")
            #expect(future.text.contains("writes page stream version 1") && future.text.contains("accepts version 2"), "\(future.text)")

            let badCursor = try await http(.POST, live.baseURL + "/v2/pull", headers: [auth, accept],
                                           body: Array(#"{"table":"todos","cursor":"nonsense","limit":10}"#.utf8))
            #expect(badCursor.status == 400 && badCursor.errorCode == "invalidCursor")

            let tooLarge = try await http(.POST, live.baseURL + "/v2/pull", headers: [auth, accept],
                                          body: Array(#"{"table":"todos","limit":5000}"#.utf8))
            #expect(tooLarge.status == 400 && tooLarge.errorCode == "pageSizeExceeded")

            // Several accepted types, ours among them: the stream, with its header and an end frame.
            try await Self.seed(live, rows: 3)
            let ok = try await http(.POST, live.baseURL + "/v2/pull",
                                    headers: [auth, ("Accept", "application/json, \(PageStream.mediaType);version=1")], body: body)
            #expect(ok.status == 200)
            #expect(ok.header("Content-Type") == "\(PageStream.mediaType); version=1")
            var decoder = PageStreamDecoder()
            ok.body.withUnsafeBytes { decoder.append($0) }
            var frames: [PageStream.Frame] = []
            while let frame = try decoder.next() { frames.append(frame) }
            guard case .page(let page)? = frames.first else { Issue.record("no page: \(frames)"); return }
            #expect(page.records.count == 3 && page.remaining == 0)
            #expect(frames.last == .end && decoder.isFinished)
        }
    }
    @Test("a client's byte bound ends a response after the page that reaches it; the next response goes on from its cursor")
    func byteBoundPerResponse() async throws {
        try await LiveServer.with { live in
            try await Self.seed(live, rows: 30)
            let token = try await live.token("alice")
            let headers = [("Authorization", "Bearer \(token)"), ("Accept", "\(PageStream.mediaType); version=1"),
                           (PageStream.responseBytesHeader, "1")]
            var cursor: String?
            var ids: [String] = []
            var responses = 0
            while true {
                let request = #"{"table":"todos","limit":10"# + (cursor.map { #","cursor":"\#($0)""# } ?? "") + "}"
                let answer = try await http(.POST, live.baseURL + "/v2/pull", headers: headers, body: Array(request.utf8))
                #expect(answer.status == 200)
                var decoder = PageStreamDecoder()
                answer.body.withUnsafeBytes { decoder.append($0) }
                var pages: [PullPage] = []
                while let frame = try decoder.next() { if case .page(let page) = frame { pages.append(page) } }
                responses += 1
                #expect(pages.count == 1, "one page per response under a 1-byte bound")
                guard let page = pages.last else { return }
                ids += page.records.map(\.id)
                if page.endsPull || responses > 10 { break }
                cursor = page.nextCursor
            }
            #expect(responses == 3 && ids.count == 30 && Set(ids).count == 30)
        }
    }
}