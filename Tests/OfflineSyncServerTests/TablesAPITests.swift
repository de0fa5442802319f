import Foundation
import NIOHTTP1
import OfflineSync
import OfflineSyncOData
import OfflineSyncServer
import OfflineSyncWire
import Testing

/// A client of the tables API for one identity.
struct TablesClient {
    let baseURL: String
    let token: String

    func send(_ method: HTTPMethod, _ path: String, json: String? = nil, headers: [(String, String)] = [],
              version: String? = "3.0.0") async throws -> RawResponse {
        var all = [("Authorization", "Bearer \(token)")]
        if let version { all.append(("ZUMO-API-VERSION", version)) }
        if json != nil { all.append(("Content-Type", "application/json")) }
        return try await http(method, baseURL + path, headers: all + headers, body: json.map { Array($0.utf8) })
    }

    /// GETs a list and returns the items' ids, the count and the nextLink.
    func list(_ query: String) async throws -> (ids: [String], count: Int?, next: String?, response: RawResponse) {
        let response = try await send(.GET, "/tables/todos" + (query.isEmpty ? "" : "?" + query))
        guard response.status == 200, let json = try? JSON.parse(response.body), case .array(let items)? = json["items"] else {
            return ([], nil, nil, response)
        }
        let ids = items.compactMap { item -> String? in if case .string(let id)? = item["id"] { return id } else { return nil } }
        var count: Int?
        if case .number(let text)? = json["count"] { count = Int(text) }
        var next: String?
        if case .string(let link)? = json["nextLink"] { next = link }
        return (ids, count, next, response)
    }
}

func encode(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
}

extension RawResponse {
    var json: JSON? { try? JSON.parse(body) }
    func string(_ key: String) -> String? { if case .string(let s)? = json?[key] { return s } else { return nil } }
}

@Suite("Server: Datasync / Azure Mobile Apps tables API")
struct TablesAPITests {
    func withClients(_ body: (TablesClient, TablesClient, LiveServer) async throws -> Void) async throws {
        try await LiveServer.with { live in
            try await body(TablesClient(baseURL: live.baseURL, token: try await live.token("alice")),
                           TablesClient(baseURL: live.baseURL, token: try await live.token("bob")), live)
        }
    }

