import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService
import OfflineSyncStoreKit
import Synchronization
import Testing

/// Records what callbacks were called with, for the tests' assertions.
final class CallbackLog: Sendable {
    private let entries = Mutex<[String]>([])
    func add(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// A remote that runs `between` once, after the first listRecords and before the first
/// updateRecords: another device's write landing mid-synchronize. Every call goes to the
/// real service.
struct InterleavingRemote: DatasetRemote {
    let base: any DatasetRemote
    let between: @Sendable () async throws -> Void
    let fired = CallbackLog()

    func listDatasets(nextToken: String?, maxResults: Int?) async throws -> RemoteDatasetList {
        try await base.listDatasets(nextToken: nextToken, maxResults: maxResults)
    }
    func describeDataset(_ name: String) async throws -> RemoteDataset? { try await base.describeDataset(name) }
    func listRecords(dataset: String, lastSyncCount: Int64, nextToken: String?, maxResults: Int?,
                     syncSessionToken: String?) async throws -> RemoteRecordsPage {
        try await base.listRecords(dataset: dataset, lastSyncCount: lastSyncCount, nextToken: nextToken,
                                   maxResults: maxResults, syncSessionToken: syncSessionToken)
    }
    func updateRecords(dataset: String, patches: [RecordPatch], syncSessionToken: String,
                       deviceId: String?) async throws -> [RemoteDatasetRecord] {
        if fired.all.isEmpty {
            fired.add("fired")
            try await between()
        }
        return try await base.updateRecords(dataset: dataset, patches: patches, syncSessionToken: syncSessionToken, deviceId: deviceId)
    }
    func deleteDataset(_ name: String) async throws -> RemoteDataset? { try await base.deleteDataset(name) }
    func registerDevice(platform: PushPlatform, token: String) async throws -> String {
        try await base.registerDevice(platform: platform, token: token)
    }
    func subscribe(dataset: String, deviceId: String) async throws { try await base.subscribe(dataset: dataset, deviceId: deviceId) }
    func unsubscribe(dataset: String, deviceId: String) async throws { try await base.unsubscribe(dataset: dataset, deviceId: deviceId) }
}

@Suite("Datasets: synchronize with the service (Cognito Sync model)")
struct DatasetSyncTests {
    static let pool = "us-east-1:00000000-0000-0000-0000-0000000000aa"
    static let alice = "us-east-1:aaaaaaaa-0000-0000-0000-000000000001"

    /// A service and devices of one identity, each with its own local store.
    struct World {
        let service: DatasetService
        func device(_ identity: String = DatasetSyncTests.alice, remote: (any DatasetRemote)? = nil) async throws -> DatasetManager {
            try await DatasetManager(store: InMemoryStore(), identity: identity,
                                     remote: remote ?? service.remote(pool: DatasetSyncTests.pool, identity: identity))
        }
        /// Another device's update, straight to the service.
        func write(_ identity: String = DatasetSyncTests.alice, dataset: String, _ values: [String: String?]) async throws {
            let page = try await service.listRecords(pool: DatasetSyncTests.pool, identity: identity, dataset: dataset,
                                                     lastSyncCount: 0, nextToken: nil, maxResults: 1000, syncSessionToken: nil)
            let counts = Dictionary(uniqueKeysWithValues: page.records.map { ($0.key, $0.syncCount) })
            _ = try await service.updateRecords(
                pool: DatasetSyncTests.pool, identity: identity, dataset: dataset,
                patches: values.map { RecordPatch(op: $0.value == nil ? .remove : .replace, key: $0.key, value: $0.value,
                                                  syncCount: counts[$0.key] ?? 0) },
                syncSessionToken: page.syncSessionToken, deviceId: nil, caller: "other")
        }
        func remoteValues(_ identity: String = DatasetSyncTests.alice, dataset: String) async throws -> [String: String] {
            let page = try await service.listRecords(pool: DatasetSyncTests.pool, identity: identity, dataset: dataset,
                                                     lastSyncCount: 0, nextToken: nil, maxResults: 1000, syncSessionToken: nil)
            return Dictionary(uniqueKeysWithValues: page.records.compactMap { record in record.value.map { (record.key, $0) } })
        }
    }

    func world() async throws -> World { World(service: try await DatasetService(store: InMemoryStore())) }

    @Test("two devices converge; success reports the records the remote changed locally")
    func twoDevices() async throws {
        let world = try await world()
        let phone = try await world.device(), tablet = try await world.device()
        let settings = try await phone.openOrCreateDataset("settings")
        try await settings.putAll(["theme": "dark", "lang": "fr"])
        #expect(try await settings.synchronize().isEmpty, "nothing came from the remote")
        #expect(try await settings.lastSyncCount() == 1)
        #expect(try await settings.records().allSatisfy { !$0.isModified && $0.syncCount == 1 })
        #expect(try await world.remoteValues(dataset: "settings") == ["theme": "dark", "lang": "fr"])

        let log = CallbackLog()
        let mirror = try await tablet.openOrCreateDataset("settings")
        let updated = try await mirror.synchronize(DatasetSyncCallbacks(onSuccess: { _, records in
            log.add("success \(records.map(\.key).sorted())")
        }))
        #expect(updated.map(\.key) == ["lang", "theme"])
        #expect(log.all == ["success [\"lang\", \"theme\"]"])
        #expect(try await mirror.getAll() == ["theme": "dark", "lang": "fr"])

        // A removal travels too, and a synchronize with nothing new changes nothing.
        try await mirror.remove("lang")
        try await mirror.synchronize()
        #expect(try await settings.synchronize().map(\.key) == ["lang"])
        #expect(try await settings.getAll() == ["theme": "dark"])
        #expect(try await settings.synchronize().isEmpty)
        #expect(try await settings.lastSyncCount() == 2)
    }

    @Test("a conflict is resolved per key: local, remote or a new value; the outcome reaches every device")
    func conflictPerKey() async throws {
        let world = try await world()
        let phone = try await world.device(), tablet = try await world.device()
        let a = try await phone.openOrCreateDataset("prefs")
        try await a.putAll(["x": "0", "y": "0", "z": "0", "same": "0"])
        try await a.synchronize()
        let b = try await tablet.openOrCreateDataset("prefs")
        try await b.synchronize()

        try await a.putAll(["x": "a", "y": "a", "z": "a", "same": "1"])
        try await a.synchronize()
        try await b.putAll(["x": "b", "y": "b", "z": "b", "same": "1"])
        let log = CallbackLog()
        try await b.synchronize(DatasetSyncCallbacks(onConflict: { _, conflicts in
            log.add(conflicts.map { "\($0.key):\($0.local.value ?? "-")/\($0.remote.value ?? "-")" }.joined(separator: " "))
            return conflicts.map { conflict in
                switch conflict.key {
                case "x": return conflict.resolveWithLocal()
                case "y": return conflict.resolveWithRemote()
                default: return conflict.resolve(with: "merged")
                }
            }
        }))
        #expect(log.all == ["x:b/a y:b/a z:b/a"], "equal values on both sides are no conflict")
        let expected = ["x": "b", "y": "a", "z": "merged", "same": "1"]
        #expect(try await b.getAll() == expected)
        #expect(try await world.remoteValues(dataset: "prefs") == expected)
        try await a.synchronize()
        #expect(try await a.getAll() == expected)
        #expect(try await b.records().allSatisfy { !$0.isModified })
    }

    @Test("stopping at a conflict or failing keeps every local change; onFailure hears why")
    func abortKeepsChanges() async throws {
        let world = try await world()
        let phone = try await world.device()
        let a = try await phone.openOrCreateDataset("notes")
        try await a.put("k", "mine")
        try await a.synchronize()
        try await world.write(dataset: "notes", ["k": "theirs"])
        try await a.put("k", "mine again")
        let log = CallbackLog()
        await #expect(throws: SyncError.self) {
            try await a.synchronize(DatasetSyncCallbacks(onConflict: { _, _ in nil },
                                                         onFailure: { _, error in log.add("\(error.code)") }))
        }
        #expect(log.all == ["cancelled"])
        #expect(try await a.get("k") == "mine again")
        #expect(try await a.records().first?.isModified == true)
        #expect(try await a.lastSyncCount() == 1, "nothing was taken in")
        #expect(try await world.remoteValues(dataset: "notes") == ["k": "theirs"])

        // Without a remote, synchronize is refused and nothing changes.
        let local = try await DatasetManager(store: InMemoryStore(), identity: Self.alice)
        let offline = try await local.openOrCreateDataset("notes")
        try await offline.put("k", "v")
        await #expect(throws: SyncError.self) { try await offline.synchronize() }
        #expect(try await offline.records().first?.isModified == true)
    }

    @Test("a write landing between fetch and update: the update is refused whole, then settled; no change is skipped")
    func interleavedWriters() async throws {
        let world = try await world()
        let setup = try await world.device()
        let seed = try await setup.openOrCreateDataset("shared")
        try await seed.putAll(["k": "0", "other": "0"])
        try await seed.synchronize()

        // Same key: the service refuses the stale update and the device starts over.
        let sameKey = InterleavingRemote(base: world.service.remote(pool: Self.pool, identity: Self.alice)) {
            try await world.write(dataset: "shared", ["k": "theirs"])
        }
        let device = try await world.device(remote: sameKey)
        let dataset = try await device.openOrCreateDataset("shared")
        try await dataset.synchronize()
        try await dataset.put("k", "mine")
        let log = CallbackLog()
        try await dataset.synchronize(DatasetSyncCallbacks(onConflict: { _, conflicts in
            log.add(conflicts.map(\.key).joined())
            return conflicts.map { $0.resolveWithLocal() }
        }))
        #expect(log.all == ["k"])
        #expect(try await world.remoteValues(dataset: "shared") == ["k": "mine", "other": "0"])

        // Another key: the update is accepted, but the sync count does not jump past the
        // other device's change, so the next synchronize brings it in.
        let otherKey = InterleavingRemote(base: world.service.remote(pool: Self.pool, identity: Self.alice)) {
            try await world.write(dataset: "shared", ["other": "theirs"])
        }
        let second = try await world.device(remote: otherKey)
        let copy = try await second.openOrCreateDataset("shared")
        try await copy.synchronize()
        try await copy.put("k", "second")
        try await copy.synchronize()
        #expect(try await copy.get("other") == "0", "the interleaved change was not fetched yet")
        #expect(try await copy.synchronize().map(\.key) == ["other"])
        #expect(try await copy.getAll() == ["k": "second", "other": "theirs"])
        #expect(try await world.remoteValues(dataset: "shared") == ["k": "second", "other": "theirs"])
    }

    @Test("the service applies a stale SyncCount nowhere: conflict, nothing changed")
    func staleSyncCount() async throws {
        let world = try await world()
        try await world.write(dataset: "d", ["a": "1"])
        let page = try await world.service.listRecords(pool: Self.pool, identity: Self.alice, dataset: "d", lastSyncCount: 0,
                                                       nextToken: nil, maxResults: nil, syncSessionToken: nil)
        do {
            _ = try await world.service.updateRecords(
                pool: Self.pool, identity: Self.alice, dataset: "d",
                patches: [RecordPatch(op: .replace, key: "new", value: "x", syncCount: 0),
                          RecordPatch(op: .replace, key: "a", value: "2", syncCount: 0)],
                syncSessionToken: page.syncSessionToken, deviceId: nil, caller: "test")
            Issue.record("a stale sync count was accepted")
        } catch let error as SyncError {
            #expect(error.code == .conflict)
        }
        #expect(try await world.remoteValues(dataset: "d") == ["a": "1"])
        #expect(try await world.service.describeDataset(pool: Self.pool, identity: Self.alice, name: "d").syncCount == 1)
    }

    @Test("a remote deletion: accepted, the local copy goes; refused, the local data is sent as a new dataset")
    func remoteDeletion() async throws {
        let world = try await world()
        let phone = try await world.device(), tablet = try await world.device()
        let a = try await phone.openOrCreateDataset("trip")
        try await a.putAll(["day1": "Paris", "day2": "Lyon"])
        try await a.synchronize()
        let b = try await tablet.openOrCreateDataset("trip")
        try await b.synchronize()

        // The phone deletes it locally; the deletion reaches the remote on synchronize.
        try await a.delete()
        try await a.synchronize()
        await #expect(throws: SyncError.self) {
            _ = try await world.service.describeDataset(pool: Self.pool, identity: Self.alice, name: "trip")
        }
        #expect(try await phone.listDatasets().isEmpty)

        // The tablet refuses the deletion: its data goes back as a new dataset.
        let log = CallbackLog()
        try await b.put("day3", "Nice")
        try await b.synchronize(DatasetSyncCallbacks(onDatasetDeleted: { _, name in log.add("deleted \(name)"); return false }))
        #expect(log.all == ["deleted trip"])
        #expect(try await world.remoteValues(dataset: "trip") == ["day1": "Paris", "day2": "Lyon", "day3": "Nice"])

        // The phone, which had deleted it, now accepts that the remote copy was deleted and
        // created again since it last synchronized: it takes the remote copy.
        let again = try await phone.openOrCreateDataset("trip")
        let accepted = CallbackLog()
        try await again.synchronize(DatasetSyncCallbacks(onDatasetDeleted: { _, name in accepted.add(name); return true }))
        #expect(try await again.getAll() == ["day1": "Paris", "day2": "Lyon", "day3": "Nice"])
    }

