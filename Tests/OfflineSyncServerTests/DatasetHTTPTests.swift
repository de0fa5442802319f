import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// Collects what a dataset's callbacks heard.
actor Heard {
    private(set) var entries: [String] = []
    func add(_ entry: String) { entries.append(entry) }

    /// Waits up to `timeout` until `entry` was heard.
    func waitFor(_ entry: String, timeout: Duration = .seconds(60)) async -> Bool {
        await waitUntil(timeout: timeout) { $0.contains(entry) }
    }

    /// Waits up to `timeout` until `condition` holds for what was heard.
    func waitUntil(timeout: Duration = .seconds(60), _ condition: ([String]) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { condition(entries) }
    }
}

@Suite("Datasets over HTTP: the Swift client against the server's Cognito Sync API, push sync over the WebSocket")
struct DatasetHTTPTests {
    static let pool = "us-east-1:00000000-0000-0000-0000-0000000000bb"
    static let alice = "us-east-1:aaaaaaaa-0000-0000-0000-00000000000a"
    static let bob = "us-east-1:bbbbbbbb-0000-0000-0000-00000000000b"

    /// One device: its own SQLite store, an HTTP transport with a token for `identity`,
    /// and a dataset manager synchronizing through the server.
    struct Device {
        let http: HTTPRemoteStore
        let datasets: DatasetManager
        let store: SQLiteStore

        static func make(_ live: LiveServer, identity: String, file: URL) async throws -> Device {
            let http = try await live.remote(identity)
            let store = try await SQLiteStore(path: file.path)
            let remote = HTTPDatasetRemote(http, identityPoolId: DatasetHTTPTests.pool, identityId: identity)
            return Device(http: http, datasets: try await DatasetManager(store: store, identity: identity, remote: remote), store: store)
        }
    }

    @Test("two devices of one identity converge through the server; a per-key conflict is resolved; limits and stale counts are refused")
    func twoDevices() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LiveServer.start(in: directory)
            let phone = try await Device.make(live, identity: Self.alice, file: directory.appendingPathComponent("phone.sqlite"))
            let tablet = try await Device.make(live, identity: Self.alice, file: directory.appendingPathComponent("tablet.sqlite"))
            let a = try await phone.datasets.openOrCreateDataset("settings")
            try await a.putAll(["theme": "dark", "size": "m", "lang": "fr"])
            try await a.synchronize()
            let b = try await tablet.datasets.openOrCreateDataset("settings")
            #expect(try await b.synchronize().map(\.key) == ["lang", "size", "theme"])

            try await a.putAll(["theme": "light", "size": "l"])
            try await a.synchronize()
            try await b.putAll(["theme": "solarized", "size": "s"])
            try await b.synchronize(DatasetSyncCallbacks(onConflict: { _, conflicts in
                conflicts.map { $0.key == "theme" ? $0.resolveWithLocal() : $0.resolveWithRemote() }
            }))
            try await a.synchronize()
            let expected = ["theme": "solarized", "size": "l", "lang": "fr"]
            #expect(try await a.getAll() == expected)
            #expect(try await b.getAll() == expected)
            let described = try await live.server.datasets.describeDataset(pool: Self.pool, identity: Self.alice, name: "settings")
            #expect(described.numRecords == 3)

