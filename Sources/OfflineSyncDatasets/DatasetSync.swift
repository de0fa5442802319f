import Foundation
import OfflineSync
import Synchronization

/// What ``Dataset/synchronize(_:)`` asks the app, and what it reports.
///
/// Every callback has a default: conflicts go to the newer change (the remote one on a tie),
/// a remote deletion is accepted, merged datasets are left for the app to read later, and
/// success and failure are only returned or thrown.
public struct DatasetSyncCallbacks: Sendable {
    /// Resolves conflicts: keys changed both locally and remotely to different values. Return
    /// one resolution per conflict, or `nil` to stop the synchronize (nothing is lost: the
    /// local changes stay queued).
    public var onConflict: @Sendable (Dataset, [DatasetConflict]) async -> [DatasetConflict.Resolution]?
    /// The dataset was deleted remotely (`name` is its name). Return `true` to delete the
    /// local copy too (and take the remote one if it was created again since), `false` to
    /// keep the local data and send it to the remote as a new dataset.
    public var onDatasetDeleted: @Sendable (Dataset, String) async -> Bool
    /// Datasets of another identity merged into this one clash with this dataset's name;
    /// they are named `<name>.<other identity>`. Return `true` to go on synchronizing (fold
    /// them in and delete them when you like), `false` to stop this synchronize.
    public var onDatasetsMerged: @Sendable (Dataset, [String]) async -> Bool
    /// The synchronize finished; the records it changed locally from the remote.
    public var onSuccess: @Sendable (Dataset, [DatasetRecord]) async -> Void
    /// The synchronize failed; local changes stay queued for the next one.
    public var onFailure: @Sendable (Dataset, SyncError) async -> Void

    /// Creates callbacks; those not given keep their defaults.
    public init(
        onConflict: @escaping @Sendable (Dataset, [DatasetConflict]) async -> [DatasetConflict.Resolution]? = { _, conflicts in
            conflicts.map { $0.resolveWithNewer() }
        },
        onDatasetDeleted: @escaping @Sendable (Dataset, String) async -> Bool = { _, _ in true },
        onDatasetsMerged: @escaping @Sendable (Dataset, [String]) async -> Bool = { _, _ in true },
        onSuccess: @escaping @Sendable (Dataset, [DatasetRecord]) async -> Void = { _, _ in },
        onFailure: @escaping @Sendable (Dataset, SyncError) async -> Void = { _, _ in }
    ) {
        self.onConflict = onConflict
        self.onDatasetDeleted = onDatasetDeleted
        self.onDatasetsMerged = onDatasetsMerged
        self.onSuccess = onSuccess
        self.onFailure = onFailure
    }
}

/// A key changed locally and remotely to different values since the last synchronize.
public struct DatasetConflict: Sendable, Hashable {
    /// The key.
    public var key: String
    /// The local record (its value is `nil` when removed locally).
    public var local: DatasetRecord
    /// The remote record (its value is `nil` when removed remotely).
    public var remote: RemoteDatasetRecord

    /// How one conflict is settled.
    public struct Resolution: Sendable, Hashable {
        /// The key.
        public var key: String
        /// The value to keep (`nil` removes the key).
        public var value: String?
        /// Whether the value is the remote one (nothing to send back).
        public var isRemote: Bool
    }

    /// Keeps the local value (sent to the remote on this synchronize).
    public func resolveWithLocal() -> Resolution { Resolution(key: key, value: local.value, isRemote: false) }
    /// Takes the remote value.
    public func resolveWithRemote() -> Resolution { Resolution(key: key, value: remote.value, isRemote: true) }
    /// Keeps a new value (`nil` removes the key), sent to the remote on this synchronize.
    public func resolve(with value: String?) -> Resolution { Resolution(key: key, value: value, isRemote: false) }
    /// The newer of the two changes (the remote one on a tie): the local record's
    /// modification time against the remote's device time, or its server time.
    public func resolveWithNewer() -> Resolution {
        let remoteTime = remote.deviceLastModifiedDate ?? remote.lastModifiedDate
        return local.lastModified > remoteTime ? resolveWithLocal() : resolveWithRemote()
    }
}

