import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    /// The records of `dataset` changed after `lastSyncCount`, one page at a time. The first
    /// page (no `nextToken`) opens a sync session and returns its token; later pages return
    /// the token they were given.
    public func listRecords(pool: String, identity: String, dataset name: String, lastSyncCount: Int64, nextToken: String?,
                            maxResults: Int?, syncSessionToken: String?) async throws -> RemoteRecordsPage {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        try Self.validateDatasetName(name)
        guard lastSyncCount >= 0 else { throw SyncError(.invalidValue, "lastSyncCount must not be negative") }
        let limit = try Self.pageSize(maxResults)
        var cursor: (count: Int64, key: String)?
        if let nextToken {
            let parts = try Self.decodeToken(nextToken, parts: 3)
            guard parts[0] == "r", let count = Int64(parts[1]) else {
                throw SyncError(.invalidValue, "nextToken is not one this service issued")
            }
            cursor = (count, parts[2])
        }
        let scope = Self.scope(pool: pool, identity: identity)
        let now = Timestamp.now()
        var session = syncSessionToken
        if let given = syncSessionToken, cursor != nil {
            try await checkSession(given, scope: scope, dataset: name, now: now)
        } else {
            session = try await openSession(pool: pool, scope: scope, dataset: name, now: now)
        }
        let token = session ?? "", start = cursor
        return try await store.read { txn in
            let row = try DatasetRow.find(txn, id: Self.datasetId(scope: scope, name: name))
            let exists = row?.live == true
            var records: [RemoteDatasetRecord] = []
            var next: String?
            if exists {
                let syncCount = RecordRow.field(.syncCount)
                var predicate = RecordRow.of(scope: scope, dataset: name) && syncCount > .int(lastSyncCount)
                if let cursor = start {
                    predicate = predicate && (syncCount > .int(cursor.count)
                        || (syncCount == .int(cursor.count) && RecordRow.field(.key) > .string(cursor.key)))
                }
                let rows = try RecordRow.all(txn, Query(
                    predicate, order: [RecordRow.sorted(.syncCount), RecordRow.sorted(.key)], limit: limit + 1))
                records = rows.prefix(limit).map(\.remote)
                if rows.count > limit, let last = records.last {
                    next = Self.encodeToken(["r", String(last.syncCount), last.key])
                }
            }
            let merged = exists ? try DatasetRow.all(txn, Query(
                DatasetRow.live(scope: scope) && DatasetRow.field(.mergedFrom) == .string(name),
                order: [DatasetRow.sorted(.name)])).map(\.name) : []
            let deletedAt = row?.deletedAt ?? 0
            return RemoteRecordsPage(
                records: records, nextToken: next, datasetSyncCount: row?.syncCount ?? 0,
                lastModifiedBy: exists ? row?.lastModifiedBy : nil, mergedDatasetNames: merged,
                datasetExists: exists, datasetDeletedAfterRequestedSyncCount: lastSyncCount > 0 && deletedAt > lastSyncCount,
                syncSessionToken: token)
        }
    }

    private func openSession(pool: String, scope: String, dataset: String, now: Timestamp) async throws -> String {
        let token = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await store.write { txn in
            var poolRow = try Self.ensurePool(txn, pool: pool, now: now)
            poolRow.sessions += 1
            try poolRow.save(txn)
            try SessionRow(id: token, scope: scope, dataset: dataset, created: now).save(txn)
            // Expired sessions go a few at a time, so no request pays for a large sweep.
            let cutoff = Timestamp(millisecondsSince1970: now.millisecondsSince1970 - Self.sessionLifetimeMilliseconds)
            for old in try txn.records(in: SessionRow.table, matching: Query(SessionRow.field(.created) < .date(cutoff), limit: 16)) {
                try SessionRow.delete(txn, id: old.id)
            }
        }
        return token
    }

    private func checkSession(_ token: String, scope: String, dataset: String, now: Timestamp) async throws {
        let row = try await store.read { txn in try SessionRow.find(txn, id: token) }
        guard let row, row.scope == scope, row.dataset == dataset,
              now.millisecondsSince1970 - row.created.millisecondsSince1970 <= Self.sessionLifetimeMilliseconds else {
            throw SyncError(.invalidValue, "the sync session token is unknown, expired or for another dataset; list the records again")
        }
    }

    /// What an accepted update did.
    public struct UpdateResult: Sendable, Hashable {
        /// The records as now stored.
        public var records: [RemoteDatasetRecord]
        /// The dataset's sync count after the update (unchanged for an update with no patches).
        public var syncCount: Int64
    }

    /// Applies `patches` to `dataset`, all or none (see the type's documentation), creating
    /// the dataset when needed. `caller` is recorded as `lastModifiedBy`.
    public func updateRecords(pool: String, identity: String, dataset name: String, patches: [RecordPatch],
                              syncSessionToken: String, deviceId: String?, caller: String) async throws -> UpdateResult {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        try Self.validateDatasetName(name)
        try Self.validatePatches(patches)
        let scope = Self.scope(pool: pool, identity: identity)
        let now = Timestamp.now()
        try await checkSession(syncSessionToken, scope: scope, dataset: name, now: now)
        let result = try await store.write { txn -> (UpdateResult, Bool) in
            let poolRow = try Self.ensurePool(txn, pool: pool, now: now)
            var dataset = try Self.openForUpdate(txn, pool: pool, identity: identity, scope: scope, name: name,
                                                 caller: caller, now: now)
            var storage = dataset.storage
            var count = dataset.count
            let syncCount = dataset.syncCount + (patches.isEmpty ? 0 : 1)
            var written: [RecordRow] = []
            for patch in patches {
                let (record, bytes, records) = try Self.patched(txn, patch, scope: scope, dataset: name, syncCount: syncCount,
                                                                caller: caller, now: now)
                storage += bytes
                count += records
                written.append(record)
            }
            guard storage <= Int64(DatasetManager.maxDatasetBytes) else {
                throw SyncError(.limitExceeded, "a dataset may hold at most \(DatasetManager.maxDatasetBytes) bytes of keys and values")
            }
            for record in written { try record.save(txn) }
            dataset.syncCount = syncCount
            dataset.storage = storage
            dataset.count = count
            if !patches.isEmpty {
                dataset.lastModified = now
                dataset.lastModifiedBy = caller
            }
            try dataset.save(txn)
            return (UpdateResult(records: written.map(\.remote), syncCount: syncCount), poolRow.isStreaming)
        }
        if result.1, !result.0.records.isEmpty {
            await stream(pool: pool, records: result.0.records.map {
                DatasetStreamRecord(identityPoolId: pool, identityId: identity, datasetName: name, record: $0)
            })
        }
        return result.0
    }

    /// Checks an update's patches before anything is read: valid keys and values, each key
    /// once, no negative sync count, a value on every replace.
    static func validatePatches(_ patches: [RecordPatch]) throws {
        var keys = Set<String>()
        for patch in patches {
            try DatasetManager.validateKey(patch.key)
            guard keys.insert(patch.key).inserted else { throw SyncError(.invalidValue, "a key appears twice in one update") }
            guard patch.syncCount >= 0 else { throw SyncError(.invalidValue, "a patch's SyncCount must not be negative") }
            switch patch.op {
            case .replace:
                guard let value = patch.value else { throw SyncError(.invalidValue, "a replace patch needs a Value") }
                try DatasetManager.validateValue(value)
            case .remove: break
            }
        }
    }

    /// The dataset's row, live: a dataset that does not exist (or was deleted) is created
    /// again, keeping its sync count and deletion mark, unless the identity already has the
    /// most live datasets allowed (``SyncError/Code/limitExceeded``).
    static func openForUpdate(_ txn: any LocalWriteTransaction, pool: String, identity: String, scope: String,
                              name: String, caller: String, now: Timestamp) throws -> DatasetRow {
        let id = datasetId(scope: scope, name: name)
        let row = try DatasetRow.find(txn, id: id)
        if let row, row.live { return row }
        let live = try DatasetRow.count(txn, DatasetRow.live(scope: scope))
        guard live < DatasetManager.maxDatasets else {
            throw SyncError(.limitExceeded, "an identity may have at most \(DatasetManager.maxDatasets) datasets")
        }
        return DatasetRow(id: id, pool: pool, scope: scope, identity: identity, name: name, syncCount: row?.syncCount ?? 0,
                          created: now, lastModified: now, lastModifiedBy: caller, live: true, deletedAt: row?.deletedAt,
                          storage: 0, count: 0, mergedFrom: nil)
    }

    /// The record row `patch` leaves, with the change it makes to the dataset's bytes and
    /// record count. Throws ``SyncError/Code/conflict`` when the record's sync count is not
    /// the patch's.
    static func patched(_ txn: any LocalReadTransaction, _ patch: RecordPatch, scope: String, dataset: String,
                        syncCount: Int64, caller: String, now: Timestamp) throws -> (RecordRow, bytes: Int64, records: Int64) {
        let recordId = recordId(scope: scope, dataset: dataset, key: patch.key)
        let current = try RecordRow.find(txn, id: recordId)
        guard (current?.syncCount ?? 0) == patch.syncCount else {
            throw SyncError(.conflict, "a record changed on the server since sync count \(patch.syncCount); list the records again")
        }
        var bytes: Int64 = 0, records: Int64 = 0
        if let value = current?.value {
            bytes -= Int64(patch.key.utf8.count + value.utf8.count)
            records -= 1
        }
        var row = RecordRow(id: recordId, scope: scope, dataset: dataset, key: patch.key, value: nil, syncCount: syncCount,
                            lastModified: now, lastModifiedBy: caller, deviceLastModified: patch.deviceLastModifiedDate)
        if patch.op == .replace, let value = patch.value {
            row.value = value
            bytes += Int64(patch.key.utf8.count + value.utf8.count)
            records += 1
        }
        return (row, bytes, records)
    }
}