            // Over the wire, a stale sync count is a typed conflict and applies nothing.
            let remote = HTTPDatasetRemote(phone.http, identityPoolId: Self.pool, identityId: Self.alice)
            let page = try await remote.listRecords(dataset: "settings", lastSyncCount: 0, nextToken: nil, maxResults: nil,
                                                    syncSessionToken: nil)
            do {
                _ = try await remote.updateRecords(dataset: "settings", patches: [
                    RecordPatch(op: .replace, key: "fresh", value: "x", syncCount: 0),
                    RecordPatch(op: .replace, key: "theme", value: "x", syncCount: 1),
                ], syncSessionToken: page.syncSessionToken, deviceId: nil)
                Issue.record("a stale sync count was accepted")
            } catch let error as SyncError {
                #expect(error.code == .conflict)
            }
            #expect(try await remote.describeDataset("settings")?.numRecords == 3)
            // A value over 1 MB: limitExceeded, nothing stored.
            do {
                _ = try await remote.updateRecords(dataset: "settings", patches: [
                    RecordPatch(op: .replace, key: "huge", value: String(repeating: "x", count: (1 << 20) + 1), syncCount: 0),
                ], syncSessionToken: page.syncSessionToken, deviceId: nil)
                Issue.record("a value over 1 MB was accepted")
            } catch let error as SyncError {
                #expect(error.code == .limitExceeded)
            }
            // Another identity's token cannot reach alice's datasets.
            let bobHTTP = try await live.remote(Self.bob)
            let intruder = HTTPDatasetRemote(bobHTTP, identityPoolId: Self.pool, identityId: Self.alice)
            do {
                _ = try await intruder.listDatasets(nextToken: nil, maxResults: nil)
                Issue.record("bob's token listed alice's datasets")
            } catch let error as SyncError {
                #expect(error.code == .forbidden)
            }
            #expect(try await remote.listDatasets(nextToken: nil, maxResults: nil).datasets.map(\.name) == ["settings"])