/// Serializes the synchronizes of one dataset (a second waits for the first): one
/// ``SerialGate`` per dataset name (an identity has at most 20 datasets).
final class DatasetSyncGate: Sendable {
    private let gates = Mutex<[String: SerialGate]>([:])

    func run<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let gate = gates.withLock { gates in
            if let gate = gates[name] { return gate }
            let gate = SerialGate()
            gates[name] = gate
            return gate
        }
        return try await gate.run(body)
    }
}

extension Dataset {
    /// How many times a synchronize starts over after the remote reported a conflicting
    /// update (another device wrote in between) before it fails with ``SyncError/Code/conflict``.
    public static let maxSyncAttempts = 4

    /// Synchronizes the dataset with the manager's remote: sends a pending deletion, fetches
    /// the remote changes since ``lastSyncCount()``, settles conflicts through `callbacks`,
    /// applies the remote changes locally and sends the local ones, all or none. When
    /// another device writes in between, it starts over (up to ``maxSyncAttempts`` times).
    ///
    /// Returns (and reports to `onSuccess`) the records the remote changed locally; throws
    /// (and reports to `onFailure`) a ``SyncError`` otherwise, keeping every local change.
    /// Synchronizes of one dataset run one at a time.
    @discardableResult
    public func synchronize(_ callbacks: DatasetSyncCallbacks = DatasetSyncCallbacks()) async throws -> [DatasetRecord] {
        try await synchronize(callbacks, ifBehind: nil) ?? []
    }

    /// Synchronizes; with `ifBehind`, only when the local sync count is still below it once
    /// this synchronize's turn has come (`nil` is returned otherwise, and no callback runs).
    func synchronize(_ callbacks: DatasetSyncCallbacks, ifBehind count: Int64?) async throws -> [DatasetRecord]? {
        do {
            let remote = try manager.requireRemote()
            let updated = try await manager.gate.run(name) { () async throws -> [DatasetRecord]? in
                if let count, try await self.lastSyncCount() >= count { return nil }
                return try await self.synchronizeAttempts(remote, callbacks)
            }
            if let updated { await callbacks.onSuccess(self, updated) }
            return updated
        } catch let error as SyncError {
            await callbacks.onFailure(self, error)
            throw error
        } catch is CancellationError {
            let error = SyncError(.cancelled, "the synchronize was cancelled")
            await callbacks.onFailure(self, error)
            throw error
        }
    }

    struct LocalState: Sendable {
        var exists: Bool
        var lastSyncCount: Int64
        var deletePending: Bool
        var deletedLocally: Bool
    }

    func localState() async throws -> LocalState {
        let id = DatasetTables.datasetId(identity: manager.identity, name: name)
        return try await manager.store.read { txn in
            guard let row = try DatasetTables.DatasetRow.find(txn, id: id) else {
                return LocalState(exists: false, lastSyncCount: 0, deletePending: false, deletedLocally: false)
            }
            return LocalState(exists: true, lastSyncCount: row.lastSyncCount, deletePending: row.deletePending,
                              deletedLocally: row.deletedLocally)
        }
    }

    private func synchronizeAttempts(_ remote: any DatasetRemote, _ callbacks: DatasetSyncCallbacks) async throws -> [DatasetRecord] {
        var updated: [String: DatasetRecord] = [:]
        for _ in 0..<Self.maxSyncAttempts {
            try Task.checkCancellation()
            switch try await attempt(remote, callbacks, updated: &updated) {
            case .done: return updated.values.sorted { $0.key < $1.key }
            case .again: continue
            }
        }
        throw SyncError(.conflict, "dataset '\(name)' kept changing remotely during \(Self.maxSyncAttempts) synchronize attempts")
    }

    /// Prepares the local records to be sent to a remote dataset that starts afresh: removed
    /// keys are forgotten, every other key is a change based on sync count 0.
    static func rebase(_ txn: any LocalWriteTransaction, identity: String, dataset: String) throws {
        for var record in try DatasetTables.records(txn, identity: identity, dataset: dataset) {
            if record.value == nil {
                try DatasetTables.removeRecord(txn, identity: identity, dataset: dataset, key: record.key)
            } else {
                record.syncCount = 0
                record.isModified = true
                try DatasetTables.store(record, identity: identity, dataset: dataset, txn: txn)
            }
        }
    }
}

