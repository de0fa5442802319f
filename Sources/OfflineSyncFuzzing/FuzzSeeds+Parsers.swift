import OfflineSync
import OfflineSyncGRDB
import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncStoreKit

extension FuzzSeeds {
    /// The seeds of the console's parsers, the attachments' and GRDB's column codec.
    static func parserSeeds() async throws -> [(target: String, name: String, bytes: [UInt8])] {
        var seeds: [(target: String, name: String, bytes: [UInt8])] = []
        func add(_ target: String, _ name: String, _ text: String) { seeds.append((target, name, Array(text.utf8))) }

        let forms = ["key=" + FuzzTarget.formEncoded("s3cr3t key/+&=ü"), "user=admin&key=plain-key&remember=1",
                     "key=%ZZ&key=second%20one", "key=a+b%2Bc%26d%3De"]
        for (index, form) in forms.enumerated() { add("console-form", "form-\(index)", form) }

        for (index, cookie) in cookies.enumerated() { add("console-cookie", "cookie-\(index)", cookie) }

        let exposition = String(decoding: ServerMetrics().exposition(), as: UTF8.self)
        add("metric-totals", "exposition", exposition)
        add("metric-totals", "counted", counted(exposition))
        add("metric-totals", "escapes", """
            # HELP offline_sync_http_requests_total HTTP requests answered, by route template, method and status.
            # TYPE offline_sync_http_requests_total counter
            offline_sync_http_requests_total{route="/v1/push",method="POST",status="200"} 41
            offline_sync_http_requests_total{route="/v1/pull",method="POST",status="403"} 2
            offline_sync_push_operations_total{outcome="applied"} 40
            offline_sync_attachment_bytes_total{direction="sent"} 1.5e6
            offline_sync_console_signin_refused_total{reason="wrong_key",note="a \\"quoted\\" \\\\ back\\nslash"} 3
            offline_sync_pull_pages_total 9

            """)

        let proxies = ["10.0.0.0/8, 192.168.1.7\n10.0.0.2\n203.0.113.5, 10.0.0.9",
                       "10.0.0.0/8,fd00::/8\n::ffff:10.1.2.3\n198.51.100.1\n[2001:db8::7]:443, fd00::2",
                       "::ffff:10.0.0.0/104\n10.0.0.1\n203.0.113.5:5555, unknown, 10.0.0.3",
                       "0.0.0.0/0, ::/0\n127.0.0.1\n"]
        for (index, input) in proxies.enumerated() { add("trusted-proxies", "proxies-\(index)", input) }

        let ranges = ["bytes 0-1/10", " BYTES 4194304-8388607/20971520 ", "bytes */0", "bytes 65536-69999/70000",
                      "bytes 999999999999999998-999999999999999998/999999999999999999"]
        for (index, range) in ranges.enumerated() { add("content-range", "range-\(index)", range) }

        for (name, bytes) in try await sealedFiles() { seeds.append(("sealed-blob", name, bytes)) }
        for (name, fieldType, stored) in columns { seeds.append(("grdb-column", name, FuzzTarget.columnInput(fieldType, stored))) }
        return seeds
    }

    /// `Cookie` field values (one a line): a signed session, one among other cookies beside an
    /// ended one, one signed under another key, and one as `Set-Cookie` spells it.
    static var cookies: [String] {
        let now = FuzzTarget.consoleNow
        let session = ConsoleSession(expiry: now + 12 * 3600, id: "0123456789abcdef0123456789abcdef")
        let ended = ConsoleSession(expiry: now - 1, id: "fedcba9876543210fedcba9876543210")
        func cookie(_ session: ConsoleSession, _ key: String) -> String {
            String(session.setCookie(adminKey: key, secure: false).prefix { $0 != ";" })
        }
        return [
            cookie(session, FuzzTarget.consoleAdminKey),
            "theme=dark; \(cookie(session, FuzzTarget.consoleAdminKey)); lang=en\n\(cookie(ended, FuzzTarget.consoleAdminKey))",
            cookie(session, FuzzTarget.consoleOtherKey),
            session.setCookie(adminKey: FuzzTarget.consoleAdminKey, secure: true),
        ]
    }

    /// The exposition with a count on every sample, as a server that has worked writes it.
    static func counted(_ exposition: String) -> String {
        let counts = ["3", "12", "0.5", "1e3", "7", "250"]
        var lines: [String] = []
        for (index, line) in exposition.split(separator: "\n").enumerated() {
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " ") else {
                lines.append(String(line))
                continue
            }
            lines.append(String(line[...space]) + counts[index % counts.count])
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Attachment files sealed as an encrypted-file store seals them (with the target's key),
    /// each committed under its hash: empty, short, and two pieces (a whole 64 KiB one and a
    /// shorter last one).
    static func sealedFiles() async throws -> [(name: String, bytes: [UInt8])] {
        try await withScratch { directory in
            let blobs = BlobDirectory(path: directory, sealing: FuzzTarget.attachmentSealing)
            let contents: [(String, [UInt8])] = [
                ("empty", []), ("note", Array("a short note\n".utf8)),
                ("two-pieces", (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }),
            ]
            var files: [(name: String, bytes: [UInt8])] = []
            for (name, bytes) in contents {
                let hash = AttachmentHasher.hash(bytes)
                let writer = try blobs.makeWriter()
                try writer.append(bytes)
                try writer.commit(as: hash)
                files.append((name, fileContents(blobs.objectPath(hash)) ?? []))
            }
            return files
        }
    }

    /// A GRDB seed: its name, the field's type and the column's value.
    typealias Column = (name: String, fieldType: FieldType, stored: SQLiteValue)

    /// Columns of every field type, as the codec writes them and as other code may have.
    static var columns: [Column] {
        let date = Value.date(Timestamp(millisecondsSince1970: 1_795_824_000_123))
        let reference = Value.object([Attachment.marker: .string(AttachmentHasher.hash([1, 2, 3])), "size": .int(3), "contentType": .string("image/png")])
        let hash = AttachmentHasher.hash([4, 5])
        let plain: [Column] = [
            ("bool-int", .bool, .int(1)), ("int-int", .int, .int(-42)), ("int-real", .int, .double(3)),
            ("double-real", .double, .double(2.5)), ("double-int", .double, .int(7)),
            ("string-text", .string, .text("josé — 日本 🎉")), ("string-null", .string, .null), ("bytes-blob", .bytes, .blob([0, 1, 0xFF])),
        ]
        let dates: [Column] = [
            ("date-text", .date, GRDBColumnCodec.encode(date, as: .date)), ("date-minutes", .date, .text("2026-11-28T05:49")),
            ("date-int", .date, .int(1_795_824_000)), ("date-real", .date, .double(1_795_824_000.5)),
        ]
        let array = Value.array([.int(1), .string("x"), .bytes([1]), date, reference])
        let object = Value.object(["photo": reference, "ratio": .double(0.5), "tags": .array([.string("a")])])
        let anything = Value.object(["a": .array([.null, .bool(true), .double(-0.5)])])
        let documents: [Column] = [
            ("array-text", .array, GRDBColumnCodec.encode(array, as: .array)),
            ("object-text", .object, GRDBColumnCodec.encode(object, as: .object)),
            ("object-earlier", .object, .text("{\"photo\":{\"$$attachment\":\"\(hash)\",\"size\":2,\"contentType\":\"text/plain\"}}")),
            ("any-text", .any, GRDBColumnCodec.encode(anything, as: .any)),
            ("any-int", .any, .int(9)), ("any-real", .any, .double(0.25)), ("any-blob", .any, .blob([9, 8])),
        ]
        return plain + dates + documents
    }
}
