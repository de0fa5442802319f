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
            let row = try txn.record(in: Tables.datasets, id: Self.datasetId(scope: scope, name: name))
            let exists = row?["live"].boolValue == true
            var records: [RemoteDatasetRecord] = []
            var next: String?
            if exists {
                var predicate = Field("scope") == .string(scope) && Field("dataset") == .string(name)
                    && Field("syncCount") > .int(lastSyncCount)
                if let cursor = start {
                    predicate = predicate && (Field("syncCount") > .int(cursor.count)
                        || (Field("syncCount") == .int(cursor.count) && Field("key") > .string(cursor.key)))
                }
                let rows = try txn.records(in: Tables.records, matching: Query(
                    predicate, order: [SortKey("syncCount"), SortKey("key")], limit: limit + 1))
                records = rows.prefix(limit).map(Self.record)
                if rows.count > limit, let last = records.last {
                    next = Self.encodeToken(["r", String(last.syncCount), last.key])
                }
            }
            let merged = exists ? try txn.records(in: Tables.datasets, matching: Query(
                Field("scope") == .string(scope) && Field("live") == true && Field("mergedFrom") == .string(name),
                order: [SortKey("name")])).compactMap { $0["name"].stringValue } : []
            let deletedAt = row?["deletedAt"].intValue ?? 0
            return RemoteRecordsPage(
                records: records, nextToken: next, datasetSyncCount: row?["syncCount"].intValue ?? 0,
                lastModifiedBy: exists ? row?["lastModifiedBy"].stringValue : nil, mergedDatasetNames: merged,
                datasetExists: exists, datasetDeletedAfterRequestedSyncCount: lastSyncCount > 0 && deletedAt > lastSyncCount,
                syncSessionToken: token)
        }
    }

    private func openSession(pool: String, scope: String, dataset: String, now: Timestamp) async throws -> String {
        let token = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await store.write { txn in
            var poolRow = try Self.ensurePool(txn, pool: pool, now: now)
            poolRow.fields["sessions"] = .int((poolRow["sessions"].intValue ?? 0) + 1)
            try txn.upsert(poolRow, in: Tables.pools)
            try txn.upsert(Record(id: token, fields: ["scope": .string(scope), "dataset": .string(dataset), "created": .date(now)]),
                           in: Tables.sessions)
            // Expired sessions go a few at a time, so no request pays for a large sweep.
            let cutoff = Timestamp(millisecondsSince1970: now.millisecondsSince1970 - Self.sessionLifetime)
            for old in try txn.records(in: Tables.sessions, matching: Query(Field("created") < .date(cutoff), limit: 16)) {
                _ = try txn.delete(id: old.id, in: Tables.sessions)
            }
        }
        return token
    }

    private func checkSession(_ token: String, scope: String, dataset: String, now: Timestamp) async throws {
        let row = try await store.read { txn in try txn.record(in: Tables.sessions, id: token) }
        guard let row, row["scope"].stringValue == scope, row["dataset"].stringValue == dataset,
              let created = row["created"].dateValue,
              now.millisecondsSince1970 - created.millisecondsSince1970 <= Self.sessionLifetime else {
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
            var storage = dataset["storage"].intValue ?? 0
            var count = dataset["count"].intValue ?? 0
            let syncCount = (dataset["syncCount"].intValue ?? 0) + (patches.isEmpty ? 0 : 1)
            var written: [Record] = []
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
            for record in written { try txn.upsert(record, in: Tables.records) }
            dataset.fields["syncCount"] = .int(syncCount)
            dataset.fields["storage"] = .int(storage)
            dataset.fields["count"] = .int(count)
            if !patches.isEmpty {
                dataset.fields["lastModified"] = .date(now)
                dataset.fields["lastModifiedBy"] = .string(caller)
            }
            try txn.upsert(dataset, in: Tables.datasets)
            let streaming = poolRow["streamingStatus"].stringValue == "ENABLED" && poolRow["streamName"].stringValue != nil
            return (UpdateResult(records: written.map(Self.record), syncCount: syncCount), streaming)
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
                              name: String, caller: String, now: Timestamp) throws -> Record {
        let id = datasetId(scope: scope, name: name)
        let row = try txn.record(in: Tables.datasets, id: id)
        if let row, row["live"].boolValue == true { return row }
        let live = try txn.count(in: Tables.datasets, matching: Field("scope") == .string(scope) && Field("live") == true)
        guard live < DatasetManager.maxDatasets else {
            throw SyncError(.limitExceeded, "an identity may have at most \(DatasetManager.maxDatasets) datasets")
        }
        var fields: [String: Value] = [
            "pool": .string(pool), "scope": .string(scope), "identity": .string(identity), "name": .string(name),
            "syncCount": .int(row?["syncCount"].intValue ?? 0), "created": .date(now), "lastModified": .date(now),
            "lastModifiedBy": .string(caller), "live": true, "storage": 0, "count": 0,
        ]
        if let deletedAt = row?["deletedAt"].intValue { fields["deletedAt"] = .int(deletedAt) }
        return Record(id: id, fields: fields)
    }

    /// The record row `patch` leaves, with the change it makes to the dataset's bytes and
    /// record count. Throws ``SyncError/Code/conflict`` when the record's sync count is not
    /// the patch's.
    static func patched(_ txn: any LocalReadTransaction, _ patch: RecordPatch, scope: String, dataset: String,
                        syncCount: Int64, caller: String, now: Timestamp) throws -> (Record, bytes: Int64, records: Int64) {
        let recordId = recordId(scope: scope, dataset: dataset, key: patch.key)
        let current = try txn.record(in: Tables.records, id: recordId)
        guard (current?["syncCount"].intValue ?? 0) == patch.syncCount else {
            throw SyncError(.conflict, "a record changed on the server since sync count \(patch.syncCount); list the records again")
        }
        var bytes: Int64 = 0, records: Int64 = 0
        if let value = current?["value"].stringValue {
            bytes -= Int64(patch.key.utf8.count + value.utf8.count)
            records -= 1
        }
        var fields: [String: Value] = [
            "scope": .string(scope), "dataset": .string(dataset), "key": .string(patch.key), "syncCount": .int(syncCount),
            "lastModified": .date(now), "lastModifiedBy": .string(caller),
        ]
        if patch.op == .replace, let value = patch.value {
            fields["value"] = .string(value)
            bytes += Int64(patch.key.utf8.count + value.utf8.count)
            records += 1
        }
        if let device = patch.deviceLastModifiedDate { fields["deviceLastModified"] = .date(device) }
        return (Record(id: recordId, fields: fields), bytes, records)
    }
}
