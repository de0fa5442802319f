import Foundation
import OfflineSync
import OfflineSyncServer
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// The CommunityToolkit Datasync client's incremental pull, step for step, over plain HTTP
/// (CommunityToolkit/Datasync, src/CommunityToolkit.Datasync.Client/Offline/Operations/
/// PullOperationManager.cs):
///
/// - `PrepareQueryDescription`: the filter `updatedAt gt <delta token>` only once a token is
///   stored (a token of 0 adds none), then `$orderby=updatedAt`, `$count=true`,
///   `__includedeleted=true`, no `$top`, no `$skip`.
/// - The filter's date is written `cast(<yyyy-MM-ddTHH:mm:ss.fffZ>,Edm.DateTimeOffset)` and
///   escaped with `Uri.EscapeDataString` (Query/OData/QueryDescriptionExtensions.cs).
/// - Each next page is `new UriBuilder(endpoint) { Query = page.NextLink }`: the nextLink is
///   the whole query of the next request.
/// - Each item is added, replaced or removed by id (a tombstone of an unknown id is
///   skipped), and the delta token moves to any `updatedAt` later than the token the page
///   started with.
struct ToolkitPuller {
    struct Entity: Equatable {
        var version: String
        var updatedAt: Timestamp
        var title: String?
    }

    let table: String
    /// The client's local table.
    var entities: [String: Entity] = [:]
    var deltaToken: Timestamp?
    /// Every (id, version) received, to catch a row sent twice.
    var received: Set<String> = []
    var repeats: [String] = []
    var requests = 0

    init(table: String) { self.table = table }

    /// The first request's query, exactly as the client writes it.
    func firstQuery() -> String {
        var options: [String] = []
        if let deltaToken {
            let filter = "(updatedAt gt cast(\(WireDate.iso8601(deltaToken)),Edm.DateTimeOffset))"
            options.append("$filter=" + encode(filter))
        }
        options += ["$orderby=updatedAt", "$count=true", "__includedeleted=true"]
        return options.joined(separator: "&")
    }

    /// One whole pull: pages until the server sends no nextLink.
    mutating func pull(baseURL: String, token: String) async throws {
        var query = firstQuery()
        while true {
            let response = try await http(.GET, "\(baseURL)/tables/\(table)?\(query)",
                                          headers: [("Authorization", "Bearer \(token)"), ("ZUMO-API-VERSION", "3.0.0")])
            requests += 1
            guard response.status == 200, let json = try? JSON.parse(response.body), case .array(let items)? = json["items"] else {
                throw SyncError(.transient, "pull page failed: \(response.status) \(response.text)")
            }
            let pageStart = deltaToken
            for item in items { try apply(item, pageStart: pageStart) }
            guard case .string(let next)? = json["nextLink"] else { return }
            query = next
        }
    }

    private mutating func apply(_ item: JSON, pageStart: Timestamp?) throws {
        guard case .string(let id)? = item["id"], case .string(let version)? = item["version"],
              case .string(let stamp)? = item["updatedAt"], let updatedAt = WireDate.parseISO8601(stamp),
              case .bool(let deleted)? = item["deleted"] else {
            throw SyncError(.invalidValue, "an item without the system properties")
        }
        if !received.insert("\(id) \(version)").inserted { repeats.append("\(id) \(version)") }
        if deleted {
            entities[id] = nil
        } else {
            var title: String?
            if case .string(let text)? = item["title"] { title = text }
            entities[id] = Entity(version: version, updatedAt: updatedAt, title: title)
        }
        if updatedAt > (pageStart ?? Timestamp(millisecondsSince1970: 0)) { deltaToken = max(deltaToken ?? updatedAt, updatedAt) }
    }
}

