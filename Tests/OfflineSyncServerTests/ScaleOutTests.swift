import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncHTTP
import OfflineSyncConformance
import OfflineSyncSQLite
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// The PostgreSQL server the tests share (`OFFLINE_SYNC_TEST_POSTGRES_URL`, set by `Scripts/with-postgres.sh`).
enum TestPostgres {
    static let url: String? = {
        let value = ProcessInfo.processInfo.environment["OFFLINE_SYNC_TEST_POSTGRES_URL"] ?? ""
        return value.isEmpty ? nil : value
    }()
    /// On CI a missing server fails the tests instead of skipping them.
    static let shouldRun = url != nil || !(ProcessInfo.processInfo.environment["CI"] ?? "").isEmpty
    /// The run's id; `Scripts/with-postgres.sh` drops the run's `osync_test_<run>_*` schemas afterwards.
    static let run: String = {
        let value = ProcessInfo.processInfo.environment["OFFLINE_SYNC_TEST_RUN"] ?? ""
        return value.isEmpty || value.utf8.count > 16 || !value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
            ? "local" : value
    }()

    /// A store URL on a schema of its own.
    static func storeURL(_ url: String) -> String {
        let schema = "osync_test_\(run)_srv_" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return url + (url.contains("?") ? "&" : "?") + "schema=" + schema
    }
}

/// Collects a stream's elements so a test can wait for one with a deadline.
actor EventLog<Element: Sendable & Equatable> {
    private var seen: [Element] = []
    private var task: Task<Void, Never>?

    init<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Element {
        Task { await self.consume(sequence) }
    }

    private func consume<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Element {
        task = Task {
            do { for try await element in sequence { self.append(element) } } catch {}
        }
    }

    private func append(_ element: Element) { seen.append(element) }

    /// Waits up to `timeout` for `element`, consuming everything up to it.
    func waitFor(_ element: Element, timeout: Duration = .seconds(30)) async -> Bool {
        await consume(through: element, timeout: timeout) != nil
    }

    /// Waits up to `timeout` for `element` and consumes everything up to it; returns what
    /// came before it (`nil` on timeout). The sequence keeps its order, so this is how a test
    /// proves that something was *not* delivered before a later element.
    func consume(through element: Element, timeout: Duration = .seconds(30)) async -> [Element]? {
        await consume(throughFirst: { $0 == element }, timeout: timeout)
    }

    /// Waits up to `timeout` for an element that `matches`, and consumes everything up to
    /// it; returns what came before it (`nil` on timeout).
    func consume(throughFirst matches: (Element) -> Bool, timeout: Duration = .seconds(30)) async -> [Element]? {
        guard await eventually(timeout: timeout, { seen.contains(where: matches) }), let index = seen.firstIndex(where: matches) else {
            return nil
        }
        defer { seen.removeFirst(index + 1) }
        return Array(seen[..<index])
    }

    func stop() { task?.cancel() }
}

@Suite("Scale-out: two server processes sharing one PostgreSQL database",
       .enabled(if: TestPostgres.shouldRun, "OFFLINE_SYNC_TEST_POSTGRES_URL is not set: run with Scripts/with-postgres.sh"))
struct ScaleOutTests {
    static let todos = TableSchema("todos", fields: [FieldDefinition("title", .string), FieldDefinition("n", .int)])

