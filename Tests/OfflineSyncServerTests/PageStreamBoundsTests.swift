import Foundation
import OfflineSync
import OfflineSyncTestSupport
import OfflineSyncURLSession
import Testing

/// The page stream over URLSession, which cannot pause a response: what waits unread in the
/// transport is what the server's response bound lets one response hold (the pages up to its
/// byte limit, and the one that crosses it), never the rest of the table; and a page larger
/// than a download's window arrives whole.
@Suite("Page stream over URLSession: unread bytes bounded", .timeLimit(.minutes(3)))
struct PageStreamBoundsTests {
    @Test("a 10 MiB page sent while the reader is away arrives whole; the response ends at the server's bound, so the rows after it wait on the server")
    func largePageBehindAnAbsentReader() async throws {
        try await LiveServer.with { live in
            let other = try await live.remote("alice")
            let big = String(repeating: "x", count: 10 << 20)
            _ = try await other.push([PushOperation(id: "p1", table: "big", itemId: "r1", kind: .insert,
                                                    item: Record(id: "r1", fields: ["body": "small"]), baseVersion: nil)])
            _ = try await other.push([PushOperation(id: "p2", table: "big", itemId: "r2", kind: .insert,
                                                    item: Record(id: "r2", fields: ["body": .string(big)]), baseVersion: nil)])
            let token = try await live.token("alice")
            let transport = URLSessionTransport()
            let remote = URLSessionRemoteStore(baseURL: live.baseURL, transport: transport) { token }
            let stream = remote.openPull(PullRequest(table: "big", limit: 1))
            let first = try #require(try await stream.next())
            #expect(first.records.map(\.id) == ["r1"])
            // The reader is away (storing the first page) until the response has ended or been cut.
            #expect(await AttachmentTransferBoundsTests.ends(transport), "\(transport.runningRequests) requests still running")
            // The server's response bound (4 MiB) ends the response after the page that crosses it.
            #expect(transport.peakBufferedBytes <= 11 << 20, "\(transport.peakBufferedBytes) bytes waited unread")
            let second = try #require(try await stream.next())
            #expect(second.records.map(\.id) == ["r2"])
            #expect(second.records.first?["body"] == .string(big))
            #expect(try await stream.next() == nil, "the pull ended with that page")
            #expect(transport.peakBufferedBytes <= 11 << 20, "\(transport.peakBufferedBytes) bytes waited unread")
        }
    }
}