/// What the server holds for a table, read with plain `$skip` paging after all writes ended.
func serverEntities(baseURL: String, token: String, table: String) async throws -> [String: ToolkitPuller.Entity] {
    var entities: [String: ToolkitPuller.Entity] = [:]
    var skip = 0
    while true {
        let response = try await http(.GET, "\(baseURL)/tables/\(table)?$skip=\(skip)&$orderby=id",
                                      headers: [("Authorization", "Bearer \(token)"), ("ZUMO-API-VERSION", "3.0.0")])
        guard response.status == 200, let json = try? JSON.parse(response.body), case .array(let items)? = json["items"] else {
            throw SyncError(.transient, "list failed: \(response.status)")
        }
        for item in items {
            guard case .string(let id)? = item["id"], case .string(let version)? = item["version"],
                  case .string(let stamp)? = item["updatedAt"], let updatedAt = WireDate.parseISO8601(stamp) else { continue }
            var title: String?
            if case .string(let text)? = item["title"] { title = text }
            entities[id] = ToolkitPuller.Entity(version: version, updatedAt: updatedAt, title: title)
        }
        if items.isEmpty { return entities }
        skip += items.count
    }
}

/// Creates todos `t<i>` titled "v0" through `POST /tables/todos`, one request each.
func seedTodos(_ client: TablesClient, _ range: Range<Int>) async throws {
    for i in range {
        #expect(try await client.send(.POST, "/tables/todos", json: #"{"id":"t\#(i)","title":"v0"}"#).status == 201)
    }
}

@Suite("Server: the real Datasync clients' requests against a live offline-sync serve")
struct DatasyncClientTests {
    @Test("the CommunityToolkit client's pull loop gets every insert, update and tombstone exactly once, incrementally")
    func toolkitPullLoop() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice")
            let alice = TablesClient(baseURL: live.baseURL, token: token)
            try await seedTodos(alice, 0..<250)
            var puller = ToolkitPuller(table: "todos")
            try await puller.pull(baseURL: live.baseURL, token: token)
            #expect(puller.entities.count == 250)
            #expect(puller.requests == 3, "three pages of 100, each request keeping the delta options")
            #expect(puller.repeats.isEmpty)