    @Test("clients attached to different instances converge, and a change (rows or a dataset) through one instance notifies the other's subscribers")
    func twoInstances() async throws {
        guard let url = TestPostgres.url else { Issue.record("OFFLINE_SYNC_TEST_POSTGRES_URL is not set but CI is"); return }
        try await withTemporaryDirectory { directory in
            try await ServerProcess.withTwoInstances(sharing: url, in: directory) { one, two in
                #expect(one.port != two.port)
                let authority = try await TokenAuthority(secret: testSecret)
                let alice = try await authority.mint(identity: "alice")
                let bob = try await authority.mint(identity: "bob")
                let remoteX = HTTPRemoteStore(baseURL: one.baseURL, token: { alice })
                let remoteY = HTTPRemoteStore(baseURL: two.baseURL, token: { alice })
                let remoteBob = HTTPRemoteStore(baseURL: two.baseURL, token: { bob })
                let heardOnTwo = EventLog(remoteY.changes())
                let heardOnOne = EventLog(remoteX.changes())
                let bobHeard = EventLog(remoteBob.changes())
                #expect(await heardOnTwo.waitFor(.subscribed))
                #expect(await heardOnOne.waitFor(.subscribed))
                #expect(await bobHeard.waitFor(.subscribed))

                let storeX = try await SQLiteStore(path: directory.appendingPathComponent("x.sqlite").path)
                let storeY = try await SQLiteStore(path: directory.appendingPathComponent("y.sqlite").path)
                let x = try await SyncContext(store: storeX, remote: remoteX)
                let y = try await SyncContext(store: storeY, remote: remoteY)
                try await x.defineTable(Self.todos)
                try await y.defineTable(Self.todos)

                // A change through instance one reaches the subscriber attached to instance two.
                for i in 0..<20 { _ = try await x.table("todos").insert(Record(id: "x-\(i)", fields: ["title": "from x", "n": .int(Int64(i))])) }
                try await x.sync(["todos"])
                #expect(await heardOnTwo.waitFor(.changed(table: "todos")), "instance two relayed instance one's change")
                try await y.sync(["todos"])
                #expect(try await y.table("todos").query().count == 20)

                // And the other way round, with edits on both sides.
                _ = try await y.table("todos").update(Record(id: "x-0", fields: ["title": "edited by y", "n": 0]))
                try await y.table("todos").delete(id: "x-1")
                for i in 0..<10 { _ = try await y.table("todos").insert(Record(id: "y-\(i)", fields: ["title": "from y", "n": .int(Int64(i))])) }
                try await y.sync(["todos"])
                #expect(await heardOnOne.waitFor(.changed(table: "todos")), "instance one relayed instance two's change")
                // Concurrent writes through both instances.
                async let fromX: Void = {
                    for i in 20..<40 { _ = try await x.table("todos").insert(Record(id: "x-\(i)", fields: ["title": "late x", "n": .int(Int64(i))])) }
                    try await x.sync(["todos"])
                }()
                async let fromY: Void = {
                    for i in 10..<30 { _ = try await y.table("todos").insert(Record(id: "y-\(i)", fields: ["title": "late y", "n": .int(Int64(i))])) }
                    try await y.sync(["todos"])
                }()
                _ = try await (fromX, fromY)
                try await x.sync(["todos"])
                try await y.sync(["todos"])
                let recordsX = try await x.table("todos").query()
                let recordsY = try await y.table("todos").query()
                #expect(recordsX.count == 40 - 1 + 30)
                #expect(recordsX == recordsY, "both clients converge")
                #expect(recordsX.first { $0.id == "x-0" }?["title"] == "edited by y")
                // Another identity hears nothing of alice's changes, on either instance: bob's own
                // change through instance one is the first thing he hears on two.
                _ = try await HTTPRemoteStore(baseURL: one.baseURL, token: { bob })
                    .push([PushOperation(id: "bob-note", table: "notes", itemId: "n1", kind: .insert, item: Record(id: "n1"), baseVersion: nil)])
                #expect(await bobHeard.consume(through: .changed(table: "notes")) == [], "bob heard of alice's changes")
                #expect(try await remoteBob.pull(PullRequest(table: "todos")).records.isEmpty)

                // Push sync crosses instances too: a device listening on instance one hears of a
                // dataset update made through instance two; bob's device, on instance one, does not.
                let pool = "us-east-1:00000000-0000-0000-0000-0000000000cc"
                let datasetsOne = HTTPDatasetRemote(remoteX, identityPoolId: pool, identityId: "alice")
                let datasetsTwo = HTTPDatasetRemote(remoteY, identityPoolId: pool, identityId: "alice")
                let device = try await datasetsOne.registerDevice(platform: .webSocket, token: "alice-device")
                try await datasetsOne.subscribe(dataset: "profile", deviceId: device)
                let bobOnOne = HTTPRemoteStore(baseURL: one.baseURL, token: { bob })
                let bobDatasets = HTTPDatasetRemote(bobOnOne, identityPoolId: pool, identityId: "bob")
                let bobDevice = try await bobDatasets.registerDevice(platform: .webSocket, token: "bob-device")
                try await bobDatasets.subscribe(dataset: "profile", deviceId: bobDevice)
                let pushedOnOne = EventLog(remoteX.changes(device: device))
                let bobPushed = EventLog(bobOnOne.changes(device: bobDevice))
                #expect(await pushedOnOne.waitFor(.subscribed))
                #expect(await bobPushed.waitFor(.subscribed))
                let session = try await datasetsTwo.listRecords(dataset: "profile", lastSyncCount: 0, nextToken: nil, maxResults: nil,
                                                                syncSessionToken: nil)
                let written = try await datasetsTwo.updateRecords(
                    dataset: "profile", patches: [RecordPatch(op: .replace, key: "name", value: "Alice", syncCount: 0)],
                    syncSessionToken: session.syncSessionToken, deviceId: nil)
                let notice = DatasetNotification(identityPoolId: pool, identityId: "alice", datasetName: "profile",
                                                 syncCount: written.first?.syncCount ?? -1)
                #expect(await pushedOnOne.waitFor(.dataset(notice)), "instance one relayed instance two's dataset update")
                // Bob's device hears of his own update through instance two first: nothing of alice's before it.
                let bobOnTwo = HTTPDatasetRemote(remoteBob, identityPoolId: pool, identityId: "bob")
                let bobSession = try await bobOnTwo.listRecords(dataset: "profile", lastSyncCount: 0, nextToken: nil, maxResults: nil,
                                                                syncSessionToken: nil)
                let bobWritten = try await bobOnTwo.updateRecords(
                    dataset: "profile", patches: [RecordPatch(op: .replace, key: "name", value: "Bob", syncCount: 0)],
                    syncSessionToken: bobSession.syncSessionToken, deviceId: nil)
                let bobNotice = DatasetNotification(identityPoolId: pool, identityId: "bob", datasetName: "profile",
                                                    syncCount: bobWritten.first?.syncCount ?? -1)
                #expect(await bobPushed.consume(through: .dataset(bobNotice)) == [], "bob's device heard of alice's dataset")
                for log in [heardOnOne, heardOnTwo, bobHeard, pushedOnOne, bobPushed] { await log.stop() }
                try await storeX.close()
                try await storeY.close()
                #expect(await one.stopped() == 0)
                #expect(await two.stopped() == 0)
            }
        }
    }