    @Test("identity merge: a clashing dataset arrives as <name>.<identity> and is reported to onDatasetsMerged")
    func identityMerge() async throws {
        let world = try await world()
        let guest = "us-east-1:99999999-0000-0000-0000-000000000009"
        let guestDevice = try await world.device(guest)
        let guestSettings = try await guestDevice.openOrCreateDataset("settings")
        try await guestSettings.put("theme", "light")
        try await guestSettings.synchronize()
        let guestOnly = try await guestDevice.openOrCreateDataset("drafts")
        try await guestOnly.put("d1", "text")
        try await guestOnly.synchronize()

        let phone = try await world.device()
        let settings = try await phone.openOrCreateDataset("settings")
        try await settings.put("theme", "dark")
        try await settings.synchronize()

        let names = try await world.service.mergeIdentity(pool: Self.pool, from: guest, into: Self.alice, caller: "test")
        #expect(names.sorted() == ["drafts", "settings.\(guest)"])
        let log = CallbackLog()
        try await settings.synchronize(DatasetSyncCallbacks(onDatasetsMerged: { _, merged in log.add(merged.joined()); return true }))
        #expect(log.all == ["settings.\(guest)"])
        #expect(try await settings.getAll() == ["theme": "dark"], "the identity's own dataset is untouched")
        #expect(try await world.remoteValues(dataset: "settings.\(guest)") == ["theme": "light"], "nothing of the guest is lost")
        #expect(try await world.remoteValues(dataset: "drafts") == ["d1": "text"])
        #expect(try await phone.refreshDatasetMetadata().map(\.name).sorted() == ["drafts", "settings", "settings.\(guest)"])
        #expect(try await phone.listDatasets().map(\.name) == ["drafts", "settings", "settings.\(guest)"])
        let drafts = try await phone.openOrCreateDataset("drafts")
        try await drafts.synchronize()
        #expect(try await drafts.getAll() == ["d1": "text"])
        // A merged dataset's owner can stop the synchronize.
        await #expect(throws: SyncError.self) {
            try await settings.synchronize(DatasetSyncCallbacks(onDatasetsMerged: { _, _ in false }))
        }
    }

    @Test("push sync: a notification synchronizes only when its sync count is beyond the local one")
    func pushNotifications() async throws {
        let world = try await world()
        let phone = try await world.device()
        let dataset = try await phone.openOrCreateDataset("inbox")
        try await dataset.put("m1", "hello")
        try await dataset.synchronize()
        let now = try await dataset.lastSyncCount()
        let notice = { (count: Int64, identity: String) in
            DatasetNotification(identityPoolId: Self.pool, identityId: identity, datasetName: "inbox", syncCount: count)
        }
        #expect(await phone.handle(notice(now, Self.alice)) == false, "its own update's echo")
        #expect(await phone.handle(notice(now - 1, Self.alice)) == false)
        try await world.write(dataset: "inbox", ["m2": "news"])
        #expect(await phone.handle(notice(now + 1, "us-east-1:bbbbbbbb-0000-0000-0000-000000000002")) == false, "not its identity")
        #expect(try await dataset.get("m2") == nil)
        #expect(await phone.handle(notice(now + 1, Self.alice)))
        #expect(try await dataset.get("m2") == "news")
        #expect(await phone.handle(notice(now + 1, Self.alice)) == false, "already there")

        // Through startPushSync, from a stream.
        let (stream, continuation) = AsyncStream.makeStream(of: DatasetNotification.self)
        let log = CallbackLog()
        let task = phone.startPushSync(stream, callbacks: DatasetSyncCallbacks(onSuccess: { _, records in
            log.add(records.map(\.key).joined())
        }))
        try await world.write(dataset: "inbox", ["m3": "more"])
        continuation.yield(notice(now + 2, Self.alice))
        continuation.finish()
        await task.value
        #expect(log.all == ["m3"])
    }

    @Test("limits hold when remote changes come in: the synchronize is refused whole and the device keeps its changes")
    func serviceLimits() async throws {
        let world = try await world()
        let phone = try await world.device()
        let big = try await phone.openOrCreateDataset("big")
        try await big.put("a", String(repeating: "x", count: 700_000))
        try await big.synchronize()
        let other = try await world.device()
        let copy = try await other.openOrCreateDataset("big")
        try await copy.put("b", String(repeating: "y", count: 700_000))   // fine locally: this device has no "a" yet
        do {
            try await copy.synchronize()
            Issue.record("a dataset over 1 MB was accepted")
        } catch let error as SyncError {
            #expect(error.code == .limitExceeded)
        }
        #expect(try await copy.get("b") != nil, "the refused change is kept")
        #expect(try await copy.get("a") == nil, "nothing was taken in")
        #expect(try await world.remoteValues(dataset: "big").keys.sorted() == ["a"])
    }

    @Test("concurrent synchronizes of one dataset run one at a time and both succeed")
    func serialized() async throws {
        let world = try await world()
        let phone = try await world.device()
        let dataset = try await phone.openOrCreateDataset("s")
        try await dataset.put("k", "v")
        async let first: [DatasetRecord] = dataset.synchronize()
        async let second: [DatasetRecord] = dataset.synchronize()
        _ = try await (first, second)
        #expect(try await world.remoteValues(dataset: "s") == ["k": "v"])
        #expect(try await world.service.describeDataset(pool: Self.pool, identity: Self.alice, name: "s").syncCount == 1,
                "the second found nothing to send")
    }
}

