import Foundation
import OfflineSync

/// A dataset: a named map of string keys to string values of one identity. Every call
/// touches only the local store; changes are remembered until the dataset is synchronized.
public final class Dataset: Sendable {
    /// The dataset's name.
    public let name: String
    /// The identity's manager.
    public let manager: DatasetManager

    init(manager: DatasetManager, name: String) {
        self.manager = manager
        self.name = name
    }

    private var store: any LocalStore { manager.store }
    private var identity: String { manager.identity }

    /// The value of `key`, or `nil` (also for a removed key).
    public func get(_ key: String) async throws -> String? {
        try DatasetManager.validateKey(key)
        let identity = self.identity, name = self.name
        return try await store.read { txn in
            try DatasetTables.record(txn, identity: identity, dataset: name, key: key)?.value
        }
    }

    /// Every key that holds a value.
    public func getAll() async throws -> [String: String] {
        let identity = self.identity, name = self.name
        return try await store.read { txn in
            var all: [String: String] = [:]
            for record in try DatasetTables.records(txn, identity: identity, dataset: name) {
                if let value = record.value { all[record.key] = value }
            }
            return all
        }
    }

    /// Every key, removed ones included, with its sync state.
    public func records() async throws -> [DatasetRecord] {
        let identity = self.identity, name = self.name
        return try await store.read { txn in try DatasetTables.records(txn, identity: identity, dataset: name) }
    }

    /// Sets `key` to `value`. Throws ``SyncError/Code/invalidName`` for an empty key and
    /// ``SyncError/Code/limitExceeded`` for a key over 128 characters, a value over 1 MB or a
    /// dataset that would exceed 1 MB; nothing changes then.
    public func put(_ key: String, _ value: String) async throws {
        try await putAll([key: value])
    }

    /// Sets every key of `values`, all or none: the limits are checked for the whole change.
    public func putAll(_ values: [String: String]) async throws {
        for (key, value) in values {
            try DatasetManager.validateKey(key)
            try DatasetManager.validateValue(value)
        }
        try await change(values.mapValues { Optional($0) })
    }

    /// Removes `key` (remembered as a removal until synchronized).
    public func remove(_ key: String) async throws {
        try DatasetManager.validateKey(key)
        try await change([key: nil])
    }

    /// The dataset's sync count when it was last synchronized (0: never).
    public func lastSyncCount() async throws -> Int64 {
        let id = DatasetTables.datasetId(identity: identity, name: name)
        return try await store.read { txn in try DatasetTables.DatasetRow.find(txn, id: id)?.lastSyncCount ?? 0 }
    }

    /// Bytes of keys and values the dataset holds (UTF-8).
    public func sizeInBytes() async throws -> Int {
        try await records().reduce(0) { $0 + $1.sizeInBytes }
    }

    /// Deletes the dataset locally: its records go, and the dataset is remembered as deleted
    /// until a synchronize deletes it remotely too. Opening it again starts it afresh.
    public func delete() async throws {
        let identity = self.identity, name = self.name
        try await store.write { txn in
            let id = DatasetTables.datasetId(identity: identity, name: name)
            guard var row = try DatasetTables.DatasetRow.find(txn, id: id) else { return }
            try DatasetTables.removeRecords(txn, identity: identity, dataset: name)
            row.deletedLocally = true
            row.deletePending = true
            row.lastModified = Timestamp.now()
            try row.save(txn)
        }
    }

    /// Applies `changes` (nil removes a key) in one transaction, checking the dataset's size.
    private func change(_ changes: [String: String?]) async throws {
        let identity = self.identity, name = self.name
        try await store.write { txn in
            let datasetId = DatasetTables.datasetId(identity: identity, name: name)
            guard var dataset = try DatasetTables.DatasetRow.find(txn, id: datasetId), !dataset.deletedLocally else {
                throw SyncError(.notFound, "dataset '\(name)' was deleted; open it again to use it")
            }
            var size = try DatasetTables.records(txn, identity: identity, dataset: name).reduce(0) { $0 + $1.sizeInBytes }
            let now = Timestamp.now()
            var updated: [DatasetRecord] = []
            for (key, value) in changes {
                let current = try DatasetTables.record(txn, identity: identity, dataset: name, key: key)
                if current == nil && value == nil { continue }
                if let current, current.value == value { continue }
                var record = current ?? DatasetRecord(key: key, value: nil, syncCount: 0, lastModified: now, isModified: false)
                size -= record.sizeInBytes
                record.value = value
                record.lastModified = now
                record.isModified = true
                size += record.sizeInBytes
                updated.append(record)
            }
            guard size <= DatasetManager.maxDatasetBytes else {
                throw SyncError(.limitExceeded, "a dataset may hold at most \(DatasetManager.maxDatasetBytes) bytes of keys and values")
            }
            for record in updated { try DatasetTables.store(record, identity: identity, dataset: name, txn: txn) }
            if !updated.isEmpty {
                dataset.lastModified = now
                try dataset.save(txn)
            }
        }
    }
}