extension DatasetManager {
    /// Takes in the local datasets of `previous`, the identity this device used before (an
    /// unauthenticated one, typically, before the user signed in), as Cognito does when
    /// identities merge. Each dataset moves to this identity with every record, queued to be
    /// sent as new (sync count 0), so nothing is lost. A dataset whose name this identity
    /// already uses keeps its records under `<name>.<previous>` (characters a dataset name
    /// cannot hold become `_`; at most 128 characters), and the next ``Dataset/synchronize(_:)``
    /// of `<name>` reports it to `onDatasetsMerged`, for the app to fold in and delete.
    /// Datasets of `previous` deleted locally are dropped. Returns the moved datasets' new names.
    @discardableResult
    public func mergeDatasets(from previous: String) async throws -> [String] {
        guard !ExactString.sameBytes(previous, identity) else { throw SyncError(.invalidValue, "an identity cannot be merged into itself") }
        let identity = self.identity
        let suffix = "." + String(previous.map { character -> Character in
            character.isASCII && (character.isLetter || character.isNumber || "_.:-".contains(character)) ? character : "_"
        })
        return try await store.write { txn in
            var moved: [String] = []
            let rows = try DatasetTables.DatasetRow.all(txn, Query(DatasetTables.DatasetRow.field(.identity) == .string(previous), order: [DatasetTables.DatasetRow.sorted(.name)]))
            for row in rows {
                let name = row.name
                let records = try DatasetTables.records(txn, identity: previous, dataset: name)
                try DatasetTables.removeRecords(txn, identity: previous, dataset: name)
                try DatasetTables.DatasetRow.delete(txn, id: row.id)
                if row.deletedLocally { continue }
                var newName = name
                var mergedFrom: String?
                let clash = try DatasetTables.DatasetRow.find(txn, id: DatasetTables.datasetId(identity: identity, name: name))
                if let clash, !clash.deletedLocally {
                    newName = String((String(name.prefix(max(1, 128 - suffix.count))) + suffix).suffix(128))
                    mergedFrom = name
                    if try DatasetTables.DatasetRow.find(txn, id: DatasetTables.datasetId(identity: identity, name: newName)) != nil {
                        throw SyncError(.duplicateId, "dataset '\(newName)' already exists; delete it before merging again")
                    }
                }
                var taken = row
                taken.id = DatasetTables.datasetId(identity: identity, name: newName)
                taken.identity = identity
                taken.name = newName
                taken.lastSyncCount = 0
                taken.mergedFrom = mergedFrom
                taken.lastModified = Timestamp.now()
                // A deletion of the target's dataset of that name still has to reach the remote.
                taken.deletePending = try DatasetTables.DatasetRow.find(txn, id: taken.id)?.deletePending == true
                try taken.save(txn)
                for var record in records where record.value != nil {
                    record.syncCount = 0
                    record.isModified = true
                    try DatasetTables.store(record, identity: identity, dataset: newName, txn: txn)
                }
                moved.append(newName)
            }
            return moved
        }
    }

    /// Brings the list of datasets up to date with the remote: a dataset that exists only
    /// remotely is added locally (empty, with sync count 0, so its next synchronize fetches
    /// it whole). Returns the remote datasets.
    @discardableResult
    public func refreshDatasetMetadata() async throws -> [RemoteDataset] {
        let remote = try requireRemote()
        var all: [RemoteDataset] = []
        var token: String?
        repeat {
            let page = try await remote.listDatasets(nextToken: token, maxResults: nil)
            all += page.datasets
            token = page.nextToken
        } while token != nil
        let identity = self.identity, found = all
        try await store.write { txn in
            let now = Timestamp.now()
            for dataset in found {
                let row = DatasetTables.DatasetRow(identity: identity, name: dataset.name, created: dataset.creationDate,
                                                   lastModified: now)
                if try DatasetTables.DatasetRow.find(txn, id: row.id) != nil { continue }
                try row.save(txn)
            }
        }
        return all
    }