    @Test("POST: 201 with Location, ETag and Last-Modified; 409 with the existing entity; 415 for a non-JSON body")
    func create() async throws {
        try await withClients { alice, _, _ in
            let created = try await alice.send(.POST, "/tables/todos", json: #"{"id":"a","title":"milk","n":3,"done":false}"#)
            #expect(created.status == 201)
            #expect(created.header("Location") == "/tables/todos/a")
            let version = try #require(created.string("version"))
            #expect(created.header("ETag") == "\"\(version)\"")
            #expect(created.header("Last-Modified")?.hasSuffix(" GMT") == true)
            #expect(created.string("title") == "milk")
            #expect(created.json?["n"] == .number("3"))
            #expect(created.json?["deleted"] == .bool(false))
            #expect(created.string("updatedAt")?.hasSuffix("Z") == true)

            let again = try await alice.send(.POST, "/tables/todos", json: #"{"id":"a","title":"other"}"#)
            #expect(again.status == 409)
            #expect(again.string("title") == "milk", "409 carries the existing entity")
            #expect(again.header("ETag") == "\"\(version)\"")

            let generated = try await alice.send(.POST, "/tables/todos", json: #"{"title":"no id"}"#)
            #expect(generated.status == 201)
            #expect(generated.string("id")?.isEmpty == false)

            let text = try await http(.POST, alice.baseURL + "/tables/todos",
                                      headers: [("Authorization", "Bearer \(alice.token)"), ("Content-Type", "text/plain")],
                                      body: Array(#"{"id":"b"}"#.utf8))
            #expect(text.status == 415)
            for bad in ["{", "[1]", #"{"id":5}"#, #"{"id":""}"#] {
                #expect(try await alice.send(.POST, "/tables/todos", json: bad).status == 400, "\(bad)")
            }
            #expect(try await alice.list("").ids.count == 2, "refused requests stored nothing")
        }
    }

    @Test("GET one: 200 with ETag; 304 on If-None-Match or If-Modified-Since; weak ETags never match; 404")
    func readOne() async throws {
        try await withClients { alice, _, _ in
            let created = try await alice.send(.POST, "/tables/todos", json: #"{"id":"a","title":"milk"}"#)
            let etag = try #require(created.header("ETag"))
            let read = try await alice.send(.GET, "/tables/todos/a")
            #expect(read.status == 200)
            #expect(read.header("ETag") == etag)
            #expect(read.string("title") == "milk")
            #expect(try await alice.send(.GET, "/tables/todos/a", headers: [("If-None-Match", etag)]).status == 304)
            #expect(try await alice.send(.GET, "/tables/todos/a", headers: [("If-None-Match", "\"x\", \(etag)")]).status == 304)
            #expect(try await alice.send(.GET, "/tables/todos/a", headers: [("If-None-Match", "*")]).status == 304)
            #expect(try await alice.send(.GET, "/tables/todos/a", headers: [("If-None-Match", "W/\(etag)")]).status == 200)
            #expect(try await alice.send(.GET, "/tables/todos/a", headers: [("If-None-Match", "\"other\"")]).status == 200)
            let lastModified = try #require(read.header("Last-Modified"))
            #expect(try await alice.send(.GET, "/tables/todos/a", headers: [("If-Modified-Since", lastModified)]).status == 304)
            #expect(try await alice.send(.GET, "/tables/todos/a",
                                         headers: [("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")]).status == 200)
            #expect(try await alice.send(.GET, "/tables/todos/missing").status == 404)
            let odd = try await alice.send(.POST, "/tables/todos", json: #"{"id":"a b/c","title":"odd id"}"#)
            #expect(odd.status == 201)
            #expect(try await alice.send(.GET, "/tables/todos/\(encode("a b/c"))").string("title") == "odd id")
        }
    }

    @Test("PUT: 200 with a new ETag; 412 with the server entity on a stale If-Match; 400 on id mismatch; 404")
    func replace() async throws {
        try await withClients { alice, _, _ in
            let created = try await alice.send(.POST, "/tables/todos", json: #"{"id":"a","title":"milk"}"#)
            let first = try #require(created.header("ETag"))
            let updated = try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"oat milk"}"#, headers: [("If-Match", first)])
            #expect(updated.status == 200)
            let second = try #require(updated.header("ETag"))
            #expect(second != first)
            #expect(updated.string("title") == "oat milk")
            let stale = try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"lost"}"#, headers: [("If-Match", first)])
            #expect(stale.status == 412)
            #expect(stale.string("title") == "oat milk", "412 carries the server's entity")
            #expect(stale.header("ETag") == second)
            #expect(try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"weak"}"#,
                                         headers: [("If-Match", "W/\(second)")]).status == 412)
            #expect(try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"old"}"#,
                                         headers: [("If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")]).status == 412)
            #expect(try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"b","title":"x"}"#).status == 400)
            #expect(try await alice.send(.PUT, "/tables/todos/missing", json: #"{"id":"missing"}"#).status == 404)
            let unconditional = try await alice.send(.PUT, "/tables/todos/a", json: #"{"title":"no id in body"}"#)
            #expect(unconditional.status == 200)
            #expect(try await alice.send(.GET, "/tables/todos/a").string("title") == "no id in body")
        }
    }

    @Test("DELETE: 204 soft delete; then 410 for GET, PUT and DELETE; visible with __includedeleted; 412 on stale If-Match")
    func softDelete() async throws {
        try await withClients { alice, _, _ in
            let created = try await alice.send(.POST, "/tables/todos", json: #"{"id":"a","title":"milk"}"#)
            let first = try #require(created.header("ETag"))
            _ = try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"oat milk"}"#)
            let stale = try await alice.send(.DELETE, "/tables/todos/a", headers: [("If-Match", first)])
            #expect(stale.status == 412)
            #expect(stale.string("title") == "oat milk")
            #expect(try await alice.send(.DELETE, "/tables/todos/a").status == 204)
            let gone = try await alice.send(.GET, "/tables/todos/a")
            #expect(gone.status == 410)
            let included = try await alice.send(.GET, "/tables/todos/a?__includedeleted=true")
            #expect(included.status == 200)
            #expect(included.json?["deleted"] == .bool(true))
            #expect(try await alice.send(.DELETE, "/tables/todos/a").status == 410)
            #expect(try await alice.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"x"}"#).status == 410)
            #expect(try await alice.send(.DELETE, "/tables/todos/missing").status == 404)
            #expect(try await alice.list("").ids.isEmpty)
            #expect(try await alice.list("__includedeleted=true").ids == ["a"])
        }
    }

    @Test("GET list: paging with nextLink, $top, $skip, $count, $orderby, $select")
    func paging() async throws {
        try await withClients { alice, _, live in
            // 250 rows through the native API, in one push.
            let remote = try await live.remote("alice")
            _ = try await remote.push((0..<250).map { i in
                let id = String(format: "item-%03d", i)
                return PushOperation(id: "op-\(i)", table: "todos", itemId: id, kind: .insert,
                                     item: Record(id: id, fields: ["n": .int(Int64(i % 7)), "title": .string("todo \(i)")]), baseVersion: nil)
            })
            var ids: [String] = []
            var query = "$count=true"
            var pages = 0
            while true {
                let page = try await alice.list(query)
                #expect(page.response.status == 200)
                #expect(page.count == 250)
                ids += page.ids
                pages += 1
                guard let next = page.next else { break }
                #expect(!next.hasPrefix("/"), "the query alone, which the CommunityToolkit client sends as its next query")
                query = next
                if pages > 10 { break }
            }
            #expect(pages == 3)
            #expect(ids == (0..<250).map { String(format: "item-%03d", $0) }, "ordered by id, each row once")

            let top = try await alice.list("$top=150")
            #expect(top.ids.count == 100)
            let rest = try await alice.list(try #require(top.next))
            #expect(rest.ids.count == 50)
            #expect(rest.next == nil)
            #expect(try await alice.list("$top=5&$skip=10").ids == (10..<15).map { String(format: "item-%03d", $0) })
            #expect(try await alice.list("$top=0").ids.isEmpty)

            let ordered = try await alice.list("$orderby=n desc,id asc&$top=3")
            #expect(ordered.ids == ["item-006", "item-013", "item-020"])
            let selected = try await alice.send(.GET, "/tables/todos?$select=id,title&$top=1")
            guard case .array(let items)? = selected.json?["items"], case .object(let members)? = items.first else {
                Issue.record("no items"); return
            }
            #expect(members.map(\.key) == ["id", "title"])
        }
    }

    /// The first request of the CommunityToolkit Datasync client's incremental pull, byte for
    /// byte: `PullOperationManager.PrepareQueryDescription` adds the delta filter, the
    /// ordering, the count and `__includedeleted`, and `ToODataQueryString` escapes the
    /// filter with `Uri.EscapeDataString` (CommunityToolkit/Datasync,
    /// src/CommunityToolkit.Datasync.Client/Offline/Operations/PullOperationManager.cs and
    /// Query/OData/QueryDescriptionExtensions.cs; the unescaped form is asserted in
    /// PullOperationManager_Tests.cs).
    @Test("GET list: the Datasync client's delta request with a cast(…,Edm.DateTimeOffset) token, tombstones included")
    func datasyncClientDeltaRequest() async throws {
        try await withClients { alice, _, _ in
            for id in ["a", "b", "c"] {
                #expect(try await alice.send(.POST, "/tables/todos", json: #"{"id":"\#(id)","title":"t"}"#).status == 201)
            }
            #expect(try await alice.send(.DELETE, "/tables/todos/b").status == 204)
            func deltaQuery(_ token: String) -> String {
                "$filter=%28updatedAt%20gt%20cast%28\(token)%2CEdm.DateTimeOffset%29%29&$orderby=updatedAt&$count=true&__includedeleted=true"
            }
            let all = try await alice.list(deltaQuery("2024-08-23T20%3A22%3A54.291Z"))
            #expect(all.response.status == 200, "\(String(decoding: all.response.body, as: UTF8.self))")
            #expect(Set(all.ids) == ["a", "b", "c"], "the tombstone of b is included")
            #expect(all.count == 3)
            let none = try await alice.list(deltaQuery("9999-01-01T00%3A00%3A00.000Z"))
            #expect(none.response.status == 200)
            #expect(none.ids.isEmpty && none.count == 0)
        }
    }

    @Test("GET list: OData $filter comparisons, logic, string functions and dates; bad queries are 400 with a reason")
    func filters() async throws {
        try await withClients { alice, _, _ in
            for (id, title, n, price) in [("a", "Buy milk", 1, "1.5"), ("b", "buy bread", 2, "2.25"), ("c", "Call mum", 3, "10.0"),
                                          ("d", "Ask O'Brien", 4, "0.5")] {
                let created = try await alice.send(.POST, "/tables/todos",
                                                   json: #"{"id":"\#(id)","title":"\#(title)","n":\#(n),"price":\#(price),"done":\#(n % 2 == 0)}"#)
                #expect(created.status == 201)
            }
            let cases: [(String, [String])] = [
                ("n eq 2", ["b"]), ("n ne 2", ["a", "c", "d"]), ("n gt 2", ["c", "d"]), ("n ge 2", ["b", "c", "d"]),
                ("n lt 2", ["a"]), ("n le 2", ["a", "b"]), ("2 lt n", ["c", "d"]),
                ("n gt 1 and n lt 4", ["b", "c"]), ("n eq 1 or n eq 4", ["a", "d"]), ("not (n eq 1)", ["b", "c", "d"]),
                ("n eq 1 or n eq 2 and done eq true", ["a", "b"]), ("(n eq 1 or n eq 2) and done eq true", ["b"]),
                ("price gt 2.0", ["b", "c"]), ("done eq true", ["b", "d"]), ("done", ["b", "d"]),
                ("startswith(title,'Buy')", ["a"]), ("endswith(title,'mum')", ["c"]), ("substringof('read',title)", ["b"]),
                ("contains(title,'milk')", ["a"]), ("startswith(title,'buy') eq false", ["a", "c", "d"]),
                ("title eq 'Ask O''Brien'", ["d"]), ("missing eq null", ["a", "b", "c", "d"]), ("title eq null", []),
                ("updatedAt gt 2000-01-01T00:00:00Z", ["a", "b", "c", "d"]), ("updatedAt lt 2000-01-01T00:00:00.000Z", []),
                ("updatedAt gt datetimeoffset'2000-01-01T00:00:00Z'", ["a", "b", "c", "d"]),
                ("(updatedAt gt cast(2000-01-01T00:00:00.000Z,Edm.DateTimeOffset))", ["a", "b", "c", "d"]),
                ("updatedAt gt cast(9999-01-01T00:00:00.000Z,Edm.DateTimeOffset)", []),
                ("deleted eq false", ["a", "b", "c", "d"]), ("id eq 'c'", ["c"]),
            ]
            for (filter, expected) in cases {
                let result = try await alice.list("$filter=" + encode(filter))
                #expect(result.response.status == 200, "\(filter): \(result.response.text)")
                #expect(result.ids == expected, "\(filter)")
            }
            for bad in ["n eq", "n eq 'x' and", "frobnicate(title) eq 'x'", "tolower(__owner) eq 'x'", "length(__item) gt 0", "n eq 1 2", "(n eq 1", "__owner eq 'x'", "n eq 1)", "'a' eq 'b'"] {
                let result = try await alice.list("$filter=" + encode(bad))
                #expect(result.response.status == 400, "\(bad)")
                #expect(result.response.errorCode == "invalidQuery", "\(bad)")
            }
            for bad in ["$top=-1", "$skip=x", "$orderby=n sideways", "$count=maybe", "$unknown=1", "$orderby=__owner"] {
                let result = try await alice.list(bad)
                #expect(result.response.status == 400, "\(bad): \(result.response.text)")
            }
            // A Datasync client's incremental pull.
            let delta = try await alice.list("$filter=" + encode("updatedAt gt 2000-01-01T00:00:00.000Z")
                                             + "&$orderby=updatedAt&__includedeleted=true&$count=true")
            #expect(delta.count == 4)
        }
    }

    @Test("ZUMO-API-VERSION: 2.x and 3.x (header or query) accepted, anything else 400")
    func apiVersion() async throws {
        try await withClients { alice, _, _ in
            #expect(try await alice.send(.GET, "/tables/todos", version: "2.0.0").status == 200)
            #expect(try await alice.send(.GET, "/tables/todos", version: "3.0.0").status == 200)
            #expect(try await alice.send(.GET, "/tables/todos?ZUMO-API-VERSION=3.0.0", version: nil).status == 200)
            for bad in ["4.0.0", "1.0", "x", ""] {
                let response = try await alice.send(.GET, "/tables/todos", version: bad)
                #expect(response.status == 400, "\(bad)")
            }
            #expect(try await alice.send(.GET, "/tables/todos?ZUMO-API-VERSION=9.0", version: nil).status == 400)
        }
    }

    @Test("every tables route refuses missing and foreign tokens, and no identity reaches another's rows")
    func isolation() async throws {
        try await withClients { alice, bob, _ in
            let created = try await alice.send(.POST, "/tables/todos", json: #"{"id":"a","title":"alice's"}"#)
            let etag = try #require(created.header("ETag"))
            let anonymous = TablesClient(baseURL: alice.baseURL, token: "not-a-token")
            for client in [anonymous] {
                #expect(try await client.send(.GET, "/tables/todos").status == 401)
                #expect(try await client.send(.GET, "/tables/todos/a").status == 401)
                #expect(try await client.send(.POST, "/tables/todos", json: #"{"id":"z"}"#).status == 401)
                #expect(try await client.send(.PUT, "/tables/todos/a", json: #"{"id":"a"}"#).status == 401)
                #expect(try await client.send(.DELETE, "/tables/todos/a").status == 401)
            }
            #expect(try await bob.list("").ids.isEmpty)
            #expect(try await bob.list("$count=true&$filter=" + encode("id eq 'a'")).count == 0)
            #expect(try await bob.send(.GET, "/tables/todos/a").status == 404)
            #expect(try await bob.send(.GET, "/tables/todos/a?__includedeleted=true").status == 404)
            #expect(try await bob.send(.PUT, "/tables/todos/a", json: #"{"id":"a","title":"bob was here"}"#,
                                       headers: [("If-Match", etag)]).status == 404)
            #expect(try await bob.send(.DELETE, "/tables/todos/a").status == 404)
            // Bob's own "a" is a separate row.
            #expect(try await bob.send(.POST, "/tables/todos", json: #"{"id":"a","title":"bob's"}"#).status == 201)
            let mine = try await alice.send(.GET, "/tables/todos/a")
            #expect(mine.string("title") == "alice's")
            #expect(mine.header("ETag") == etag)
            #expect(try await alice.list("").ids == ["a"])
        }
    }
}