@Suite("Datasets: identity change on the device")
struct DatasetIdentityMergeTests {
    @Test("a guest's local datasets move to the signed-in identity; a clash is kept as <name>.<guest> and reported on synchronize")
    func localMerge() async throws {
        let service = try await DatasetService(store: InMemoryStore())
        let pool = DatasetSyncTests.pool, guest = "us-east-1:guest-0001", user = DatasetSyncTests.alice
        let store = InMemoryStore()
        let before = try await DatasetManager(store: store, identity: guest, remote: service.remote(pool: pool, identity: guest))
        let guestSettings = try await before.openOrCreateDataset("settings")
        try await guestSettings.putAll(["theme": "light", "font": "12pt"])
        try await guestSettings.synchronize()
        let notes = try await before.openOrCreateDataset("notes")
        try await notes.put("n1", "written as a guest")
        let gone = try await before.openOrCreateDataset("gone")
        try await gone.delete()

        let after = try await DatasetManager(store: store, identity: user, remote: service.remote(pool: pool, identity: user))
        let settings = try await after.openOrCreateDataset("settings")
        try await settings.put("theme", "dark")
        let moved = try await after.mergeDatasets(from: guest)
        #expect(moved == ["notes", "settings.\(guest)"])
        #expect(try await before.listDatasets().isEmpty, "nothing is left under the guest")
        #expect(try await after.listDatasets().map(\.name) == ["notes", "settings", "settings.\(guest)"])
        let merged = try await after.openOrCreateDataset("settings.\(guest)")
        #expect(try await merged.getAll() == ["theme": "light", "font": "12pt"], "nothing is lost")
        #expect(try await settings.getAll() == ["theme": "dark"])

        let log = CallbackLog()
        try await settings.synchronize(DatasetSyncCallbacks(onDatasetsMerged: { _, names in log.add(names.joined(separator: ",")); return true }))
        #expect(log.all == ["settings.\(guest)"])
        // The moved datasets are sent as the user's on their first synchronize.
        try await after.openOrCreateDataset("notes").synchronize()
        try await merged.synchronize()
        let page = try await service.listRecords(pool: pool, identity: user, dataset: "notes", lastSyncCount: 0, nextToken: nil,
                                                 maxResults: nil, syncSessionToken: nil)
        #expect(page.records.map(\.key) == ["n1"])
        #expect(try await service.describeDataset(pool: pool, identity: user, name: "settings.\(guest)").numRecords == 2)
        // Once the app has folded it in and deleted it, nothing more is reported.
        try await merged.delete()
        try await merged.synchronize()
        let quiet = CallbackLog()
        try await settings.synchronize(DatasetSyncCallbacks(onDatasetsMerged: { _, names in quiet.add(names.joined()); return true }))
        #expect(quiet.all.isEmpty)
        await #expect(throws: SyncError.self) { try await after.mergeDatasets(from: user) }
    }
}
