import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import OfflineSyncWire
import Testing

/// One sample of Prometheus's text format: `name{label="value",…} value`.
struct PrometheusSample: Equatable {
    var name: String
    var labels: [String: String]
    var value: Double
}

/// A strict reader of Prometheus's text exposition format (version 0.0.4): `# HELP` and
/// `# TYPE` lines, then samples whose family was typed first, label values quoted with `\\`,
/// `\"` and `\n` escapes. Throws on anything else, so a scrape that a Prometheus server would
/// refuse fails the test.
struct PrometheusText {
    var types: [String: String] = [:]
    var samples: [PrometheusSample] = []

    struct Malformed: Error, CustomStringConvertible {
        let line: String
        var description: String { "not Prometheus text: \(line)" }
    }

    init(_ text: String) throws {
        for line in text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) {
            if line.hasPrefix("# HELP ") { continue }
            if line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst(7).split(separator: " ")
                guard parts.count == 2, ["counter", "gauge", "histogram", "summary", "untyped"].contains(String(parts[1])) else {
                    throw Malformed(line: line)
                }
                types[String(parts[0])] = String(parts[1])
                continue
            }
            samples.append(try Self.sample(line))
        }
        for sample in samples {
            let family = ["_bucket", "_sum", "_count"].reduce(sample.name) { name, suffix in
                name.hasSuffix(suffix) && types[String(name.dropLast(suffix.count))] == "histogram" ? String(name.dropLast(suffix.count)) : name
            }
            guard types[family] != nil else { throw Malformed(line: "sample \(sample.name) has no # TYPE") }
        }
    }

    private static func sample(_ line: String) throws -> PrometheusSample {
        var characters = Substring(line)
        let name = characters.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }
        guard !name.isEmpty, name.first?.isNumber == false else { throw Malformed(line: line) }
        characters = characters.dropFirst(name.count)
        var labels: [String: String] = [:]
        if characters.first == "{" {
            characters = characters.dropFirst()
            while characters.first != "}" {
                let key = characters.prefix { $0 != "=" }
                characters = characters.dropFirst(key.count)
                guard characters.hasPrefix("=\"") else { throw Malformed(line: line) }
                characters = characters.dropFirst(2)
                var value = ""
                while let character = characters.first, character != "\"" {
                    characters = characters.dropFirst()
                    if character == "\\" {
                        guard let escaped = characters.first else { throw Malformed(line: line) }
                        characters = characters.dropFirst()
                        switch escaped {
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        case "n": value.append("\n")
                        default: throw Malformed(line: line)
                        }
                    } else {
                        value.append(character)
                    }
                }
                guard characters.first == "\"" else { throw Malformed(line: line) }
                characters = characters.dropFirst()
                labels[String(key)] = value
                if characters.first == "," { characters = characters.dropFirst() }
            }
            characters = characters.dropFirst()
        }
        guard characters.first == " ", let value = Double(characters.dropFirst().split(separator: " ").first ?? "") else {
            throw Malformed(line: line)
        }
        return PrometheusSample(name: String(name), labels: labels, value: value)
    }

    /// The sum of the samples named `name` whose labels include `labels`.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
        samples.filter { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }
            .reduce(0) { $0 + $1.value }
    }
}

