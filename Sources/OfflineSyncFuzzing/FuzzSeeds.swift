import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncEncryptedFile
import OfflineSyncLMDB
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncWire

/// The seed inputs the encoders write (`offline-sync-fuzz seeds DIR`): well-formed
/// documents, streams and store files for the fuzzer to mutate, so that it starts deep in
/// each parser rather than at its first check. Seeds written by hand or by real clients
/// (the identity tokens and key sets, the SigV4 requests, the YAML documents) are committed
/// beside them in Tests/Fuzz/Corpus.
package enum FuzzSeeds {
    /// Every generated seed: the target it feeds, a file name, the bytes.
    package static func all() async throws -> [(target: String, name: String, bytes: [UInt8])] {
        var seeds: [(target: String, name: String, bytes: [UInt8])] = []
        func add(_ target: String, _ name: String, _ bytes: [UInt8]) { seeds.append((target, name, bytes)) }

        for (index, value) in values.enumerated() {
            add("json", "value-\(index)", bytes(Wire.json(value)))
        }
        add("json", "operations", bytes(.object([("operations", .array(operations.map(Wire.json)))])))

        add("native-push", "every-kind", bytes(.object([("operations", .array(operations.map(Wire.json)))])))
        add("native-push", "answered-batch", bytes(.object([("operations", .array(FuzzTarget.answeredBatch.map(Wire.json)))])))

        let predicate = QueryPredicate.and([.compare("done", .equal, .bool(false)), .or([.isNull("due"), .compare("due", .less, .int(5))])])
        add("native-pull", "first", bytes(Wire.json(PullRequest(table: "todos"))))
        add("native-pull", "resumed", bytes(Wire.json(PullRequest(table: "todos", predicate: predicate, cursor: "17:3", limit: 100))))

        for (index, page) in pages.enumerated() {
            add("native-pull-page", "page-\(index)", bytes(Wire.json(page)))
        }

        add("binary-push", "every-kind", PushBatch.encode(operations: operations))
        add("binary-push", "answered-batch", PushBatch.encode(operations: FuzzTarget.answeredBatch))

        let answers: [PushResult] = [
            PushResult(operationId: "op-1", outcome: .applied(Record(id: "a", fields: ["title": .string("milk"), "done": .bool(false)], version: "1"))),
            PushResult(operationId: "op-2", outcome: .conflict(serverRecord: Record(id: "b", fields: ["title": .string("ham")], version: "4"))),
            PushResult(operationId: "op-3", outcome: .rejected(reason: "forbidden", status: 403)),
        ]
        add("binary-push-answer", "mixed", PushBatch.encode(results: answers, answering: FuzzTarget.answeredBatch))

        var stream = PageStream.header
        for page in pages { PageStream.write(page, into: &stream) }
        PageStream.writeEnd(into: &stream)
        add("page-stream", "pages", [0x40] + stream)
        var failed = PageStream.header
        PageStream.write(pages[0], into: &failed)
        PageStream.writeFailure(status: 403, error: "forbidden", message: "table 'secrets' is not readable", into: &failed)
        add("page-stream", "failure", [0x07] + failed)

        for (index, filter) in filters.enumerated() { add("odata-filter", "filter-\(index)", Array(filter.utf8)) }
        let ranges = ["bytes=0-1\n\n\n\n1000", "bytes=-100\n\"e\"\n\n\n50", "bytes=10-\n\n\"e\"\n\n0",
                      "bytes=0-99\n\n\nW/\"e\", \"f\"\n2048", "bytes=5-2, 7-9\n\n*\n\n10"]
        for (index, range) in ranges.enumerated() { add("http-range", "range-\(index)", Array(range.utf8)) }
        for (index, value) in ["?1", "?0", " 1048576 ", "0", "999999999999999", "-1"].enumerated() {
            add("upload-fields", "value-\(index)", Array(value.utf8))
        }
        for (index, query) in queries.enumerated() { add("odata-query", "query-\(index)", Array(query.utf8)) }

        let order = [SortKey("updatedAt"), SortKey("id")]
        for (index, row) in records.enumerated() {
            add("tables-skip-token", "token-\(index)", Array(TablesPaging.token(after: row, order: order).utf8))
        }

        for (index, cursor) in ["0f3a:17", "0f3a:t:0", "0f3a:v:42", "0f3a:v:43:40:" + OfflineSyncService.hex("g\u{0}1")].enumerated() {
            add("pull-cursor", "cursor-\(index)", Array(cursor.utf8))
        }

        let notices = [
            ChangeNotice(identity: "josé", table: "todos"), ChangeNotice(group: GroupKey("\u{1}list\u{0}L"), table: "todos"),
            ChangeNotice(group: GroupKey("\u{1}list\u{0}L"), member: "bob"), ChangeNotice(groupsChangedFor: "alice"),
            ChangeNotice(dataset: DatasetNotification(identityPoolId: "us-east-1:pool", identityId: "us-east-1:id", datasetName: "prefs", syncCount: 7)),
        ]
        for (index, var notice) in notices.enumerated() {
            add("change-notice", "notice-\(index)", Array(notice.encoded.utf8))
            notice.origin = "client-\(index)"
            add("change-notice", "origin-\(index)", Array(notice.encoded.utf8))
        }

        add("encrypted-file", "store", try await encryptedStore())
        add("lmdb", "store", try await lmdbStore())
        seeds += try await parserSeeds()
        return seeds
    }

    /// One value of every kind, nested and at the edges.
    static let values: [Value] = [
        .null, .bool(true), .int(0), .int(.min), .int(.max), .double(-0.5), .double(1e300), .string(""),
        .string("josé — 日本 🎉 \u{0}"), .bytes([0, 1, 0xFF]), .date(Timestamp(millisecondsSince1970: 1_795_824_000_123)),
        .array([.int(1), .array([.string("x"), .null])]), .object(["a": .object(["b": .array([.bool(false)])]), "c": .double(2.5)]),
    ]

    static let records: [Record] = [
        Record(id: "a", fields: ["title": .string("milk"), "done": .bool(false), "due": .date(Timestamp(millisecondsSince1970: 0))],
               version: "3", updatedAt: Timestamp(millisecondsSince1970: 1_795_824_000_000)),
        Record(id: "b", fields: Dictionary(uniqueKeysWithValues: values.enumerated().map { ("f\($0.offset)", $0.element) }), version: "1"),
        Record(id: "c", version: "9", updatedAt: Timestamp(millisecondsSince1970: 1_795_824_000_500), deleted: true),
    ]

    static let operations: [PushOperation] = [
        PushOperation(id: "op-a", table: "todos", itemId: "a", kind: .insert, item: records[0], baseVersion: nil),
        PushOperation(id: "op-b", table: "todos", itemId: "b", kind: .update, item: records[1], baseVersion: "1"),
        PushOperation(id: "op-c", table: "todos", itemId: "c", kind: .delete, item: nil, baseVersion: "9"),
    ]

    static let pages: [PullPage] = [
        PullPage(records: records, nextCursor: "42:7", remaining: 3),
        PullPage(records: [], nextCursor: "43", remaining: 0, cursorReset: true, removed: ["x", "y"]),
    ]

    static let filters = [
        "done eq false and (due lt 2026-11-28T00:00:00Z or due eq null)",
        "startswith(title,'mi') or contains(tolower(title),'EGG') and not (count ge 12.5)",
        "id in ('a','b') and year(createdAt) eq 2026 and length(title) gt 3",
        "deleted eq true or (priority sub 1 mul 2 ne -4 and title ne 'it''s')",
    ]

    static let queries = [
        "$filter=done%20eq%20false&$orderby=updatedAt%20desc,id&$skip=10&$top=50&$count=true",
        "$select=id,title&__includedeleted=true&$inlinecount=allpages&$filter=startswith(title,%27m%27)",
        "$orderby=title&$skiptoken=WyJhIl0&$top=1",
    ]

    static func bytes(_ json: JSON) -> [UInt8] {
        var out: [UInt8] = []
        json.write(into: &out)
        return out
    }

    /// A table with a field of every type, filled with ``records``.
    static let schema = TableSchema("todos", fields: [
        FieldDefinition("title", .string, indexed: true), FieldDefinition("done", .bool), FieldDefinition("due", .date),
        FieldDefinition("count", .int), FieldDefinition("ratio", .double), FieldDefinition("blob", .bytes),
    ])
    static let rows: [Record] = [
        Record(id: "a", fields: ["title": .string("milk"), "done": .bool(false), "due": .date(Timestamp(millisecondsSince1970: 0))]),
        Record(id: "b", fields: ["title": .string("eggs"), "count": .int(12), "ratio": .double(0.5), "blob": .bytes([1, 2, 3])]),
    ]

    /// An encrypted-file store, written with ``FuzzTarget/storeKey``: a snapshot, then frames.
    static func encryptedStore() async throws -> [UInt8] {
        try await withScratch { directory in
            let path = directory + "/seed.osync"
            let store = try await EncryptedFileStore(path: path, key: .raw(FuzzTarget.storeKey))
            try await fill(store)
            try await store.close()
            return [UInt8](FileManager.default.contents(atPath: path) ?? Data())
        }
    }

    /// An LMDB store's data.mdb holding ``rows``.
    static func lmdbStore() async throws -> [UInt8] {
        try await withScratch { directory in
            let store = try await LMDBStore(directory: directory, options: .init(initialMapSize: 1 << 20, mapGrowthStep: 1 << 20))
            try await fill(store)
            try await store.close()
            return [UInt8](FileManager.default.contents(atPath: directory + "/data.mdb") ?? Data())
        }
    }

    static func fill(_ store: some LocalStore) async throws {
        try await store.defineTable(schema)
        let rows = rows
        try await store.write { try $0.upsert(rows, in: "todos") }
        try await store.write { _ = try $0.delete(id: "a", in: "todos") }
    }

    static func withScratch<T>(_ body: (String) async throws -> T) async throws -> T {
        let directory = NSTemporaryDirectory() + "offline-sync-seed-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try await body(directory)
    }
}
