import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

@Suite("Binary push over HTTP: POST /v2/push")
struct BinaryPushHTTPTests {
    static let contentType = ("Content-Type", "\(PushBatch.mediaType); version=\(PushBatch.version)")
    static let accept = ("Accept", "\(PushBatch.resultsMediaType); version=\(PushBatch.version)")

    static func inserts(_ range: Range<Int>, prefix: String = "op") -> [PushOperation] {
        range.map { i in
            PushOperation(id: "\(prefix)-\(i)", table: "todos", itemId: "t\(i)", kind: .insert,
                          item: Record(id: "t\(i)", fields: ["title": .string("todo \(i)"), "n": .int(Int64(i))]), baseVersion: nil)
        }
    }

    @Test("refusals: no token, another format or version, no Accept, a malformed body, a batch too large, an id twice")
    func refusals() async throws {
        try await LiveServer.with(configure: { $0.maxBatchSize = 3 }) { live in
            let auth = ("Authorization", "Bearer \(try await live.token("alice"))")
            let url = live.baseURL + "/v2/push"
            let body = PushBatch.encode(operations: Self.inserts(0..<2))

            let anonymous = try await http(.POST, url, headers: [Self.contentType, Self.accept], body: body)
            #expect(anonymous.status == 401 && anonymous.errorCode == "unauthorized")

            let json = try await http(.POST, url, headers: [auth, ("Content-Type", "application/json"), Self.accept], body: body)
            #expect(json.status == 415 && json.errorCode == "unsupportedMediaType", "\(json.text)")

            let future = try await http(.POST, url, headers: [auth, ("Content-Type", "\(PushBatch.mediaType); version=2"), Self.accept], body: body)
            #expect(future.status == 415 && future.errorCode == "unsupportedVersion")
            #expect(future.text.contains("reads binary push version 1") && future.text.contains("version 2"), "\(future.text)")

            let noAccept = try await http(.POST, url, headers: [auth, Self.contentType], body: body)
            #expect(noAccept.status == 406 && noAccept.errorCode == "notAcceptable")

            let oldAccept = try await http(.POST, url, headers: [auth, Self.contentType, ("Accept", "\(PushBatch.resultsMediaType); version=0")], body: body)
            #expect(oldAccept.status == 406 && oldAccept.errorCode == "unsupportedVersion")

            let cut = try await http(.POST, url, headers: [auth, Self.contentType, Self.accept], body: Array(body.dropLast(3)))
            #expect(cut.status == 400 && cut.errorCode == "invalidRequest" && cut.text.contains("push body"), "\(cut.text)")

            let large = try await http(.POST, url, headers: [auth, Self.contentType, Self.accept],
                                       body: PushBatch.encode(operations: Self.inserts(0..<4)))
            #expect(large.status == 413 && large.errorCode == "batchTooLarge")

            var twice = Self.inserts(0..<2)
            twice[1].id = twice[0].id
            let duplicate = try await http(.POST, url, headers: [auth, Self.contentType, Self.accept], body: PushBatch.encode(operations: twice))
            #expect(duplicate.status == 400 && duplicate.text.contains("appears twice"))

            // Nothing of the refused requests was applied.
            let remote = try await live.remote("alice")
            let page = try await remote.pull(PullRequest(table: "todos", predicate: .all, cursor: nil, limit: 100))
            #expect(page.records.isEmpty)
        }
    }

    @Test("a binary push answers what /v1/push answers, and a replay in either form gets the first outcomes")
    func sameAnswers() async throws {
        try await LiveServer.with { live in
            let auth = ("Authorization", "Bearer \(try await live.token("alice"))")
            var operations = Self.inserts(0..<5)
            // An insert of a live id (a conflict), an update without an item (rejected), a delete.
            operations.append(PushOperation(id: "again", table: "todos", itemId: "t0", kind: .insert,
                                            item: Record(id: "t0", fields: ["title": .string("again")]), baseVersion: nil))
            operations.append(PushOperation(id: "bare", table: "todos", itemId: "t1", kind: .update, item: nil, baseVersion: nil))
            operations.append(PushOperation(id: "gone", table: "todos", itemId: "t2", kind: .delete, item: nil, baseVersion: nil))
            let first = try await http(.POST, live.baseURL + "/v2/push", headers: [auth, Self.contentType, Self.accept],
                                       body: PushBatch.encode(operations: operations))
            #expect(first.status == 200 && first.header("Content-Type") == "\(PushBatch.resultsMediaType); version=1")
            let results = try first.body.withUnsafeBytes { try PushBatch.decodeResults($0, answering: operations) }
            guard results.count == 8 else { Issue.record("\(results)"); return }
            for result in results[0..<5] { guard case .applied = result.outcome else { Issue.record("\(result)"); return } }
            guard case .conflict = results[5].outcome, case .rejected(_, 400) = results[6].outcome,
                  case .applied(let tombstone) = results[7].outcome, tombstone.deleted else {
                Issue.record("\(results[5...])"); return
            }

            let replay = try await http(.POST, live.baseURL + "/v2/push", headers: [auth, Self.contentType, Self.accept],
                                        body: PushBatch.encode(operations: operations))
            #expect(try replay.body.withUnsafeBytes { try PushBatch.decodeResults($0, answering: operations) } == results)

            let viaJSON = try await http(.POST, live.baseURL + "/v1/push", headers: [auth, ("Content-Type", "application/json")],
                                         body: Wire.encode(operations: operations))
            guard case .array(let items)? = try JSON.parse(viaJSON.body)["results"] else { Issue.record("\(viaJSON.text)"); return }
            #expect(try items.enumerated().map { try Wire.result($1, answering: operations[$0]) } == results)
        }
    }

    @Test("a remote pushes binary to a server that has /v2/push, and JSON to one without it, asking once")
    func fallsBackToJSON() async throws {
        for binary in [true, false] {
            try await LiveServer.with(configure: { $0.binaryPush = binary }) { live in
                let proxy = try await CuttingProxy.start(target: live.baseURL, cuts: 0, cutAfter: 0)
                defer { proxy.stop() }
                let token = try await live.token("alice")
                let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:\(proxy.port)", token: { token })
                for (round, range) in [0..<3, 3..<6].enumerated() {
                    let operations = Self.inserts(range)
                    let results = try await remote.push(operations)
                    #expect(results.map(\.operationId) == operations.map(\.id), "round \(round)")
                    for (result, operation) in zip(results, operations) {
                        guard case .applied(let record) = result.outcome else { Issue.record("\(result)"); continue }
                        #expect(record.id == operation.itemId && record.fields == operation.item?.fields && record.version != nil)
                    }
                }
                #expect(proxy.count("/v2/push") == (binary ? 2 : 1), "binary \(binary)")
                #expect(proxy.count("/v1/push") == (binary ? 0 : 2), "binary \(binary)")
                let page = try await remote.pull(PullRequest(table: "todos", predicate: .all, cursor: nil, limit: 100))
                #expect(page.records.count == 6)
            }
        }
    }
}
