import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

@Suite("Datasets in a SQLite file")
struct DatasetPersistenceTests {
    @Test("datasets, values, removals and their change marks survive closing and reopening the file")
    func reopen() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("datasets.sqlite").path
            try await withStore(at: path) { store in
                let datasets = try await DatasetManager(store: store, identity: "alice")
                let settings = try await datasets.openOrCreateDataset("settings")
                try await settings.putAll(["theme": "dark", "lang": "fr", "emoji": "😀\u{0}\""])
                try await settings.remove("lang")
                _ = try await datasets.openOrCreateDataset("empty")
            }
            try await withStore(at: path) { store in
                let datasets = try await DatasetManager(store: store, identity: "alice")
                #expect(try await datasets.listDatasets().map(\.name) == ["empty", "settings"])
                let settings = try await datasets.openOrCreateDataset("settings")
                #expect(try await settings.getAll() == ["theme": "dark", "emoji": "😀\u{0}\""])
                let records = try await settings.records()
                #expect(records.map(\.key) == ["emoji", "lang", "theme"])
                #expect(records.allSatisfy { $0.isModified })
            }
        }
    }
}
