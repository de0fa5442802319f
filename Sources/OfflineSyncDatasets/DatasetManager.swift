import Foundation
import OfflineSync
import Synchronization

/// The key/value datasets of one identity, Cognito Sync style, kept in a ``LocalStore``.
///
/// A dataset is a named map of string keys to string values. Reads and writes touch only
/// the local store; every local change is remembered (with the record's last known sync
/// count) until it is synchronized. The limits of Amazon Cognito Sync are enforced on write,
/// with ``SyncError/Code/limitExceeded`` (or ``SyncError/Code/invalidName``) and no change:
/// at most ``maxDatasets`` datasets per identity, ``maxDatasetBytes`` per dataset (keys and
/// values, UTF-8), keys of 1 to ``maxKeyLength`` characters, values up to ``maxValueBytes``.
///
/// ```swift
/// let datasets = try await DatasetManager(store: store, identity: "alice")
/// let settings = try await datasets.openOrCreateDataset("settings")
/// try await settings.put("theme", "dark")
/// let theme = try await settings.get("theme")      // "dark"
/// ```
public final class DatasetManager: Sendable {
    /// The most datasets one identity may have.
    public static let maxDatasets = 20
    /// The most bytes of keys and values one dataset may hold.
    public static let maxDatasetBytes = 1 << 20
    /// The longest key, in characters.
    public static let maxKeyLength = 128
    /// The largest value, in UTF-8 bytes.
    public static let maxValueBytes = 1 << 20

    /// The store holding the datasets.
    public let store: any LocalStore
    /// The identity whose datasets these are.
    public let identity: String
    /// Where ``Dataset/synchronize(_:)`` sends and fetches changes, or `nil` for local-only datasets.
    public let remote: (any DatasetRemote)?
    /// The device id that updates report (``registerDevice(platform:token:)`` sets it).
    public var deviceId: String? { deviceIdBox.withLock { $0 } }
    let deviceIdBox = Mutex<String?>(nil)
    let gate = DatasetSyncGate()
    /// Whether the remote is reachable, for ``Dataset/synchronizeOnConnectivity(_:)``
    /// (`nil`: assumed reachable).
    public let network: (any NetworkMonitor)?
    /// The latest ``Dataset/synchronizeOnConnectivity(_:)`` request per dataset, while waiting.
    let waitingForNetwork = Mutex<[String: DatasetSyncCallbacks]>([:])

    /// Opens the datasets of `identity` in `store` (defining the dataset tables if needed),
    /// synchronized with `remote` when one is given; `network` tells
    /// ``Dataset/synchronizeOnConnectivity(_:)`` when the remote is reachable. Throws
    /// ``SyncError/Code/invalidName`` for an identity ``Identity/validate(_:)`` refuses (empty,
    /// over 256 bytes, or holding a control character).
    public init(store: any LocalStore, identity: String, remote: (any DatasetRemote)? = nil,
                network: (any NetworkMonitor)? = nil) async throws {
        do { try Identity.validate(identity) } catch let error as SyncError {
            throw SyncError(.invalidName, error.message)
        }
        self.store = store
        self.identity = identity
        self.remote = remote
        self.network = network
        try await DatasetTables.define(in: store)
    }

    /// The remote, or ``SyncError/Code/unsupported`` for local-only datasets.
    func requireRemote() throws -> any DatasetRemote {
        guard let remote else { throw SyncError(.unsupported, "these datasets have no remote to synchronize with") }
        return remote
    }

