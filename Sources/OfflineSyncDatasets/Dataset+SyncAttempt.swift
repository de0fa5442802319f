import OfflineSync

/// One synchronize attempt, step by step. An attempt either finishes (``Step/done``) or finds
/// that the remote or the app moved on meanwhile (``Step/again``), and the caller runs another.
extension Dataset {
    enum Step { case done, again }

    /// The remote's changes since the last synchronize: the first page's answer (dataset
    /// state, session) and every record of every page.
    struct RemoteChanges {
        var head: RemoteRecordsPage
        var incoming: [RemoteDatasetRecord]
    }

    /// What step 5 settled: the local records as read, the newest remote change per key and
    /// the app's answer per conflicting key.
    struct Settlement: Sendable {
        var snapshot: [String: DatasetRecord]
        var latest: [String: RemoteDatasetRecord]
        var resolutions: [String: DatasetConflict.Resolution]
    }

    var datasetRowId: String { DatasetTables.datasetId(identity: manager.identity, name: name) }

    func attempt(_ remote: any DatasetRemote, _ callbacks: DatasetSyncCallbacks,
                 updated: inout [String: DatasetRecord]) async throws -> Step {
        var state = try await localState()
        guard state.exists else { return .done }
        // 1. A deletion made locally goes first.
        if state.deletePending {
            if try await sendPendingDeletion(remote, deletedLocally: state.deletedLocally) { return .done }
            state = try await localState()
        }
        // 2. The remote changes since the last synchronize, every page.
        let changes = try await fetchRemoteChanges(remote, since: state.lastSyncCount)
        // 3. Deleted remotely (and perhaps created again since).
        if (!changes.head.datasetExists && state.lastSyncCount != 0) || changes.head.datasetDeletedAfterRequestedSyncCount {
            return try await settleRemoteDeletion(datasetExists: changes.head.datasetExists, callbacks)
        }
        // 4. Datasets merged in from another identity, on the remote or on this device.
        try await reportMerges(remoteNames: changes.head.mergedDatasetNames, callbacks)
        // 5. Conflicts: keys changed on both sides to different values.
        let settlement = try await settleConflicts(changes.incoming, callbacks)
        // 6. Apply the remote side locally, in one transaction.
        guard let changed = try await applyRemote(settlement, datasetSyncCount: changes.head.datasetSyncCount) else {
            return .again
        }
        for record in changed { updated[record.key] = record }
        // 7. Send the local changes, based on the remote sync counts just taken in.
        return try await sendLocalChanges(remote, session: changes.head.syncSessionToken,
                                          datasetSyncCount: changes.head.datasetSyncCount)
    }

    /// Step 1: deletes the dataset remotely, then locally: the row goes when the app deleted
    /// the dataset for good (returns `true`: nothing more to do), otherwise its records are
    /// rebased to be sent again as a new dataset.
    func sendPendingDeletion(_ remote: any DatasetRemote, deletedLocally gone: Bool) async throws -> Bool {
        _ = try await remote.deleteDataset(name)
        let identity = manager.identity, name = self.name, datasetId = datasetRowId
        try await manager.store.write { txn in
            guard var row = try DatasetTables.DatasetRow.find(txn, id: datasetId) else { return }
            if gone {
                try DatasetTables.DatasetRow.delete(txn, id: datasetId)
            } else {
                row.deletePending = false
                row.lastSyncCount = 0
                try row.save(txn)
                try Self.rebase(txn, identity: identity, dataset: name)
            }
        }
        return gone
    }

    /// Step 2: every page of the remote's changes after `lastSyncCount`, in one session.
    func fetchRemoteChanges(_ remote: any DatasetRemote, since lastSyncCount: Int64) async throws -> RemoteChanges {
        var page = try await remote.listRecords(dataset: name, lastSyncCount: lastSyncCount, nextToken: nil,
                                                maxResults: nil, syncSessionToken: nil)
        let head = page
        var incoming = page.records
        while let next = page.nextToken {
            page = try await remote.listRecords(dataset: name, lastSyncCount: lastSyncCount, nextToken: next,
                                                maxResults: nil, syncSessionToken: head.syncSessionToken)
            incoming += page.records
        }
        return RemoteChanges(head: head, incoming: incoming)
    }

