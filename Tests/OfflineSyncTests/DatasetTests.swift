import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncStoreKit
import Testing

@Suite("Datasets: local key/value maps per identity (Cognito Sync model)")
struct DatasetTests {
    func manager(_ identity: String = "alice", store: InMemoryStore = InMemoryStore()) async throws -> DatasetManager {
        try await DatasetManager(store: store, identity: identity)
    }

    @Test("put, get, getAll, putAll and remove touch only the local store and are remembered as changes")
    func basics() async throws {
        let datasets = try await manager()
        let settings = try await datasets.openOrCreateDataset("settings")
        #expect(try await settings.get("theme") == nil)
        try await settings.put("theme", "dark")
        try await settings.putAll(["lang": "fr", "font": "12pt"])
        #expect(try await settings.get("theme") == "dark")
        #expect(try await settings.getAll() == ["theme": "dark", "lang": "fr", "font": "12pt"])
        try await settings.remove("lang")
        #expect(try await settings.get("lang") == nil)
        #expect(try await settings.getAll() == ["theme": "dark", "font": "12pt"])
        let records = try await settings.records()
        #expect(records.map(\.key) == ["font", "lang", "theme"])
        #expect(records.allSatisfy { $0.isModified }, "every local change waits for synchronize")
        #expect(records.first { $0.key == "lang" }?.value == nil, "a removal is kept as a change")
        #expect(try await settings.lastSyncCount() == 0)
        #expect(try await settings.sizeInBytes() == "theme".utf8.count + 4 + "font".utf8.count + 4)
        // Removing a key that never existed changes nothing.
        try await settings.remove("never")
        #expect(try await settings.records().count == 3)
    }

    @Test("names follow [A-Za-z0-9_.:-]{1,128}; keys are 1 to 128 characters")
    func names() async throws {
        let datasets = try await manager()
        for good in ["a", "A-z_0.9:x", String(repeating: "n", count: 128)] {
            _ = try await datasets.openOrCreateDataset(good)
        }
        for bad in ["", "with space", "slash/", "é", String(repeating: "n", count: 129), "nul\u{0}"] {
            await #expect(throws: SyncError.self, "'\(bad)'") { try await datasets.openOrCreateDataset(bad) }
        }
        let dataset = try await datasets.openOrCreateDataset("keys")
        try await dataset.put(String(repeating: "é", count: 128), "ok")
        do {
            try await dataset.put(String(repeating: "k", count: 129), "x")
            Issue.record("a 129-character key was accepted")
        } catch let error as SyncError {
            #expect(error.code == .limitExceeded)
        }
        do {
            try await dataset.put("", "x")
            Issue.record("an empty key was accepted")
        } catch let error as SyncError {
            #expect(error.code == .invalidName)
        }
        #expect(try await dataset.getAll().count == 1)
    }

    @Test("limits: 20 datasets, 1 MB per value and per dataset; a refused write changes nothing")
    func limits() async throws {
        let datasets = try await manager()
        for i in 0..<DatasetManager.maxDatasets { _ = try await datasets.openOrCreateDataset("d\(i)") }
        do {
            _ = try await datasets.openOrCreateDataset("one-too-many")
            Issue.record("a 21st dataset was created")
        } catch let error as SyncError {
            #expect(error.code == .limitExceeded)
        }
        #expect(try await datasets.listDatasets().count == 20)
        _ = try await datasets.openOrCreateDataset("d3")   // reopening an existing one is fine

        let big = try await datasets.openOrCreateDataset("d0")
        let half = String(repeating: "x", count: 600_000)
        try await big.put("a", half)
        let before = try await big.records()
        // A second 600 kB value would take the dataset over 1 MB: refused, nothing changes.
        do {
            try await big.put("b", half)
            Issue.record("a dataset over 1 MB was accepted")
        } catch let error as SyncError {
            #expect(error.code == .limitExceeded)
        }
        // putAll is all or nothing.
        do {
            try await big.putAll(["c": "small", "d": half])
            Issue.record("putAll over the limit was accepted")
        } catch let error as SyncError {
            #expect(error.code == .limitExceeded)
        }
        #expect(try await big.records() == before)
        do {
            try await big.put("huge", String(repeating: "y", count: DatasetManager.maxValueBytes + 1))
            Issue.record("a value over 1 MB was accepted")
        } catch let error as SyncError {
            #expect(error.code == .limitExceeded)
        }
        // Replacing the big value with a small one frees the space.
        try await big.put("a", "small")
        try await big.put("b", half)
        #expect(try await big.sizeInBytes() == 1 + 5 + 1 + half.utf8.count)
        // Deleting a dataset frees a slot; reopening a deleted one needs a free slot too.
        try await datasets.openOrCreateDataset("d19").delete()
        _ = try await datasets.openOrCreateDataset("new-one")
        #expect(try await datasets.listDatasets().count == 20)
        await #expect(throws: SyncError.self) { try await datasets.openOrCreateDataset("d19") }
        #expect(try await datasets.listDatasets().count == 20)
    }

    @Test("delete removes the records locally; a deleted dataset refuses writes until reopened")
    func delete() async throws {
        let datasets = try await manager()
        let dataset = try await datasets.openOrCreateDataset("notes")
        try await dataset.put("k", "v")
        try await dataset.delete()
        #expect(try await datasets.listDatasets().isEmpty)
        #expect(try await dataset.getAll().isEmpty)
        await #expect(throws: SyncError.self) { try await dataset.put("k", "again") }
        let reopened = try await datasets.openOrCreateDataset("notes")
        try await reopened.put("k", "fresh")
        #expect(try await reopened.getAll() == ["k": "fresh"])
    }

    @Test("identities sharing a store never see each other's datasets; wipeData removes only one identity's")
    func isolation() async throws {
        let store = InMemoryStore()
        let alice = try await manager("alice", store: store)
        let bob = try await manager("bob", store: store)
        try await alice.openOrCreateDataset("shared-name").put("owner", "alice")
        try await bob.openOrCreateDataset("shared-name").put("owner", "bob")
        #expect(try await alice.openOrCreateDataset("shared-name").get("owner") == "alice")
        #expect(try await bob.openOrCreateDataset("shared-name").get("owner") == "bob")
        try await alice.wipeData()
        #expect(try await alice.listDatasets().isEmpty)
        #expect(try await bob.listDatasets().map(\.name) == ["shared-name"])
        #expect(try await bob.openOrCreateDataset("shared-name").get("owner") == "bob")
        let metadata = try #require(try await bob.listDatasets().first)
        #expect(metadata.recordCount == 1)
        #expect(metadata.storageSizeBytes == "owner".utf8.count + "bob".utf8.count)
        #expect(metadata.lastSyncCount == 0)
    }
}