            // Updates, deletes and inserts after the first pull: the next pull brings exactly those.
            for i in 0..<30 {
                #expect(try await alice.send(.PUT, "/tables/todos/t\(i)", json: #"{"id":"t\#(i)","title":"v1"}"#).status == 200)
            }
            for i in 30..<40 { #expect(try await alice.send(.DELETE, "/tables/todos/t\(i)").status == 204) }
            try await seedTodos(alice, 250..<260)
            let before = puller.received.count
            try await puller.pull(baseURL: live.baseURL, token: token)
            #expect(puller.received.count - before == 50, "30 updates, 10 tombstones and 10 inserts, nothing else")
            #expect(puller.repeats.isEmpty)
            #expect(puller.entities == (try await serverEntities(baseURL: live.baseURL, token: token, table: "todos")))
            #expect(puller.entities["t5"]?.title == "v1")
            #expect(puller.entities["t35"] == nil)

            let settled = puller.received.count
            try await puller.pull(baseURL: live.baseURL, token: token)
            #expect(puller.received.count == settled, "a pull with nothing new brings nothing")
        }
    }

    @Test("keyset paging: rows updated between two pages of an updatedAt pull move behind, and no row is skipped")
    func updatesBetweenPagesSkipNothing() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice")
            let alice = TablesClient(baseURL: live.baseURL, token: token)
            try await seedTodos(alice, 0..<250)
            let first = try await alice.list("$orderby=updatedAt&__includedeleted=true")
            #expect(first.ids.count == 100)
            // Each update moves a row of the first page to the end: with $skip=100 the next
            // page would start five rows late.
            for id in first.ids.prefix(5) {
                #expect(try await alice.send(.PUT, "/tables/todos/\(id)", json: #"{"id":"\#(id)","title":"v1"}"#).status == 200)
            }
            var ids = first.ids
            var next = first.next
            while let query = next {
                #expect(!query.contains("$skip="), "the order allows a keyset cursor")
                let page = try await alice.list(query)
                ids += page.ids
                next = page.next
            }
            #expect(Set(ids).count == 250, "every row arrived")
            #expect(ids.count == 255, "the five updated rows arrived again, with their new versions, at the end")
            #expect(Array(ids.suffix(5)) == Array(first.ids.prefix(5)))
        }
    }

    @Test("the older Microsoft.Datasync.Client (X-ZUMO-VERSION) gets absolute nextLinks, which page through every row once")
    func olderClientPaging() async throws {
        try await LiveServer.with { live in
            let token = try await live.token("alice")
            let alice = TablesClient(baseURL: live.baseURL, token: token)
            try await seedTodos(alice, 0..<230)
            // Microsoft.Datasync.Client sends X-ZUMO-VERSION and X-ZUMO-INSTALLATION-ID beside
            // ZUMO-API-VERSION (Http/ServiceHttpClient.cs), reads nextLink with `new Uri(…)`,
            // which needs an absolute URL, and requests it as is (Table/RemoteTable.cs).
            let headers = [("Authorization", "Bearer \(token)"), ("ZUMO-API-VERSION", "3.0.0"),
                           ("X-ZUMO-VERSION", "Datasync/5.0.0 (lang=Managed; os=Linux)"),
                           ("X-ZUMO-INSTALLATION-ID", "5b6e2e1a-63a9-4d5c-8e4f-0a1b2c3d4e5f")]
            var url = "\(live.baseURL)/tables/todos?$filter=\(encode("title eq 'v0'"))&$count=true"
            var ids: [String] = []
            var pages = 0
            while true {
                let response = try await http(.GET, url, headers: headers)
                #expect(response.status == 200)
                guard let json = try? JSON.parse(response.body), case .array(let items)? = json["items"] else { break }
                #expect(json["count"] == .number("230"), "the next page kept $count and $filter")
                ids += items.compactMap { if case .string(let id)? = $0["id"] { return id } else { return nil } }
                pages += 1
                guard case .string(let next)? = json["nextLink"] else { break }
                #expect(next.hasPrefix(live.baseURL + "/tables/todos?"), "an absolute URL: \(next)")
                url = next
                if pages > 5 { break }
            }
            #expect(pages == 3)
            #expect(ids.count == 230 && Set(ids).count == 230)
        }
    }

    @Test("versions are base64 a byte[] Version model can hold; If-Match takes them, and the older form still")
    func base64Versions() async throws {
        try await LiveServer.with { live in
            let alice = TablesClient(baseURL: live.baseURL, token: try await live.token("alice"))
            let created = try await alice.send(.POST, "/tables/todos", json: #"{"id":"a","title":"milk"}"#)
            let version = try #require(created.string("version"))
            let bytes = try #require(Data(base64Encoded: version), "valid base64")
            #expect(bytes.base64EncodedString() == version, "a byte[] round trip gives the same text")
            #expect(created.header("ETag") == "\"\(version)\"")
            let listed = try await alice.send(.GET, "/tables/todos")
            guard case .array(let items)? = listed.json?["items"] else { Issue.record("no items"); return }
            #expect(items.first?["version"] == .string(version))

            let replaced = try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"oat"}"#,
                                                headers: [("If-Match", "\"\(version)\"")])
            #expect(replaced.status == 200)
            let stale = try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"x"}"#,
                                             headers: [("If-Match", "\"\(version)\"")])
            #expect(stale.status == 412)
            // A client that stored the version before it was base64 still names it.
            let current = try #require(replaced.string("version"))
            let stored = String(decoding: try #require(Data(base64Encoded: current)), as: UTF8.self)
            #expect(stored.contains("-"), "stored versions keep their own form")
            let older = try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"y"}"#,
                                             headers: [("If-Match", "\"\(stored)\"")])
            #expect(older.status == 200)
            let latest = try #require(older.string("version"))
            #expect(try await alice.list("$filter=" + encode("version eq '\(latest)'")).ids == ["a"])
            let native = try await live.remote("alice").pull(PullRequest(table: "todos", cursor: nil, limit: 10))
            #expect(native.records.first?.version == String(decoding: try #require(Data(base64Encoded: latest)), as: UTF8.self),
                    "the native API shows the stored form")
        }
    }
}