            // The operator merges bob's datasets into alice's (an identity provider linking
            // logins): the clash arrives as settings.<bob>, and alice's devices are told.
            let bobRemote = HTTPDatasetRemote(bobHTTP, identityPoolId: Self.pool, identityId: Self.bob)
            let bobDevice = try await DatasetManager(store: try await SQLiteStore(path: directory.appendingPathComponent("bob.sqlite").path),
                                                     identity: Self.bob, remote: bobRemote)
            let bobSettings = try await bobDevice.openOrCreateDataset("settings")
            try await bobSettings.put("theme", "bob's")
            try await bobSettings.synchronize()
            let body = Array(#"{"identityPoolId":"\#(Self.pool)","from":"\#(Self.bob)","into":"\#(Self.alice)"}"#.utf8)
            let refused = try await http(.POST, live.baseURL + "/v1/admin/merge-identities", body: body)
            #expect(refused.status == 401)
            let mergedAnswer = try await http(.POST, live.baseURL + "/v1/admin/merge-identities",
                                              headers: [("X-Admin-Key", testAdminKey)], body: body)
            #expect(mergedAnswer.status == 200)
            #expect(mergedAnswer.text.contains("settings.\(Self.bob)"))
            let heard = Heard()
            try await a.synchronize(DatasetSyncCallbacks(onDatasetsMerged: { _, names in
                await heard.add(names.joined(separator: ",")); return true
            }))
            #expect(await heard.entries == ["settings.\(Self.bob)"])
            #expect(try await remote.listDatasets(nextToken: nil, maxResults: nil).datasets.map(\.name) == ["settings", "settings.\(Self.bob)"])
            try await bobDevice.store.close()
            try await phone.store.close()
            try await tablet.store.close()
            try await live.stop()
        }
    }

    @Test("push sync: a change by one device makes the other synchronize by itself; other identities hear nothing; an echo triggers nothing")
    func pushSync() async throws {
        try await withTemporaryDirectory { directory in
            let live = try await LiveServer.start(in: directory)
            let phone = try await Device.make(live, identity: Self.alice, file: directory.appendingPathComponent("phone.sqlite"))
            let tablet = try await Device.make(live, identity: Self.alice, file: directory.appendingPathComponent("tablet.sqlite"))
            let stranger = try await Device.make(live, identity: Self.bob, file: directory.appendingPathComponent("bob.sqlite"))

            let shared = try await phone.datasets.openOrCreateDataset("shared")
            try await shared.put("greeting", "hello")
            try await shared.synchronize()
            let mirror = try await tablet.datasets.openOrCreateDataset("shared")
            try await mirror.synchronize()

            // The tablet and bob register for WebSocket push sync and subscribe.
            let tabletDevice = try await tablet.datasets.registerDevice(platform: .webSocket, token: "tablet-socket")
            #expect(try await tablet.datasets.registerDevice(platform: .webSocket, token: "tablet-socket") == tabletDevice)
            try await tablet.datasets.subscribeAll()
            let bobDevice = try await stranger.datasets.registerDevice(platform: .webSocket, token: "bob-socket")
            let bobShared = try await stranger.datasets.openOrCreateDataset("shared")
            try await bobShared.put("mine", "bob")
            try await bobShared.synchronize()
            try await stranger.datasets.subscribe("shared")
            // Bob cannot subscribe with the tablet's device id: it is not his.
            let bobRemote = HTTPDatasetRemote(stranger.http, identityPoolId: Self.pool, identityId: Self.bob)
            await #expect(throws: SyncError.self) { try await bobRemote.subscribe(dataset: "shared", deviceId: tabletDevice) }

            let heard = Heard()
            let tabletEvents = tablet.http.changes(device: tabletDevice)
            let notifications = AsyncStream<DatasetNotification> { continuation in
                let task = Task {
                    for await event in tabletEvents {
                        switch event {
                        case .subscribed: await heard.add("subscribed")
                        case .dataset(let notification):
                            await heard.add("notified \(notification.datasetName) \(notification.syncCount)")
                            continuation.yield(notification)
                        default: continue
                        }
                    }
                    continuation.finish()
                }
                continuation.onTermination = { _ in task.cancel() }
            }
            let bobEvents = EventLog(stranger.http.changes(device: bobDevice))
            let pushTask = tablet.datasets.startPushSync(notifications, callbacks: DatasetSyncCallbacks(onSuccess: { dataset, records in
                await heard.add("synchronized \(dataset.name) \(records.map(\.key).joined(separator: ","))")
            }))
            #expect(await heard.waitFor("subscribed"))
            #expect(await bobEvents.waitFor(.subscribed))

            // The phone changes the dataset: the tablet is told and synchronizes by itself.
            try await shared.put("greeting", "bonjour")
            try await shared.synchronize()
            let count = try await shared.lastSyncCount()
            #expect(await heard.waitFor("notified shared \(count)"))
            #expect(await heard.waitFor("synchronized shared greeting"))
            #expect(try await mirror.get("greeting") == "bonjour")
            #expect(try await mirror.lastSyncCount() == count)

            // The tablet's own change comes back as a notice whose count it already has: no synchronize.
            try await mirror.put("reply", "salut")
            try await mirror.synchronize()
            let echo = try await mirror.lastSyncCount()
            #expect(await heard.waitFor("notified shared \(echo)"))
            // The phone's next change is the signal: the tablet handles notices one at a time,
            // so once it has synchronized that change, the echo's handling is over.
            try await shared.put("greeting", "hello again")
            try await shared.synchronize()
            let next = try await shared.lastSyncCount()
            func synchronizations(_ entries: [String]) -> Int { entries.filter { $0.hasPrefix("synchronized") }.count }
            #expect(await heard.waitFor("notified shared \(next)"))
            #expect(await heard.waitUntil { synchronizations($0) >= 2 })
            #expect(synchronizations(await heard.entries) == 2, "the echo caused no synchronize")

            // Bob's device never heard alice's dataset, though his own has the same name: his own
            // change's notice comes after every notice published before it, and alice's is not among them.
            try await bobShared.put("mine", "bob again")
            try await bobShared.synchronize()
            let bobNotice = RemoteChangeEvent.dataset(DatasetNotification(
                identityPoolId: Self.pool, identityId: Self.bob, datasetName: "shared", syncCount: try await bobShared.lastSyncCount()))
            let beforeBob = try #require(await bobEvents.consume(through: bobNotice))
            #expect(!beforeBob.contains { event in
                if case .dataset(let notice) = event { return notice.identityId == Self.alice }
                return false
            }, "\(beforeBob)")
            // An unsubscribed device hears nothing more: subscribed again, it hears the next
            // change, and the one made while it was unsubscribed never came before it.
            try await tablet.datasets.unsubscribe("shared")
            try await shared.put("greeting", "hola")
            try await shared.synchronize()
            let later = try await shared.lastSyncCount()
            try await tablet.datasets.subscribe("shared")
            try await shared.put("greeting", "ciao")
            try await shared.synchronize()
            let resubscribed = try await shared.lastSyncCount()
            #expect(await heard.waitFor("notified shared \(resubscribed)"))
            #expect(await heard.entries.contains("notified shared \(later)") == false)

            pushTask.cancel()
            await bobEvents.stop()
            for device in [phone, tablet, stranger] { try await device.store.close() }
            try await live.stop()
        }
    }
}