    /// Registers this device for push sync with the remote and remembers its id, which
    /// later updates report.
    @discardableResult
    public func registerDevice(platform: PushPlatform, token: String) async throws -> String {
        let id = try await requireRemote().registerDevice(platform: platform, token: token)
        deviceIdBox.withLock { $0 = id }
        return id
    }

    /// Subscribes the registered device to `dataset`'s remote changes.
    public func subscribe(_ dataset: String) async throws {
        try await requireRemote().subscribe(dataset: dataset, deviceId: try requireDevice())
    }

    /// Ends the registered device's subscription to `dataset`.
    public func unsubscribe(_ dataset: String) async throws {
        try await requireRemote().unsubscribe(dataset: dataset, deviceId: try requireDevice())
    }

    /// Subscribes the registered device to every local dataset.
    public func subscribeAll() async throws {
        for dataset in try await listDatasets() { try await subscribe(dataset.name) }
    }

    private func requireDevice() throws -> String {
        guard let id = deviceId else { throw SyncError(.invalidConfiguration, "register the device before subscribing") }
        return id
    }
}

extension DatasetManager {
    /// Acts on a push-sync notification: synchronizes the named dataset when the
    /// notification is for this identity, the dataset exists locally and the notified sync
    /// count is beyond the dataset's ``Dataset/lastSyncCount()``, and does nothing otherwise
    /// (an echo of this device's own update, or an old notification). Returns whether it
    /// synchronized. A failed synchronize is reported to `callbacks.onFailure` and returns `false`.
    @discardableResult
    public func handle(_ notification: DatasetNotification,
                       callbacks: DatasetSyncCallbacks = DatasetSyncCallbacks()) async -> Bool {
        guard ExactString.sameBytes(notification.identityId, identity), (try? DatasetManager.validateName(notification.datasetName)) != nil else {
            return false
        }
        let identity = self.identity, name = notification.datasetName
        let id = DatasetTables.datasetId(identity: identity, name: name)
        guard let row = try? await store.read({ txn in try DatasetTables.DatasetRow.find(txn, id: id) }), !row.deletedLocally,
              notification.syncCount > row.lastSyncCount else { return false }
        // Checked again once it is this dataset's turn: a synchronize in flight (the one
        // whose update caused this very notice, say) may already have brought the count up.
        do {
            return try await Dataset(manager: self, name: name).synchronize(callbacks, ifBehind: notification.syncCount) != nil
        } catch {
            return false
        }
    }

    /// Push sync: handles every notification of `notifications` (see ``handle(_:callbacks:)``)
    /// until the sequence ends or the returned task is cancelled.
    public func startPushSync<Notifications: AsyncSequence & Sendable>(
        _ notifications: Notifications, callbacks: DatasetSyncCallbacks = DatasetSyncCallbacks()
    ) -> Task<Void, Never> where Notifications.Element == DatasetNotification {
        Task {
            do {
                for try await notification in notifications {
                    if Task.isCancelled { break }
                    await handle(notification, callbacks: callbacks)
                }
            } catch {}
        }
    }
}

extension Dataset {
    /// Synchronizes once the network is up: at once when the manager's
    /// ``DatasetManager/network`` reports it up (or there is no monitor), otherwise when it
    /// comes back. Only the latest request per dataset is kept: an earlier one still waiting
    /// is dropped, and its callbacks never run; the latest's run once.
    public func synchronizeOnConnectivity(_ callbacks: DatasetSyncCallbacks = DatasetSyncCallbacks()) {
        manager.scheduleOnConnectivity(name, callbacks)
    }
}

extension DatasetManager {
    func scheduleOnConnectivity(_ name: String, _ callbacks: DatasetSyncCallbacks) {
        let startWaiting = waitingForNetwork.withLock { waiting -> Bool in
            defer { waiting[name] = callbacks }
            return waiting[name] == nil
        }
        guard startWaiting else { return }   // the waiting task will take the latest request
        let network = self.network
        Task {
            if let network { try? await network.waitUntilOnline() }
            guard let latest = waitingForNetwork.withLock({ $0.removeValue(forKey: name) }) else { return }
            _ = try? await Dataset(manager: self, name: name).synchronize(latest)
        }
    }
}