    /// Step 3: asks the app about a remote deletion. Taking it drops the local records (and
    /// the row, unless the dataset exists again remotely); refusing it keeps the local data
    /// to be sent as a new dataset.
    func settleRemoteDeletion(datasetExists exists: Bool, _ callbacks: DatasetSyncCallbacks) async throws -> Step {
        let identity = manager.identity, name = self.name, datasetId = datasetRowId
        if await callbacks.onDatasetDeleted(self, name) {
            try await manager.store.write { txn in
                try DatasetTables.removeRecords(txn, identity: identity, dataset: name)
                if exists, var row = try DatasetTables.DatasetRow.find(txn, id: datasetId) {
                    row.lastSyncCount = 0
                    try row.save(txn)
                } else {
                    try DatasetTables.DatasetRow.delete(txn, id: datasetId)
                }
            }
            return exists ? .again : .done
        }
        try await manager.store.write { txn in
            guard var row = try DatasetTables.DatasetRow.find(txn, id: datasetId) else { return }
            row.lastSyncCount = 0
            try row.save(txn)
            try Self.rebase(txn, identity: identity, dataset: name)
        }
        return .again
    }

    /// Step 4: reports the datasets merged into this one, remotely or on this device; a
    /// callback that answers `false` stops the synchronize.
    func reportMerges(remoteNames: [String], _ callbacks: DatasetSyncCallbacks) async throws {
        let identity = manager.identity, name = self.name
        let mergedHere = try await manager.store.read { txn in
            try DatasetTables.DatasetRow.all(txn, Query(
                DatasetTables.DatasetRow.live(identity: identity) && DatasetTables.DatasetRow.field(.mergedFrom) == .string(name)))
                .map(\.name)
        }
        let merged = Array(Set(remoteNames).union(mergedHere)).sorted()
        if !merged.isEmpty, !(await callbacks.onDatasetsMerged(self, merged)) {
            throw SyncError(.cancelled, "the datasets-merged callback stopped the synchronize of '\(name)'")
        }
    }

    /// Step 5: the keys changed on both sides to different values go to the app, which must
    /// answer each exactly once with a valid value.
    func settleConflicts(_ incoming: [RemoteDatasetRecord], _ callbacks: DatasetSyncCallbacks) async throws -> Settlement {
        let identity = manager.identity, name = self.name
        let snapshot = try await manager.store.read { txn in
            Dictionary(uniqueKeysWithValues: try DatasetTables.records(txn, identity: identity, dataset: name).map { ($0.key, $0) })
        }
        var latest: [String: RemoteDatasetRecord] = [:]
        for record in incoming { latest[record.key] = record }   // a key paged twice: its newest change
        var conflicts: [DatasetConflict] = []
        for record in latest.values.sorted(by: { $0.key < $1.key }) {
            if let local = snapshot[record.key], local.isModified, local.value != record.value {
                conflicts.append(DatasetConflict(key: record.key, local: local, remote: record))
            }
        }
        var resolutions: [String: DatasetConflict.Resolution] = [:]
        if !conflicts.isEmpty {
            guard let answers = await callbacks.onConflict(self, conflicts) else {
                throw SyncError(.cancelled, "the conflict callback stopped the synchronize of '\(name)'")
            }
            for answer in answers { resolutions[answer.key] = answer }
            guard conflicts.allSatisfy({ resolutions[$0.key] != nil }), resolutions.count == conflicts.count else {
                throw SyncError(.invalidValue, "the conflict callback must return exactly one resolution per conflict")
            }
            for resolution in resolutions.values { if let value = resolution.value { try DatasetManager.validateValue(value) } }
        }
        return Settlement(snapshot: snapshot, latest: latest, resolutions: resolutions)
    }