    /// Throws ``SyncError/Code/invalidName`` unless `name` matches `[A-Za-z0-9_.:-]{1,128}`.
    public static func validateName(_ name: String) throws {
        let allowed = name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
        }
        guard allowed, (1...128).contains(name.utf8.count) else {
            throw SyncError(.invalidName, "a dataset name is 1 to 128 characters of A-Z, a-z, 0-9, '_', '.', ':' and '-'")
        }
    }

    /// Throws ``SyncError/Code/invalidName`` for an empty key (or one with NUL) and
    /// ``SyncError/Code/limitExceeded`` for one over ``maxKeyLength`` characters.
    public static func validateKey(_ key: String) throws {
        if key.isEmpty || key.utf8.contains(0) { throw SyncError(.invalidName, "a dataset key is 1 to 128 characters with no NUL") }
        if key.count > maxKeyLength {
            throw SyncError(.limitExceeded, "a dataset key may have at most \(maxKeyLength) characters")
        }
    }

    /// Throws ``SyncError/Code/limitExceeded`` for a value over ``maxValueBytes`` (UTF-8).
    public static func validateValue(_ value: String) throws {
        guard value.utf8.count <= maxValueBytes else {
            throw SyncError(.limitExceeded, "a dataset value may have at most \(maxValueBytes) bytes")
        }
    }

    /// The dataset `name`, created locally if it does not exist. Throws
    /// ``SyncError/Code/invalidName`` for a bad name and ``SyncError/Code/limitExceeded`` when
    /// the identity already has ``maxDatasets`` datasets.
    public func openOrCreateDataset(_ name: String) async throws -> Dataset {
        try Self.validateName(name)
        let identity = self.identity
        try await store.write { txn in
            let id = DatasetTables.datasetId(identity: identity, name: name)
            let existing = try DatasetTables.DatasetRow.find(txn, id: id)
            if let existing, !existing.deletedLocally { return }
            let live = try DatasetTables.DatasetRow.count(txn, DatasetTables.DatasetRow.live(identity: identity))
            guard live < Self.maxDatasets else {
                throw SyncError(.limitExceeded, "an identity may have at most \(Self.maxDatasets) datasets")
            }
            if var revived = existing {
                // Deleted locally and opened again: it starts afresh; its remote deletion is
                // still pending (`deletePending`), so the next synchronize deletes the remote
                // copy first and then sends what the dataset holds by then.
                revived.deletedLocally = false
                revived.lastModified = Timestamp.now()
                try revived.save(txn)
                return
            }
            let now = Timestamp.now()
            try DatasetTables.DatasetRow(identity: identity, name: name, created: now, lastModified: now).save(txn)
        }
        return Dataset(manager: self, name: name)
    }

    /// The identity's local datasets (not deleted), by name.
    public func listDatasets() async throws -> [DatasetMetadata] {
        let identity = self.identity
        return try await store.read { txn in
            let rows = try DatasetTables.DatasetRow.all(txn, Query(DatasetTables.DatasetRow.live(identity: identity),
                                                                  order: [DatasetTables.DatasetRow.sorted(.name)]))
            return try rows.map { row in
                let records = try DatasetTables.records(txn, identity: identity, dataset: row.name)
                let live = records.filter { $0.value != nil }
                return DatasetMetadata(
                    name: row.name, creationDate: row.created, lastModifiedDate: row.lastModified,
                    storageSizeBytes: live.reduce(0) { $0 + $1.sizeInBytes }, recordCount: live.count,
                    lastSyncCount: row.lastSyncCount)
            }
        }
    }

    /// Removes every local dataset and record of this identity, synchronized or not. The
    /// remote copy is untouched.
    public func wipeData() async throws {
        let identity = self.identity
        try await store.write { txn in
            let tables = [(DatasetTables.RecordRow.table, DatasetTables.RecordRow.field(.identity)),
                          (DatasetTables.DatasetRow.table, DatasetTables.DatasetRow.field(.identity))]
            for (table, identityField) in tables {
                while true {
                    let rows = try txn.records(in: table, matching: Query(identityField == .string(identity), limit: 1000))
                    if rows.isEmpty { break }
                    for row in rows { _ = try txn.delete(id: row.id, in: table) }
                }
            }
        }
    }
}

/// What ``DatasetManager/listDatasets()`` reports of a dataset.
public struct DatasetMetadata: Sendable, Hashable {
    /// The dataset's name.
    public var name: String
    /// When it was created locally.
    public var creationDate: Timestamp
    /// When it last changed locally.
    public var lastModifiedDate: Timestamp
    /// Bytes of its keys and values (UTF-8).
    public var storageSizeBytes: Int
    /// How many keys hold a value.
    public var recordCount: Int
    /// The dataset's sync count when it was last synchronized (0: never).
    public var lastSyncCount: Int64
}

/// One key of a dataset, as stored locally.
public struct DatasetRecord: Sendable, Hashable {
    /// The key.
    public var key: String
    /// The value, or `nil` when the key was removed.
    public var value: String?
    /// The record's sync count on the remote when last synchronized (0: never synchronized).
    public var syncCount: Int64
    /// When the record last changed.
    public var lastModified: Timestamp
    /// Whether it changed locally since it was last synchronized.
    public var isModified: Bool

    /// Bytes the record counts toward its dataset's limit: key and value, UTF-8.
    public var sizeInBytes: Int { value.map { key.utf8.count + $0.utf8.count } ?? 0 }
}