    @Test("under sync rules, a shared change through one instance notifies every reader attached to the other, and no one else; a large group's too",
          arguments: [OfflineSyncService.defaultGroupFanoutLimit, 1])
    func sharedNotificationsCrossInstances(groupFanoutLimit: Int) async throws {
        guard let url = TestPostgres.url else { Issue.record("OFFLINE_SYNC_TEST_POSTGRES_URL is not set but CI is"); return }
        try await withTemporaryDirectory { directory in
            let rules = directory.appendingPathComponent("rules.yaml")
            try RemoteStoreConformance.sharedListsRules.write(to: rules, atomically: true, encoding: .utf8)
            // With a limit of 1, the list of two members is large: its writes are announced once,
            // to the group, and relayed to the members' connections on the other instance.
            try await ServerProcess.withTwoInstances(sharing: url, in: directory, extraArguments: [
                "--rules", rules.path, "--group-fanout-limit", String(groupFanoutLimit),
            ]) { one, two in
                let authority = try await TokenAuthority(secret: testSecret)
                func remote(_ identity: String, on server: ServerProcess) async throws -> HTTPRemoteStore {
                    let token = try await authority.mint(identity: identity)
                    return HTTPRemoteStore(baseURL: server.baseURL, token: { token })
                }
                // Alice writes through instance one; bob and carol listen on instance two.
                let alice = try await remote("alice", on: one)
                let bob = try await remote("bob", on: two), carol = try await remote("carol", on: two)
                let aliceHeard = EventLog(alice.changes()), bobHeard = EventLog(bob.changes()), carolHeard = EventLog(carol.changes())
                for log in [aliceHeard, bobHeard, carolHeard] { #expect(await log.waitFor(.subscribed)) }

                func insert(_ id: String, _ table: String, _ fields: [String: Value]) -> PushOperation {
                    PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: fields),
                                  baseVersion: nil)
                }
                let shared = try await alice.push([
                    insert("L1", "lists", ["name": "groceries"]),
                    insert("m-alice", "list_members", ["list_id": "L1", "user_id": "alice"]),
                    insert("m-bob", "list_members", ["list_id": "L1", "user_id": "bob"]),
                    insert("t1", "todos", ["list_id": "L1", "title": "milk"]),
                ])
                #expect(shared.allSatisfy { if case .applied = $0.outcome { true } else { false } })
                // Each push notifies each reader once per table it changed in that reader's view.
                #expect(await aliceHeard.waitFor(.changed(table: "todos")))
                #expect(await bobHeard.waitFor(.changed(table: "todos")), "instance two relayed alice's share to bob")
                #expect(try await bob.pull(PullRequest(table: "todos")).records.map(\.id) == ["t1"])

                // Carol's own change, through instance one, is the first thing she hears on two:
                // nothing of alice's list came before it.
                _ = try await (try await remote("carol", on: one)).push([insert("n1", "notes", ["text": "mine"])])
                #expect(await carolHeard.consume(through: .changed(table: "notes")) == [], "carol heard of a list she cannot read")

                // Bob's edit through instance two (another client of his: a client does not hear
                // its own pushes) reaches alice on instance one, and bob's channel.
                _ = try await (try await remote("bob", on: two)).push([PushOperation(id: "op-edit", table: "todos", itemId: "t1", kind: .update,
                                                      item: Record(id: "t1", fields: ["list_id": "L1", "title": "oat milk"]), baseVersion: nil)])
                #expect(await aliceHeard.waitFor(.changed(table: "todos")), "instance one relayed bob's edit to alice")
                #expect(await bobHeard.waitFor(.changed(table: "todos")))
                // Bob's own change drains what he heard so far (joining a large group tells of
                // its tables twice: his own log's event, and the group his connection started to hear).
                _ = try await (try await remote("bob", on: one)).push([insert("n1", "notes", ["text": "bob's first"])])
                #expect(await bobHeard.waitFor(.changed(table: "notes")))

                // Alice removes bob through instance one: he hears of it on two, and his pull says t1 left.
                _ = try await alice.push([PushOperation(id: "op-remove-bob", table: "list_members", itemId: "m-bob", kind: .delete,
                                                        item: nil, baseVersion: nil)])
                #expect(await bobHeard.waitFor(.changed(table: "todos")), "instance two relayed bob's move-out")
                #expect(try await bob.pull(PullRequest(table: "todos")).records.isEmpty)
                // A later edit of the list's todo reaches alice and not bob: bob's own change comes first.
                _ = try await (try await remote("alice", on: one)).push([PushOperation(id: "op-edit-2", table: "todos", itemId: "t1", kind: .update,
                                                        item: Record(id: "t1", fields: ["list_id": "L1", "title": "soy milk"]), baseVersion: nil)])
                #expect(await aliceHeard.waitFor(.changed(table: "todos")))
                _ = try await (try await remote("bob", on: one)).push([insert("n2", "notes", ["text": "bob's"])])
                let beforeOwn = await bobHeard.consume(through: .changed(table: "notes"))
                #expect(beforeOwn?.contains(.changed(table: "todos")) == false, "bob heard of a todo he can no longer read")
                for log in [aliceHeard, bobHeard, carolHeard] { await log.stop() }
                #expect(await one.stopped() == 0)
                #expect(await two.stopped() == 0)
            }
        }
    }
}