    /// Step 6: applies the remote side in one transaction and returns the records whose value
    /// changed, or `nil` when the app changed a key since the snapshot: then nothing is written
    /// (every key is checked before anything is) and the attempt starts over.
    func applyRemote(_ settlement: Settlement, datasetSyncCount: Int64) async throws -> [DatasetRecord]? {
        let identity = manager.identity, name = self.name, datasetId = datasetRowId
        return try await manager.store.write { txn -> [DatasetRecord]? in
            var currents: [String: DatasetRecord] = [:]
            for key in settlement.latest.keys {
                let current = try DatasetTables.record(txn, identity: identity, dataset: name, key: key)
                if current != settlement.snapshot[key] { return nil }
                currents[key] = current
            }
            var changed: [DatasetRecord] = []
            var size = try DatasetTables.records(txn, identity: identity, dataset: name).reduce(0) { $0 + $1.sizeInBytes }
            for remoteRecord in settlement.latest.values {
                let current = currents[remoteRecord.key]
                let before = current ?? DatasetRecord(key: remoteRecord.key, value: nil, syncCount: 0,
                                                      lastModified: remoteRecord.lastModifiedDate, isModified: false)
                let record = Self.merged(before, current: current, remote: remoteRecord,
                                         resolution: settlement.resolutions[remoteRecord.key])
                size += record.sizeInBytes - before.sizeInBytes
                if record != before {
                    try DatasetTables.store(record, identity: identity, dataset: name, txn: txn)
                    if record.value != before.value { changed.append(record) }
                }
            }
            guard size <= DatasetManager.maxDatasetBytes else {
                throw SyncError(.limitExceeded, "the resolved dataset would hold more than \(DatasetManager.maxDatasetBytes) bytes")
            }
            if var row = try DatasetTables.DatasetRow.find(txn, id: datasetId) {
                row.lastSyncCount = datasetSyncCount
                try row.save(txn)
            }
            return changed
        }
    }

    /// A local record after taking in a remote change: the app's resolution when there was a
    /// conflict, the remote value when the key is not modified locally (or holds the same
    /// value), the local value otherwise; always at the remote's sync count.
    static func merged(_ record: DatasetRecord, current: DatasetRecord?, remote: RemoteDatasetRecord,
                       resolution: DatasetConflict.Resolution?) -> DatasetRecord {
        var record = record
        if let resolution {
            record.value = resolution.value
            record.isModified = !resolution.isRemote
            if record.isModified { record.lastModified = Timestamp.now() }
        } else if !(current?.isModified ?? false) || current?.value == remote.value {
            record.value = remote.value
            record.isModified = false
            record.lastModified = remote.lastModifiedDate
        }
        record.syncCount = remote.syncCount
        return record
    }

    /// Step 7: sends the modified keys in one update. A conflict (another device wrote one of
    /// them) means fetch and settle again; a key the app changed while the update was in
    /// flight stays queued.
    func sendLocalChanges(_ remote: any DatasetRemote, session: String, datasetSyncCount: Int64) async throws -> Step {
        let identity = manager.identity, name = self.name, datasetId = datasetRowId
        let pending = try await manager.store.read { txn in
            try DatasetTables.records(txn, identity: identity, dataset: name).filter(\.isModified)
        }
        if pending.isEmpty { return .done }
        let patches = pending.map {
            RecordPatch(op: $0.value == nil ? .remove : .replace, key: $0.key, value: $0.value, syncCount: $0.syncCount,
                        deviceLastModifiedDate: $0.lastModified)
        }
        let stored: [RemoteDatasetRecord]
        do {
            stored = try await remote.updateRecords(dataset: name, patches: patches, syncSessionToken: session,
                                                    deviceId: manager.deviceId)
        } catch let error as SyncError where error.code == .conflict {
            return .again
        }
        let sent = Dictionary(uniqueKeysWithValues: pending.map { ($0.key, $0) })
        try await manager.store.write { txn in
            var newest: Int64 = 0
            for result in stored {
                newest = max(newest, result.syncCount)
                guard var record = try DatasetTables.record(txn, identity: identity, dataset: name, key: result.key) else { continue }
                record.syncCount = result.syncCount
                if let before = sent[result.key], record.value == before.value, record.lastModified == before.lastModified {
                    record.isModified = false
                }
                try DatasetTables.store(record, identity: identity, dataset: name, txn: txn)
            }
            // Only when this update came right after what was fetched is nothing missed by
            // moving the sync count past it; otherwise the next synchronize fetches the
            // changes in between (our own among them, harmlessly).
            if newest == datasetSyncCount + 1, var row = try DatasetTables.DatasetRow.find(txn, id: datasetId) {
                row.lastSyncCount = newest
                try row.save(txn)
            }
        }
        return .done
    }
}
