import Foundation
import OfflineSync
import SnapshotStore
import Testing

/// A fresh temporary directory, removed when the test ends.
final class TemporaryDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}

@Suite struct SnapshotStoreTests {
    @Test func registryOpensTheSchemeAndRejectsBadURLs() async throws {
        let directory = try TemporaryDirectory()
        var registry = StoreRegistry()
        registry.register(.snapshot)
        #expect(registry.schemes == ["snapshot"])

        let url = "snapshot://" + directory.url.appendingPathComponent("app.snapshot").path
        let store = try await registry.open(url)
        try await store.defineTable(TableSchema("notes", fields: [FieldDefinition("text", .string)]))
        try await store.write { tx in try tx.upsert(Record(id: "n1", fields: ["text": "hello"]), in: "notes") }
        try await store.close()

        let reopened = try await registry.open(url)
        let note = try await reopened.read { tx in try tx.record(in: "notes", id: "n1") }
        #expect(note?["text"] == "hello")
        try await reopened.close()

        for bad in ["snapshot://host/app.snapshot", "snapshot:///dir/", "snapshot:///app.snapshot?mode=fast"] {
            await #expect(throws: SyncError.self, "\(bad)") { _ = try await registry.open(bad) }
        }
        do {
            _ = try await registry.open("lmdb:///tmp/env")
            Issue.record("an unregistered scheme opened")
        } catch let error as SyncError {
            #expect(error.code == .unknownScheme)
            #expect(error.message.contains("snapshot"), "the error names the registered schemes: \(error.message)")
        }
    }

    @Test func aFailedCommitKeepsTheOldFileAndTheOldData() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.url.appendingPathComponent("app.snapshot").path
        let store = try await SnapshotStore(path: path)
        try await store.defineTable(TableSchema("t", fields: [FieldDefinition("n", .int)]))
        try await store.write { tx in try tx.upsert(Record(id: "a", fields: ["n": 1]), in: "t") }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        // A directory where the next snapshot's temporary file goes: the commit cannot write it
        // (even as root).
        try FileManager.default.createDirectory(atPath: path + ".tmp", withIntermediateDirectories: false)
        do {
            try await store.write { tx in try tx.upsert(Record(id: "b", fields: ["n": 2]), in: "t") }
            Issue.record("a commit whose snapshot cannot be written succeeded")
        } catch let error as SyncError {
            #expect(error.code == .storageFailure)
        }
        let ids = try await store.read { tx in try tx.records(in: "t", matching: .all).map(\.id) }
        #expect(ids == ["a"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)

        // Once the obstacle is gone, the store commits again.
        try FileManager.default.removeItem(atPath: path + ".tmp")
        try await store.write { tx in try tx.upsert(Record(id: "b", fields: ["n": 2]), in: "t") }
        #expect(try await store.read { tx in try tx.count(in: "t", matching: .all) } == 2)
        try await store.close()
    }

    @Test func aNewerFormatVersionIsRefusedUnchanged() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.url.appendingPathComponent("app.snapshot").path
        let store = try await SnapshotStore(path: path)
        try await store.defineTable(TableSchema("t"))
        try await store.close()
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[8] = 2
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        do {
            _ = try await SnapshotStore(path: path)
            Issue.record("a version-2 file opened")
        } catch let error as SyncError {
            #expect(error.code == .unsupported)
        }
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
    }
}
