import Foundation
import NIOHTTP1
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// A download is served with the media type a row the caller may read declares for the file
/// (Docs/Attachments.md, "What a download is served as"): never a type from a row the caller
/// may not read, `application/octet-stream` when the declaration is no media type or the caller
/// reads the file only as its uploader, and always in a sandbox (`Content-Security-Policy`,
/// `nosniff`), as a download (`Content-Disposition: attachment`) unless a browser shows the
/// type without running anything in it.
@Suite("Attachment content types")
struct AttachmentContentTypeTests {
    static let policy = "sandbox; default-src 'none'"

    /// A small file of its own for each `seed`.
    static func file(_ seed: UInt8) -> [UInt8] { [UInt8](repeating: seed, count: 1000) }

    /// Stores `bytes` whole in one request as `token`'s identity; returns the hash.
    static func store(_ bytes: [UInt8], token: String, base: String) async throws -> String {
        let hash = sha256Hex(bytes)
        let stored = try await http(.POST, "\(base)/v1/attachments/\(hash)", headers: AttachmentHTTPTests.headers(token, [
            ("Upload-Complete", "?1"), ("Upload-Length", String(bytes.count)),
        ]), body: bytes)
        #expect(stored.status == 200)
        return hash
    }

    static func reference(_ bytes: [UInt8], _ contentType: String) throws -> Value {
        try OfflineSync.Attachment(sha256: sha256Hex(bytes), size: Int64(bytes.count), contentType: contentType).value
    }

    static func get(_ hash: String, token: String, base: String, method: NIOHTTP1.HTTPMethod = .GET,
                    _ extra: [(String, String)] = []) async throws -> RawResponse {
        try await http(method, "\(base)/v1/attachments/\(hash)", headers: AttachmentHTTPTests.headers(token, extra))
    }

    /// Pushes `operations`, each of which must apply.
    static func push(_ remote: HTTPRemoteStore, _ operations: [PushOperation]) async throws {
        let results = try await remote.push(operations)
        #expect(results.count == operations.count)
        for result in results {
            if case .applied = result.outcome {} else { Issue.record("not applied: \(result)") }
        }
    }