@Suite("Server: /metrics in Prometheus's text format")
struct MetricsTests {
    static func insert(_ table: String, _ id: String, _ fields: [String: Value]) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields), baseVersion: nil)
    }

    /// The metric names Docs/Server.md's "Metrics" table lists.
    static func documented() throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
        let text = try String(contentsOf: root.appendingPathComponent("Docs/Server.md"), encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Metrics").last)
        return section.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `offline_sync_") else { return nil }
            return line.dropFirst(3).split(separator: "`").first.map(String.init)
        }
    }

    @Test("the documented metrics are the exported ones; each is in the scrape and moves when its event happens")
    func everyMetricMoves() async throws {
        let documented = try Self.documented()
        #expect(documented == ServerMetrics.names)
        // An issuer whose key file does not exist: its key-set fetch fails, and is counted.
        let issuer = TokenIssuer(issuer: "https://id.example", audiences: ["app"],
                                 keys: .file("/nonexistent/offline-sync-test/missing-jwks.json"), identityPrefix: "idp|")
        try await LiveServer.with(rules: sharedListsRules(ownerReadsMembers: false), configure: {
            $0.issuers = [issuer]
            $0.developmentTokens = .on
        }) { live in
            func scrape(_ headers: [(String, String)] = [("X-Admin-Key", testAdminKey)]) async throws -> PrometheusText {
                let answer = try await http(.GET, live.baseURL + "/metrics", headers: headers)
                #expect(answer.status == 200)
                #expect(answer.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
                return try PrometheusText(answer.text)
            }
            for headers in [[], [("X-Admin-Key", "wrong")], [("Authorization", "Bearer \(testAdminKey)")],
                            [("Authorization", "Bearer \(try await live.token("alice"))")]] {
                #expect(try await http(.GET, live.baseURL + "/metrics", headers: headers).status == 401)
            }
            let before = try await scrape()
            for name in ServerMetrics.names {
                #expect(before.types[name] != nil, "\(name) is not in the first scrape")
            }
            #expect(try await eventually { try await scrape().value("offline_sync_key_set_fetches_total", ["issuer": "https://id.example", "result": "failed"]) >= 1 })

            let alice = try await live.remote("alice"), bob = try await live.remote("bob")
            let channel = EventLog(bob.changes())
            #expect(await channel.waitFor(.subscribed))
            #expect(try await scrape().value("offline_sync_websockets_connected") == 1)
            _ = try await alice.push([
                Self.insert("lists", "L1", ["name": "groceries"]),
                Self.insert("list_members", "m-bob", ["list_id": "L1", "user_id": "bob"]),
            ])
            // carol is in no list: the rules refuse her todo.
            let refused = try await live.remote("carol").push([Self.insert("todos", "T9", ["list_id": "L1"])])
            #expect(refused.first.map { if case .rejected(_, 403) = $0.outcome { true } else { false } } == true)
            #expect(await channel.waitFor(.changed(table: "list_members")))
            let page = try await bob.pull(PullRequest(table: "lists"))
            #expect(page.records.count == 1)
            let file = try OfflineSync.Attachment(sha256: sha256Hex(Array(repeating: 5, count: 1000)), size: 1000, contentType: "image/png")
            _ = try await alice.appendAttachment(file, offset: 0, bytes: Array(repeating: 5, count: 1000), complete: true)
            #expect(try await alice.readAttachment(file.sha256, from: 0) { _ in })
            _ = try await http(.GET, live.baseURL + "/v1/no-such-route")
            _ = try await http(.POST, live.baseURL + "/v1/pull", headers: [("Authorization", "Bearer forged")], body: Array("{}".utf8))

            let after = try await scrape()
            func moved(_ name: String, _ labels: [String: String] = [:], by amount: Double? = nil) {
                let delta = after.value(name, labels) - before.value(name, labels)
                if let amount { #expect(delta == amount, "\(name) \(labels) moved by \(delta)") } else { #expect(delta > 0, "\(name) \(labels) did not move") }
            }
            // HTTPRemoteStore pushes in binary (/v2/push) and pulls as a page stream (/v2/pull).
            moved("offline_sync_http_requests_total", ["route": "/v2/push", "method": "POST", "status": "200"], by: 2)
            moved("offline_sync_http_requests_total", ["route": "NotFound", "status": "404"], by: 1)
            moved("offline_sync_http_requests_total", ["route": "/v1/pull", "status": "401"], by: 1)
            moved("offline_sync_http_request_duration_seconds_count", ["route": "/v2/push"], by: 2)
            moved("offline_sync_push_batches_total", by: 2)
            moved("offline_sync_push_operations_total", ["outcome": "applied"], by: 2)
            moved("offline_sync_push_operations_total", ["outcome": "forbidden"], by: 1)
            moved("offline_sync_rule_refusals_total", ["table": "todos", "operation": "insert"], by: 1)
            moved("offline_sync_pull_pages_total", by: 1)
            moved("offline_sync_pull_rows_total", ["kind": "record"], by: 1)
            moved("offline_sync_service_call_duration_seconds_count", ["call": "push"], by: 2)
            moved("offline_sync_service_call_duration_seconds_count", ["call": "pull"], by: 1)
            moved("offline_sync_notices_sent_total")
            moved("offline_sync_token_verifications_total", ["result": "verified"])
            moved("offline_sync_token_verifications_total", ["result": "refused"], by: 1)
            moved("offline_sync_attachment_bytes_total", ["direction": "received"], by: 1000)
            moved("offline_sync_attachment_bytes_total", ["direction": "sent"], by: 1000)
            #expect(after.value("offline_sync_websockets_connected") == 1)
            #expect(after.samples.allSatisfy { $0.labels["route"].map { !$0.contains("L1") } ?? true }, "a route label holds a path")

            await channel.stop()
            #expect(try await eventually { try await scrape().value("offline_sync_websockets_connected") == 0 })
        }
    }

    @Test("the Grafana dashboard in Docs queries only metrics the server exports, and every one of them")
    func dashboardQueriesExportedMetrics() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
        let data = try Data(contentsOf: root.appendingPathComponent("Docs/grafana-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        #expect(!panels.isEmpty)
        var queried = Set<String>()
        for panel in panels {
            let targets = try #require(panel["targets"] as? [[String: Any]], "panel \(panel["title"] ?? "?") has no targets")
            #expect(!targets.isEmpty)
            for target in targets {
                let expression = try #require(target["expr"] as? String)
                for match in expression.matches(of: /offline_sync_[a-z_]+/) {
                    var name = String(match.output)
                    for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && name.hasSuffix("_seconds" + suffix) {
                        name = String(name.dropLast(suffix.count))
                    }
                    queried.insert(name)
                }
            }
        }
        #expect(queried.subtracting(ServerMetrics.names).isEmpty, "not exported: \(queried.subtracting(ServerMetrics.names).sorted())")
        // The operators' guide's alert rules query exported metrics too.
        let guide = try String(contentsOf: root.appendingPathComponent("Docs/Operating.md"), encoding: .utf8)
        var alerted = Set<String>()
        for match in guide.matches(of: /offline_sync_[a-z_]+/) {
            var name = String(match.output)
            if name.hasSuffix("_bucket") { name = String(name.dropLast("_bucket".count)) }
            alerted.insert(name)
        }
        #expect(!alerted.isEmpty)
        #expect(alerted.subtracting(ServerMetrics.names).isEmpty, "Operating.md names \(alerted.subtracting(ServerMetrics.names).sorted())")
        #expect(Set(ServerMetrics.names).subtracting(queried).isEmpty, "on no panel: \(Set(ServerMetrics.names).subtracting(queried).sorted())")
    }

    @Test("a refusal on a table the rules do not name is labelled other: a client cannot add series")
    func unnamedTablesShareOneLabel() async throws {
        let rules = SyncRules(defaultAccess: .deny, tables: ["notes": .ownerOnly])
        try await LiveServer.with(rules: rules) { live in
            let alice = try await live.remote("alice")
            for table in ["x1", "x2", "x3"] {
                let results = try await alice.push([Self.insert(table, "a", ["n": 1])])
                #expect(results.first.map { if case .rejected(_, 403) = $0.outcome { true } else { false } } == true)
            }
            let answer = try await http(.GET, live.baseURL + "/metrics", headers: [("X-Admin-Key", testAdminKey)])
            let text = try PrometheusText(answer.text)
            #expect(text.value("offline_sync_rule_refusals_total", ["table": "other", "operation": "insert"]) == 3)
            #expect(!text.samples.contains { ["x1", "x2", "x3"].contains($0.labels["table"] ?? "") })
        }
    }
}
