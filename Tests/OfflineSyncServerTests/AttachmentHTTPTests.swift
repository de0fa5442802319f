import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// Attachments on the live server: the resumable-upload request forms (interop version 6,
/// as swift-nio-extras' NIOResumableUpload reads them), downloads with ranges, the push's
/// "upload before reference" rule, and access that follows the sync rules with one 404.
@Suite("Attachments over HTTP")
struct AttachmentHTTPTests {
    static let bytes: [UInt8] = (0..<3_000_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 11) }
    static let hash = sha256Hex(bytes)

    /// `Authorization` plus the interop version.
    static func headers(_ token: String, _ more: [(String, String)] = []) -> [(String, String)] {
        [("Authorization", "Bearer \(token)"), ("Upload-Draft-Interop-Version", "6")] + more
    }

    /// Uploads `bytes` in two requests: a creation with the first part, an append with the rest.
    static func upload(_ bytes: [UInt8], hash: String, token: String, base: String) async throws -> RawResponse {
        let half = bytes.count / 2
        let created = try await http(.POST, "\(base)/v1/attachments/\(hash)", headers: headers(token, [
            ("Upload-Complete", "?0"), ("Upload-Length", String(bytes.count)),
        ]), body: Array(bytes[..<half]))
        #expect(created.status == 201)
        #expect(created.header("Location") == "/v1/attachments/\(hash)/upload")
        #expect(created.header("Upload-Offset") == String(half))
        #expect(created.header("Upload-Complete") == "?0")
        return try await http(.PATCH, "\(base)/v1/attachments/\(hash)/upload", headers: headers(token, [
            ("Upload-Offset", String(half)), ("Upload-Complete", "?1"), ("Content-Type", "application/partial-upload"),
        ]), body: Array(bytes[half...]))
    }

    static func insert(_ id: String, _ table: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    static func reference(_ hash: String = hash, size: Int = bytes.count) throws -> Value {
        try OfflineSync.Attachment(sha256: hash, size: Int64(size), contentType: "image/jpeg").value
    }

    @Test("an upload resumes at the server's offset, a wrong offset is a 409, and the file reads back whole and by range")
    func resumableUploadAndDownload() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            let options = try await http(.OPTIONS, "\(base)/v1/attachments", headers: Self.headers(token))
            #expect(options.status == 200)
            #expect(options.header("Upload-Limit") == "max-size=\(2 << 30), min-size=0")
            let half = Self.bytes.count / 2
            let created = try await http(.POST, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(token, [
                ("Upload-Complete", "?0"), ("Upload-Length", String(Self.bytes.count)),
            ]), body: Array(Self.bytes[..<half]))
            #expect(created.status == 201)
            let offset = try await http(.HEAD, "\(base)/v1/attachments/\(Self.hash)/upload", headers: Self.headers(token))
            #expect(offset.status == 204)
            #expect(offset.header("Upload-Offset") == String(half))
            #expect(offset.header("Upload-Complete") == "?0")
            #expect(offset.header("Cache-Control") == "no-store")
            let wrong = try await http(.PATCH, "\(base)/v1/attachments/\(Self.hash)/upload", headers: Self.headers(token, [
                ("Upload-Offset", "10"), ("Upload-Complete", "?1"), ("Content-Type", "application/partial-upload"),
            ]), body: Array(Self.bytes[10...]))
            #expect(wrong.status == 409)
            #expect(wrong.header("Upload-Offset") == String(half))
            let done = try await http(.PATCH, "\(base)/v1/attachments/\(Self.hash)/upload", headers: Self.headers(token, [
                ("Upload-Offset", String(half)), ("Upload-Complete", "?1"), ("Content-Type", "application/partial-upload"),
            ]), body: Array(Self.bytes[half...]))
            #expect(done.status == 200)
            #expect(done.header("Upload-Complete") == "?1")
            #expect(done.header("Upload-Offset") == String(Self.bytes.count))
            let whole = try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(token))
            #expect(whole.status == 200)
            #expect(sha256Hex(whole.body) == Self.hash, "\(whole.body.count) bytes")
            #expect(whole.header("ETag") == "\"\(Self.hash)\"")
            let rest = try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(token, [("Range", "bytes=1234567-")]))
            #expect(rest.status == 206)
            #expect(rest.header("Content-Range") == "bytes 1234567-\(Self.bytes.count - 1)/\(Self.bytes.count)")
            #expect(sha256Hex(rest.body) == sha256Hex(Array(Self.bytes[1_234_567...])), "\(rest.body.count) bytes")
            let past = try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(token, [("Range", "bytes=\(Self.bytes.count)-")]))
            #expect(past.status == 416)
        }
    }

    @Test("bytes that do not hash to the name are refused and dropped; an over-size or over-quota upload is refused before any byte is kept")
    func damagedAndOversizeUploads() async throws {
        try await LiveServer.with(attachmentLimits: AttachmentLimits(maximumSize: 4_000_000, quotaPerIdentity: 5_000_000)) { live in
            let token = try await live.token("alice"), base = live.baseURL
            var altered = Self.bytes
            altered[2_999_999] ^= 1
            let refused = try await Self.upload(altered, hash: Self.hash, token: token, base: base)
            #expect(refused.status == 400)
            #expect(refused.errorCode == "attachmentDamaged")
            let gone = try await http(.HEAD, "\(base)/v1/attachments/\(Self.hash)/upload", headers: Self.headers(token))
            #expect(gone.status == 404)
            let big = try await http(.POST, "\(base)/v1/attachments/\(String(repeating: "a", count: 64))", headers: Self.headers(token, [
                ("Upload-Complete", "?0"), ("Upload-Length", "4000001"),
            ]), body: [1, 2, 3])
            #expect(big.status == 413)
            #expect(try await http(.HEAD, "\(base)/v1/attachments/\(String(repeating: "a", count: 64))/upload", headers: Self.headers(token)).status == 404)
            #expect(try await Self.upload(Self.bytes, hash: Self.hash, token: token, base: base).status == 200)
            let overQuota = try await http(.POST, "\(base)/v1/attachments/\(String(repeating: "b", count: 64))", headers: Self.headers(token, [
                ("Upload-Complete", "?0"), ("Upload-Length", "2500000"),
            ]), body: [])
            #expect(overQuota.status == 413)
        }
    }

    @Test("a small file in one request is finished at once; damaged bytes keep nothing; the quota counts every upload and frees a cancelled one")
    func wholeSmallUploadsAndQuota() async throws {
        try await LiveServer.with(attachmentLimits: AttachmentLimits(quotaPerIdentity: 2_000_000)) { live in
            let token = try await live.token("alice"), base = live.baseURL
            func post(_ bytes: [UInt8], _ hash: String, complete: Bool = true, length: Int? = nil) async throws -> RawResponse {
                try await http(.POST, "\(base)/v1/attachments/\(hash)", headers: Self.headers(token, [
                    ("Upload-Complete", complete ? "?1" : "?0"), ("Upload-Length", String(length ?? bytes.count)),
                ]), body: bytes)
            }
            let small = Array(Self.bytes[..<900_000]), smallHash = sha256Hex(small)
            var damaged = small
            damaged[0] ^= 1
            let refused = try await post(damaged, smallHash)
            #expect(refused.status == 400)
            #expect(refused.errorCode == "attachmentDamaged")
            #expect(try await http(.HEAD, "\(base)/v1/attachments/\(smallHash)/upload", headers: Self.headers(token)).status == 404)
            let stored = try await post(small, smallHash)
            #expect(stored.status == 200)
            #expect(stored.header("Upload-Complete") == "?1")
            #expect(stored.header("Upload-Offset") == "900000")
            let back = try await http(.GET, "\(base)/v1/attachments/\(smallHash)", headers: Self.headers(token))
            #expect(sha256Hex(back.body) == smallHash)
            #expect(try await post(small, smallHash).status == 200, "sending it again finds it whole")
            // 900,000 held; an upload of 1,000,000 under way takes the quota to 1,900,000.
            let other = Array(Self.bytes[1_000_000..<2_000_000]), otherHash = sha256Hex(other)
            #expect(try await post(Array(other[..<10]), otherHash, complete: false, length: other.count).status == 201)
            let third = Array(Self.bytes[2_000_000..<2_200_000])
            let over = try await post(third, sha256Hex(third))
            #expect(over.status == 413, "900,000 + 1,000,000 + 200,000 is over 2,000,000")
            #expect(try await http(.DELETE, "\(base)/v1/attachments/\(otherHash)/upload", headers: Self.headers(token)).status == 204)
            #expect(try await post(third, sha256Hex(third)).status == 200, "the cancelled upload's bytes count no more")
        }
    }

    /// What an identity may hold is checked on every append, not only when an upload is
    /// created: an upload without `Upload-Length` reserves nothing and is charged as it grows.
    @Test("the quota is checked on every append, atomically across an identity's uploads; a 413 carries Upload-Limit")
    func quotaOnEveryAppend() async throws {
        try await LiveServer.with(attachmentLimits: AttachmentLimits(quotaPerIdentity: 2_000_000)) { live in
            let token = try await live.token("alice"), base = live.baseURL
            func create(_ hash: String, _ bytes: [UInt8]) async throws -> RawResponse {
                try await http(.POST, "\(base)/v1/attachments/\(hash)", headers: Self.headers(token, [("Upload-Complete", "?0")]), body: bytes)
            }
            func append(_ hash: String, at offset: Int, _ bytes: [UInt8], complete: Bool) async throws -> RawResponse {
                try await http(.PATCH, "\(base)/v1/attachments/\(hash)/upload", headers: Self.headers(token, [
                    ("Upload-Offset", String(offset)), ("Upload-Complete", complete ? "?1" : "?0"), ("Content-Type", "application/partial-upload"),
                ]), body: bytes)
            }
            func offset(_ hash: String) async throws -> String? {
                try await http(.HEAD, "\(base)/v1/attachments/\(hash)/upload", headers: Self.headers(token)).header("Upload-Offset")
            }
            let held = Array(Self.bytes[..<1_500_000])
            #expect(try await Self.upload(held, hash: sha256Hex(held), token: token, base: base).status == 200)
            // An upload with no length: created at zero usage, then grown past the quota.
            let open = String(repeating: "d", count: 64)
            #expect(try await create(open, Array(Self.bytes[..<100_000])).status == 201)
            let over = try await append(open, at: 100_000, Array(Self.bytes[100_000..<1_000_000]), complete: true)
            #expect(over.status == 413)
            #expect(over.errorCode == "limitExceeded")
            #expect(over.header("Upload-Limit") == "max-size=\(2 << 30), min-size=0")
            #expect(try await offset(open) == "100000", "the refused append kept nothing")
            #expect(try await http(.HEAD, "\(base)/v1/attachments/\(open)/upload", headers: Self.headers(token)).header("Upload-Length") == nil)
            // Up to the quota exactly is taken; one byte more is not.
            #expect(try await append(open, at: 100_000, Array(Self.bytes[100_000..<500_000]), complete: false).status == 204)
            #expect(try await append(open, at: 500_000, [1], complete: false).status == 413)
            #expect(try await http(.DELETE, "\(base)/v1/attachments/\(open)/upload", headers: Self.headers(token)).status == 204)
            // Two uploads at zero usage appended at once: 500,000 bytes are left, 300,000 each
            // would pass alone, and the two together may not.
            let first = String(repeating: "e", count: 64), second = String(repeating: "f", count: 64)
            #expect(try await create(first, []).status == 201)
            #expect(try await create(second, []).status == 201)
            let piece = Array(Self.bytes[..<300_000])
            async let a = append(first, at: 0, piece, complete: false)
            async let b = append(second, at: 0, piece, complete: false)
            let statuses = try await [a.status, b.status].sorted()
            #expect(statuses == [204, 413])
        }
    }

    @Test("an identity holds at most maximumOpenUploads unfinished uploads: one more is 413 limitExceeded until one is finished or cancelled; others are not held")
    func openUploadsAreBounded() async throws {
        try await LiveServer.with(attachmentLimits: AttachmentLimits(maximumOpenUploads: 3)) { live in
            let token = try await live.token("alice"), base = live.baseURL
            func create(_ hash: String, token: String, _ bytes: [UInt8] = []) async throws -> RawResponse {
                try await http(.POST, "\(base)/v1/attachments/\(hash)", headers: Self.headers(token, [("Upload-Complete", "?0")]), body: bytes)
            }
            // Made up names, no length: each reserves no byte of the quota.
            let names = ["1", "2", "3", "4", "5", "6"].map { String(repeating: $0, count: 64) }
            for name in names.prefix(3) { #expect(try await create(name, token: token).status == 201) }
            // Creating one it has already is no new upload.
            #expect(try await create(names[0], token: token).status == 201)
            let refused = try await create(names[3], token: token)
            #expect(refused.status == 413)
            #expect(refused.errorCode == "limitExceeded")
            #expect(try await http(.HEAD, "\(base)/v1/attachments/\(names[3])/upload", headers: Self.headers(token)).status == 404,
                    "the refused creation left an upload")
            // Another identity counts its own.
            #expect(try await create(names[3], token: try await live.token("bob")).status == 201)
            // A whole small file in one request is no unfinished upload, and is taken.
            let small = Array(Self.bytes[..<1000])
            let whole = try await http(.POST, "\(base)/v1/attachments/\(sha256Hex(small))", headers: Self.headers(token, [
                ("Upload-Complete", "?1"), ("Upload-Length", "1000"),
            ]), body: small)
            #expect(whole.status == 200)
            // Cancelling one makes room for one.
            #expect(try await http(.DELETE, "\(base)/v1/attachments/\(names[0])/upload", headers: Self.headers(token)).status == 204)
            let file = Array(Self.bytes[1000..<3000]), fileHash = sha256Hex(file)
            #expect(try await create(fileHash, token: token, Array(file[..<500])).status == 201)
            #expect(try await create(names[4], token: token).status == 413)
            // Finishing one makes room too.
            let finished = try await http(.PATCH, "\(base)/v1/attachments/\(fileHash)/upload", headers: Self.headers(token, [
                ("Upload-Offset", "500"), ("Upload-Complete", "?1"), ("Content-Type", "application/partial-upload"),
            ]), body: Array(file[500...]))
            #expect(finished.status == 200)
            #expect(try await create(names[4], token: token).status == 201)
            #expect(try await create(names[5], token: token).status == 413)
        }
    }

    @Test("a whole file sent over an upload created with another length is 400 invalidValue, not a limit, and keeps the upload")
    func wholeFileOfAnotherLength() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            let small = Array(Self.bytes[..<500]), hash = sha256Hex(small)
            let created = try await http(.POST, "\(base)/v1/attachments/\(hash)", headers: Self.headers(token, [
                ("Upload-Complete", "?0"), ("Upload-Length", "1000"),
            ]), body: [])
            #expect(created.status == 201)
            let whole = try await http(.POST, "\(base)/v1/attachments/\(hash)", headers: Self.headers(token, [
                ("Upload-Complete", "?1"), ("Upload-Length", "500"),
            ]), body: small)
            #expect(whole.status == 400)
            #expect(whole.errorCode == "invalidValue")
            #expect(whole.header("Upload-Limit") == nil)
            let state = try await http(.HEAD, "\(base)/v1/attachments/\(hash)/upload", headers: Self.headers(token))
            #expect(state.header("Upload-Offset") == "0")
            #expect(state.header("Upload-Length") == "1000")
        }
    }

    @Test("an upload completed short of its declared length is refused and kept to resume; the offset retrieval echoes Upload-Length")
    func shortCompletion() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice"), base = live.baseURL
            let file = Array(Self.bytes[..<2_000_000]), hash = sha256Hex(file)
            let created = try await http(.POST, "\(base)/v1/attachments/\(hash)", headers: Self.headers(token, [
                ("Upload-Complete", "?0"), ("Upload-Length", "2000000"),
            ]), body: Array(file[..<100]))
            #expect(created.status == 201)
            let short = try await http(.PATCH, "\(base)/v1/attachments/\(hash)/upload", headers: Self.headers(token, [
                ("Upload-Offset", "100"), ("Upload-Complete", "?1"), ("Content-Type", "application/partial-upload"),
            ]), body: Array(file[100..<1_500_000]))
            #expect(short.status == 400)
            let state = try await http(.HEAD, "\(base)/v1/attachments/\(hash)/upload", headers: Self.headers(token))
            #expect(state.header("Upload-Offset") == "1500000")
            #expect(state.header("Upload-Complete") == "?0")
            #expect(state.header("Upload-Length") == "2000000")
            #expect(try await http(.GET, "\(base)/v1/attachments/\(hash)", headers: Self.headers(token)).status == 404, "not a file yet")
            let rest = try await http(.PATCH, "\(base)/v1/attachments/\(hash)/upload", headers: Self.headers(token, [
                ("Upload-Offset", "1500000"), ("Upload-Complete", "?1"), ("Content-Type", "application/partial-upload"),
            ]), body: Array(file[1_500_000...]))
            #expect(rest.status == 200)
            let done = try await http(.HEAD, "\(base)/v1/attachments/\(hash)/upload", headers: Self.headers(token))
            #expect(done.header("Upload-Length") == "2000000")
            // A whole small file in one request with a body short of its Upload-Length keeps nothing.
            let small = Array(Self.bytes[..<500]), smallHash = sha256Hex(Array(small[..<400]))
            let cut = try await http(.POST, "\(base)/v1/attachments/\(smallHash)", headers: Self.headers(token, [
                ("Upload-Complete", "?1"), ("Upload-Length", "500"),
            ]), body: Array(small[..<400]))
            #expect(cut.status == 400)
            #expect(try await http(.HEAD, "\(base)/v1/attachments/\(smallHash)/upload", headers: Self.headers(token)).status == 404)
        }
    }

    @Test("a record is refused until its attachment is uploaded; nobody takes a file by naming its hash; readers follow the rules, with one 404 for all else")
    func accessFollowsTheRules() async throws {
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: true)) { live in
            let base = live.baseURL
            let aliceToken = try await live.token("alice"), bobToken = try await live.token("bob"), carolToken = try await live.token("carol")
            let alice = try await live.remote("alice"), bob = try await live.remote("bob")
            let early = try await alice.push([Self.insert("t1", "todos", ["list_id": "L1", "photo": try Self.reference()])])
            guard case .rejected(let reason, let status) = early.first?.outcome else { Issue.record("\(early)"); return }
            #expect(status == 409)
            // The code travels typed; the reason is a sentence without it.
            #expect(early.first?.rejectionCode == .attachmentMissing)
            #expect(!reason.hasPrefix("attachmentMissing"), "\(reason)")
            #expect(try await Self.upload(Self.bytes, hash: Self.hash, token: aliceToken, base: base).status == 200)
            // Bob knows the hash but may read no row that references it: he may not reference it either.
            let stolen = try await bob.push([Self.insert("n1", "notes", ["photo": try Self.reference()])])
            guard case .rejected(_, 409)? = stolen.first?.outcome else { Issue.record("\(stolen)"); return }
            #expect(stolen.first?.rejectionCode == .attachmentMissing)
            // The refused operation's outcome is kept for its id: the record goes again as a new operation.
            var again = Self.insert("t1", "todos", ["list_id": "L1", "photo": try Self.reference()])
            again.id = "op-todos-t1-again"
            let applied = try await alice.push([
                Self.insert("L1", "lists", ["name": "site"]),
                Self.insert("m-alice", "list_members", ["list_id": "L1", "user_id": "alice"]),
                again,
            ])
            #expect(applied.allSatisfy { if case .applied = $0.outcome { true } else { false } })
            let absent = String(repeating: "c", count: 64)
            // Bob and carol: the same 404 on every route for alice's file and for no file at all.
            for token in [bobToken, carolToken] {
                for hash in [Self.hash, absent] {
                    for (method, path, extra) in [(HTTPMethodName.GET, "", [(String, String)]()), (.GET, "", [("Range", "bytes=5-")]),
                                                  (.HEAD, "", []), (.HEAD, "/upload", [])] {
                        let answer = try await http(method.nio, "\(base)/v1/attachments/\(hash)\(path)", headers: Self.headers(token, extra))
                        #expect(answer.status == 404, "\(method) \(path) \(extra)")
                        #expect(answer.body.isEmpty)
                    }
                }
            }
            // Bob joins the list: he reads the file. He leaves it: 404 again.
            _ = try await alice.push([Self.insert("m-bob", "list_members", ["list_id": "L1", "user_id": "bob"])])
            let read = try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(bobToken))
            #expect(read.status == 200)
            #expect(sha256Hex(read.body) == Self.hash)
            let resume = try await http(.HEAD, "\(base)/v1/attachments/\(Self.hash)/upload", headers: Self.headers(bobToken))
            #expect(resume.header("Upload-Complete") == "?1", "a file bob may read is not sent again")
            _ = try await alice.push([PushOperation(id: "op-remove-bob", table: "list_members", itemId: "m-bob", kind: .delete, item: nil, baseVersion: nil)])
            #expect(try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(bobToken)).status == 404)
            // Carol uploads the same bytes herself: the same answers as a first upload, then hers to use.
            #expect(try await Self.upload(Self.bytes, hash: Self.hash, token: carolToken, base: base).status == 200)
            #expect(sha256Hex(try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(carolToken)).body) == Self.hash)
            // Owner-only rows: alice's own note referencing it keeps it hers after the todo goes.
            let note = try await alice.push([Self.insert("n1", "notes", ["photo": try Self.reference()])])
            guard case .applied? = note.first?.outcome else { Issue.record("\(note)"); return }
        }
    }

    @Test("a file no row references is collected after the grace period; a referenced one stays")
    func unreferencedFilesAreCollected() async throws {
        try await LiveServer.with(attachmentLimits: AttachmentLimits(grace: .zero)) { live in
            let token = try await live.token("alice"), base = live.baseURL
            let small: [UInt8] = Array(repeating: 5, count: 1000), smallHash = sha256Hex(small)
            #expect(try await Self.upload(Self.bytes, hash: Self.hash, token: token, base: base).status == 200)
            #expect(try await Self.upload(small, hash: smallHash, token: token, base: base).status == 200)
            let alice = try await live.remote("alice")
            _ = try await alice.push([Self.insert("n1", "notes", ["photo": try Self.reference()])])
            try await Task.sleep(for: .milliseconds(5))
            #expect(try await live.server.service.pruneAttachments() == 1)
            #expect(try await http(.GET, "\(base)/v1/attachments/\(smallHash)", headers: Self.headers(token)).status == 404)
            #expect(sha256Hex(try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(token)).body) == Self.hash)
            // The record's delete drops the reference: the next collection takes the file.
            _ = try await alice.push([PushOperation(id: "op-del", table: "notes", itemId: "n1", kind: .delete, item: nil, baseVersion: nil)])
            #expect(try await live.server.service.pruneAttachments() == 1)
            #expect(try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(token)).status == 404)
        }
    }

    /// `serve` collects on a timer (`--attachment-prune-seconds`): an unreferenced file goes
    /// without an operator's call, a referenced one stays.
    @Test("the server collects an unreferenced file on its own prune interval; a referenced one stays")
    func scheduledCollection() async throws {
        // A grace long enough for the upload in pieces and the record's push on a machine busy
        // with the whole suite: a collection between two pieces would take the upload as
        // abandoned, and one between the upload and the push the file as unreferenced (three
        // seconds were not enough once).
        try await LiveServer.with(attachmentLimits: AttachmentLimits(grace: .seconds(20)),
                                  configure: { $0.attachmentPruneInterval = .milliseconds(100) }) { live in
            let token = try await live.token("alice"), base = live.baseURL
            let small: [UInt8] = Array(repeating: 6, count: 1000), smallHash = sha256Hex(small)
            let alice = try await live.remote("alice")
            #expect(try await Self.upload(Self.bytes, hash: Self.hash, token: token, base: base).status == 200)
            let pushed = try await alice.push([Self.insert("n1", "notes", ["photo": try Self.reference()])])
            guard case .applied = pushed.first?.outcome else { Issue.record("the record was not stored: \(pushed)"); return }
            #expect(try await Self.upload(small, hash: smallHash, token: token, base: base).status == 200)
            // Asked until the collection has run (the server gives no signal of a round).
            let deadline = ContinuousClock.now + .seconds(120)
            var status = 200
            while status != 404, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                status = try await http(.HEAD, "\(base)/v1/attachments/\(smallHash)/upload", headers: Self.headers(token)).status
            }
            #expect(status == 404)
            let kept = try await http(.HEAD, "\(base)/v1/attachments/\(Self.hash)/upload", headers: Self.headers(token))
            #expect((200...204).contains(kept.status))
            #expect(sha256Hex(try await http(.GET, "\(base)/v1/attachments/\(Self.hash)", headers: Self.headers(token)).body) == Self.hash)
        }
    }
}

/// The methods the leak test walks.
enum HTTPMethodName: String {
    case GET, HEAD
    var nio: NIOHTTP1.HTTPMethod { self == .GET ? .GET : .HEAD }
}

import NIOHTTP1
import Crypto

/// SHA-256 as lowercase hex.
func sha256Hex(_ bytes: [UInt8]) -> String {
    SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
}