    @Test("a record's image/jpeg is GET's, a range's and HEAD's Content-Type, inline, with nosniff and the sandbox; before any record, octet-stream")
    func declaredTypeIsServed() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            let bytes = Self.file(1)
            let hash = try await Self.store(bytes, token: token, base: base)
            // Its uploader reads it before any row references it: bytes of no declared type.
            let bare = try await Self.get(hash, token: token, base: base)
            #expect(bare.status == 200)
            #expect(bare.header("Content-Type") == "application/octet-stream")
            #expect(bare.header("Content-Disposition") == "attachment")
            #expect(bare.header("Content-Security-Policy") == Self.policy)
            try await Self.push(try await live.remote("alice"), [
                AttachmentHTTPTests.insert("n1", "notes", ["photo": try Self.reference(bytes, "image/jpeg")]),
            ])
            let whole = try await Self.get(hash, token: token, base: base)
            let head = try await Self.get(hash, token: token, base: base, method: .HEAD)
            let range = try await Self.get(hash, token: token, base: base, [("Range", "bytes=0-9")])
            #expect(whole.status == 200)
            #expect(whole.body == bytes)
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(range.status == 206)
            for (name, answer) in [("GET", whole), ("HEAD", head), ("range", range)] {
                #expect(answer.header("Content-Type") == "image/jpeg", "\(name)")
                #expect(answer.header("X-Content-Type-Options") == "nosniff", "\(name)")
                #expect(answer.header("Content-Security-Policy") == Self.policy, "\(name)")
                #expect(answer.header("Content-Disposition") == "inline", "\(name)")
            }
            for name in ["Content-Type", "Content-Disposition", "Content-Security-Policy", "Content-Length"] {
                #expect(head.header(name) == whole.header(name), "\(name)")
            }
        }
    }

    @Test("types a browser would run (HTML, SVG, XHTML, XML, script, PDF) are served as declared, as a download, in the sandbox")
    func activeTypesAreDownloads() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            let declared = ["text/html", "Text/HTML; charset=utf-8", "image/svg+xml", "application/xhtml+xml", "text/xml",
                            "application/xml", "text/javascript", "application/javascript", "application/pdf"]
            let served = ["text/html", "text/html; charset=utf-8", "image/svg+xml", "application/xhtml+xml", "text/xml",
                          "application/xml", "text/javascript", "application/javascript", "application/pdf"]
            var fields: [String: Value] = [:], hashes: [String] = []
            for (index, type) in declared.enumerated() {
                let bytes = Self.file(UInt8(10 + index))
                hashes.append(try await Self.store(bytes, token: token, base: base))
                fields["f\(index)"] = try Self.reference(bytes, type)
            }
            try await Self.push(try await live.remote("alice"), [AttachmentHTTPTests.insert("n1", "notes", fields)])
            for (index, hash) in hashes.enumerated() {
                for method in [NIOHTTP1.HTTPMethod.GET, .HEAD] {
                    let answer = try await Self.get(hash, token: token, base: base, method: method)
                    #expect(answer.status == 200, "\(declared[index]) \(method)")
                    #expect(answer.header("Content-Type") == served[index], "\(declared[index]) \(method)")
                    #expect(answer.header("Content-Disposition") == "attachment", "\(declared[index]) \(method)")
                    #expect(answer.header("Content-Security-Policy") == Self.policy, "\(declared[index]) \(method)")
                    #expect(answer.header("X-Content-Type-Options") == "nosniff", "\(declared[index]) \(method)")
                }
            }
        }
    }

    @Test("a declaration that is no media type, or longer than 255 bytes, is served as application/octet-stream")
    func invalidTypesAreOctetStream() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            let longest = "image/" + String(repeating: "a", count: 249)
            let invalid = ["", "jpeg", "image/", "image /jpeg", "image/jpeg ", "image/jpeg; q", "image/jpeg\r\nX-Injected: 1",
                           "im\u{E4}ge/jpeg", longest + "a"]
            var fields: [String: Value] = [:], hashes: [String] = []
            for (index, type) in invalid.enumerated() {
                let bytes = Self.file(UInt8(40 + index))
                hashes.append(try await Self.store(bytes, token: token, base: base))
                fields["f\(index)"] = try Self.reference(bytes, type)
            }
            // The longest type served: 255 bytes.
            let edge = Self.file(60)
            let edgeHash = try await Self.store(edge, token: token, base: base)
            fields["edge"] = try Self.reference(edge, longest)
            try await Self.push(try await live.remote("alice"), [AttachmentHTTPTests.insert("n1", "notes", fields)])
            for (index, hash) in hashes.enumerated() {
                let answer = try await Self.get(hash, token: token, base: base)
                #expect(answer.status == 200, "\(index)")
                #expect(answer.header("Content-Type") == "application/octet-stream", "\(index)")
                #expect(answer.header("Content-Disposition") == "attachment", "\(index)")
                #expect(answer.header("X-Injected") == nil)
            }
            let served = try await Self.get(edgeHash, token: token, base: base)
            #expect(served.header("Content-Type") == longest)
            #expect(served.header("Content-Disposition") == "inline")
        }
    }

    @Test("bob is served the type of the row he may read, never that of a row he may not; an uploader with no readable row gets octet-stream")
    func typeComesFromAReadableRow() async throws {
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: true)) { live in
            let base = live.baseURL
            let aliceToken = try await live.token("alice"), bobToken = try await live.token("bob"), carolToken = try await live.token("carol")
            let alice = try await live.remote("alice")
            let bytes = Self.file(7)
            let hash = try await Self.store(bytes, token: aliceToken, base: base)
            try await Self.push(alice, [
                AttachmentHTTPTests.insert("L1", "lists", ["name": "shared with bob"]),
                AttachmentHTTPTests.insert("L2", "lists", ["name": "alice's own"]),
                AttachmentHTTPTests.insert("m-alice-1", "list_members", ["list_id": "L1", "user_id": "alice"]),
                AttachmentHTTPTests.insert("m-alice-2", "list_members", ["list_id": "L2", "user_id": "alice"]),
                AttachmentHTTPTests.insert("m-bob", "list_members", ["list_id": "L1", "user_id": "bob"]),
                // The row bob may not read sorts first: a type taken from the first reference
                // whoever may read it would be this one.
                AttachmentHTTPTests.insert("a-secret", "todos", ["list_id": "L2", "photo": try Self.reference(bytes, "image/png")]),
                AttachmentHTTPTests.insert("b-shared", "todos", ["list_id": "L1", "photo": try Self.reference(bytes, "image/jpeg")]),
            ])
            for method in [NIOHTTP1.HTTPMethod.GET, .HEAD] {
                let bob = try await Self.get(hash, token: bobToken, base: base, method: method)
                #expect(bob.status == 200)
                #expect(bob.header("Content-Type") == "image/jpeg", "\(method)")
            }
            // Alice may read both rows: the first reference by key decides, every time.
            for _ in 0..<2 { #expect(try await Self.get(hash, token: aliceToken, base: base).header("Content-Type") == "image/png") }
            // Carol uploads the same bytes and may read neither row: the bytes, of no type.
            #expect(try await Self.store(bytes, token: carolToken, base: base) == hash)
            let carol = try await Self.get(hash, token: carolToken, base: base)
            #expect(carol.status == 200)
            #expect(carol.body == bytes)
            #expect(carol.header("Content-Type") == "application/octet-stream")
            #expect(carol.header("Content-Disposition") == "attachment")
            // The row bob reads declares another type for the same file: he is served it.
            try await Self.push(alice, [PushOperation(
                id: "op-todos-b-shared-webp", table: "todos", itemId: "b-shared", kind: .update,
                item: Record(id: "b-shared", fields: ["list_id": "L1", "photo": try Self.reference(bytes, "image/webp")]), baseVersion: nil)])
            #expect(try await Self.get(hash, token: bobToken, base: base).header("Content-Type") == "image/webp")
            // The secret row goes: alice is served the type of the row left.
            try await Self.push(alice, [PushOperation(id: "op-todos-a-secret-delete", table: "todos", itemId: "a-secret",
                                                      kind: .delete, item: nil, baseVersion: nil)])
            #expect(try await Self.get(hash, token: aliceToken, base: base).header("Content-Type") == "image/webp")
        }
    }

    @Test("a reference recorded before types were kept is served the type its row declares")
    func referenceWithoutRecordedType() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            let bytes = Self.file(3)
            let hash = try await Self.store(bytes, token: token, base: base)
            try await Self.push(try await live.remote("alice"), [
                AttachmentHTTPTests.insert("n1", "notes", ["photo": try Self.reference(bytes, "image/png")]),
            ])
            // Each reference as an earlier version stored it: no contentType column.
            let rewritten = try await live.store.write { txn -> Int in
                let references = try txn.records(in: "__srv_att_refs", matching: .all)
                for reference in references {
                    _ = try txn.delete(id: reference.id, in: "__srv_att_refs")
                    try txn.upsert(Record(id: reference.id, fields: reference.fields.filter { $0.key != "contentType" }), in: "__srv_att_refs")
                }
                return references.count
            }
            #expect(rewritten == 1)
            let answer = try await Self.get(hash, token: token, base: base)
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type") == "image/png")
            #expect(answer.header("Content-Disposition") == "inline")
        }
    }

    @Test("media types by RFC 9110's grammar: type and subtype lowercased, parameters kept; what a browser may open inline", arguments: [
        ("image/jpeg", "image/jpeg", true),
        ("IMAGE/JPEG", "image/jpeg", true),
        ("video/mp4; codecs=\"avc1.42E01E, mp4a.40.2\"", "video/mp4; codecs=\"avc1.42E01E, mp4a.40.2\"", true),
        ("audio/mpeg ; rate=44100", "audio/mpeg ; rate=44100", true),
        ("text/plain;charset=UTF-8", "text/plain;charset=UTF-8", true),
        ("image/png;", "image/png;", true),
        ("text/plain; a=\"q\\\"uote\"", "text/plain; a=\"q\\\"uote\"", true),
        ("text/html", "text/html", false),
        ("image/svg+xml", "image/svg+xml", false),
        ("image/x-custom+xml", "image/x-custom+xml", false),
        ("application/xhtml+xml", "application/xhtml+xml", false),
        ("text/css", "text/css", false),
        ("application/pdf", "application/pdf", false),
        ("application/octet-stream", "application/octet-stream", false),
    ])
    func mediaTypes(declared: String, value: String, inline: Bool) {
        let type = AttachmentMediaType(declared: declared)
        #expect(type?.value == value)
        #expect(type?.opensInline == inline)
    }

    @Test("declarations that are no media type", arguments: [
        "", "jpeg", "image/", "/jpeg", "image /jpeg", "image/ jpeg", " image/jpeg", "image/jpeg ", "image/jpeg/x",
        "image/jpeg; q", "image/jpeg; q=", "image/jpeg; q =1", "image/jpeg; q=\"open", "image/jpeg;q=a b",
        "image/jpeg\r\nX-Injected: 1", "image/jpeg\u{0}", "im\u{E4}ge/jpeg", "text/plain; a=\"\u{E9}\"",
        "image/" + String(repeating: "a", count: 250),
    ])
    func notMediaTypes(declared: String) {
        #expect(AttachmentMediaType(declared: declared) == nil)
    }
}
