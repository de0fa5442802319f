import Foundation
import NIOHTTP1
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// Docs/Attachments.md's "The reference on each API", run: the two bodies it shows, sent as
/// they stand there, each write a reference that every API reads back as one.
@Suite("Attachments: the reference's form on each API")
struct AttachmentWireFormTests {
    /// The JSON Docs/Attachments.md shows between `<!-- wire: NAME -->` + a `json` fence and
    /// the fence + `<!-- wire end -->`.
    static func documented(_ name: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
        let text = try String(contentsOf: root.appendingPathComponent("Docs/Attachments.md"), encoding: .utf8)
        let begin = "<!-- wire: \(name) -->\n```json\n", end = "```\n<!-- wire end -->"
        guard let start = text.range(of: begin), let stop = text.range(of: end, range: start.upperBound..<text.endIndex) else {
            throw SyncError(.notFound, "Docs/Attachments.md shows no body for \(name)")
        }
        return String(text[start.upperBound..<stop.lowerBound])
    }

    @Test("/v1/push takes the documented $$attachment and refuses $attachment; /tables takes $attachment; every API reads both back as a reference")
    func documentedBodies() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice")
            let bytes = Array("test".utf8)
            let photo = try OfflineSync.Attachment(sha256: sha256Hex(bytes), size: 4, contentType: "text/plain", fileName: "test.txt")
            #expect(photo.sha256 == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "the hash the document shows")
            // The bytes go up first, whole in one request.
            let uploaded = try await http(.POST, "\(live.baseURL)/v1/attachments/\(photo.sha256)", headers: [
                ("Authorization", "Bearer \(token)"), ("Upload-Draft-Interop-Version", "6"),
                ("Upload-Complete", "?1"), ("Upload-Length", "4"),
            ], body: bytes)
            #expect(uploaded.status == 200, "\(uploaded.text)")

            let push = try Self.documented("/v1/push")
            #expect(push.contains(#""$$attachment""#))
            let headers = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")]
            // The tables API's spelling, sent to the native JSON API, is refused and names the key.
            let literal = try await http(.POST, live.baseURL + "/v1/push", headers: headers,
                                         body: Array(push.replacingOccurrences(of: "$$attachment", with: "$attachment").utf8))
            #expect(literal.status == 400)
            #expect(literal.text.contains("the key '$attachment' starts with '$'"), "\(literal.text)")
            let pushed = try await http(.POST, live.baseURL + "/v1/push", headers: headers, body: Array(push.utf8))
            #expect(pushed.status == 200)
            #expect(pushed.text.contains(#""outcome":"applied""#), "\(pushed.text)")

            let entity = try Self.documented("/tables/inspections")
            #expect(entity.contains(#""$attachment""#) && !entity.contains("$$"))
            let tables = TablesClient(baseURL: live.baseURL, token: token)
            let created = try await tables.send(.POST, "/tables/inspections", json: entity)
            #expect(created.status == 201, "\(created.text)")

            // Read back through each API: /v1/pull answers $$attachment for both records, the
            // tables API $attachment, and a context reads a reference from each and its bytes.
            let page = try await http(.POST, live.baseURL + "/v1/pull", headers: headers, body: Array(#"{"table": "inspections"}"#.utf8))
            #expect(page.status == 200)
            #expect(page.text.components(separatedBy: #""$$attachment""#).count == 3, "both records: \(page.text)")
            let list = try await tables.send(.GET, "/tables/inspections")
            #expect(list.status == 200)
            guard case .array(let items)? = list.json?["items"] else {
                Issue.record("no items: \(list.text)")
                return
            }
            #expect(items.count == 2)
            for item in items {
                guard case .string(let hash)? = item["photo"]?["$attachment"] else {
                    Issue.record("no $attachment key: \(list.text)")
                    continue
                }
                #expect(hash == photo.sha256)
            }
            #expect(!list.text.contains("$$"))

            let context = try await SyncContext(store: InMemoryStore(), remote: try await live.remote("alice"))
            try await context.defineTable(TableSchema("inspections"))
            try await context.table("inspections").pull()
            let records = try await context.table("inspections").query()
            #expect(Set(records.map(\.id)) == ["i1", "i2"])
            for record in records {
                let reference = try record.fields["photo"].flatMap { try OfflineSync.Attachment(value: $0) }
                #expect(reference == photo, "\(record.id)")
            }
            #expect(try await context.attachmentData(photo) == Data(bytes))
            try await context.close()
        }
    }
}
