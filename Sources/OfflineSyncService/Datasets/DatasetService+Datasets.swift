import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    /// The identity's datasets, by name, one page at a time.
    public func listDatasets(pool: String, identity: String, nextToken: String?, maxResults: Int?) async throws -> RemoteDatasetList {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        let limit = try Self.pageSize(maxResults)
        let after = try nextToken.map { try Self.decodeToken($0, parts: 2) }
        let scope = Self.scope(pool: pool, identity: identity)
        if let after, after[0] != "d" { throw SyncError(.invalidValue, "nextToken is not one this service issued") }
        return try await store.read { txn in
            var predicate = DatasetRow.live(scope: scope)
            if let after { predicate = predicate && DatasetRow.field(.name) > .string(after[1]) }
            let rows = try DatasetRow.all(txn, Query(predicate, order: [DatasetRow.sorted(.name)], limit: limit + 1))
            let page = rows.prefix(limit).map(\.remote)
            let next = rows.count > limit ? page.last.map { Self.encodeToken(["d", $0.name]) } : nil
            return RemoteDatasetList(datasets: Array(page), nextToken: next)
        }
    }

    /// The dataset, or ``SyncError/Code/notFound``.
    public func describeDataset(pool: String, identity: String, name: String) async throws -> RemoteDataset {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        try Self.validateDatasetName(name)
        let scope = Self.scope(pool: pool, identity: identity)
        guard let row = try await store.read({ txn in try Self.liveDataset(txn, scope: scope, name: name) }) else {
            throw SyncError(.notFound, "dataset '\(name)' does not exist")
        }
        return row.remote
    }

    /// Deletes the dataset (its records go; its row stays, remembering the deletion).
    /// Returns it as it was, or throws ``SyncError/Code/notFound``.
    public func deleteDataset(pool: String, identity: String, name: String, caller: String) async throws -> RemoteDataset {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        try Self.validateDatasetName(name)
        let scope = Self.scope(pool: pool, identity: identity)
        let now = Timestamp.now()
        return try await store.write { txn in
            guard var row = try Self.liveDataset(txn, scope: scope, name: name) else {
                throw SyncError(.notFound, "dataset '\(name)' does not exist")
            }
            let before = row.remote
            while true {
                let records = try txn.records(in: RecordRow.table, matching: Query(RecordRow.of(scope: scope, dataset: name), limit: 1000))
                if records.isEmpty { break }
                for record in records { try RecordRow.delete(txn, id: record.id) }
            }
            Self.markDeleted(&row, now: now, caller: caller)
            try row.save(txn)
            return before
        }
    }

    /// Turns a dataset row into the memory of a deletion: its sync count moves on by one and
    /// is remembered as the deletion's, so clients that synchronized before are told.
    static func markDeleted(_ row: inout DatasetRow, now: Timestamp, caller: String) {
        row.syncCount += 1
        row.deletedAt = row.syncCount
        row.live = false
        row.storage = 0
        row.count = 0
        row.lastModified = now
        row.lastModifiedBy = caller
        row.mergedFrom = nil
    }

    /// Moves every dataset of identity `from` into identity `into`, as Cognito does when two
    /// identities are merged. A dataset whose name `into` already uses is kept as
    /// `<name>.<from>` (its name shortened to fit 128 characters) and is then reported in
    /// ``RemoteRecordsPage/mergedDatasetNames`` of the original, for the app to fold in; no
    /// record is lost, and the 20-dataset limit does not apply to what a merge brings.
    /// Returns the names the moved datasets have under `into`.
    @discardableResult
    public func mergeIdentity(pool: String, from: String, into: String, caller: String) async throws -> [String] {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(from, what: "IdentityId")
        try Self.validateId(into, what: "IdentityId")
        guard from != into else { throw SyncError(.invalidValue, "an identity cannot be merged into itself") }
        let source = Self.scope(pool: pool, identity: from), target = Self.scope(pool: pool, identity: into)
        let now = Timestamp.now()
        return try await store.write { txn in
            try Self.ensurePool(txn, pool: pool, now: now)
            var names: [String] = []
            let datasets = try DatasetRow.all(txn, Query(DatasetRow.live(scope: source), order: [DatasetRow.sorted(.name)]))
            for var old in datasets {
                let name = old.name
                var newName = name
                var mergedFrom: String?
                if try Self.liveDataset(txn, scope: target, name: name) != nil {
                    let suffix = "." + from
                    newName = String(name.prefix(max(1, 128 - suffix.count))) + suffix
                    newName = String(newName.suffix(128))
                    mergedFrom = name
                    guard try Self.liveDataset(txn, scope: target, name: newName) == nil else {
                        throw SyncError(.conflict, "identity '\(into)' already holds a merged copy of dataset '\(name)'")
                    }
                }
                let targetId = Self.datasetId(scope: target, name: newName)
                let previous = try DatasetRow.find(txn, id: targetId)
                let syncCount = max(old.syncCount, previous?.syncCount ?? 0) + 1
                for record in try RecordRow.all(txn, Query(RecordRow.of(scope: source, dataset: name))) {
                    var moved = record
                    moved.id = Self.recordId(scope: target, dataset: newName, key: record.key)
                    moved.scope = target
                    moved.dataset = newName
                    moved.syncCount = syncCount
                    try moved.save(txn)
                    try RecordRow.delete(txn, id: record.id)
                }
                var merged = old
                merged.id = targetId
                merged.scope = target
                merged.identity = into
                merged.name = newName
                merged.syncCount = syncCount
                merged.lastModified = now
                merged.lastModifiedBy = caller
                merged.mergedFrom = mergedFrom
                // The deletion mark of a dataset the target once had under that name stays.
                if let deletedAt = previous?.deletedAt { merged.deletedAt = deletedAt }
                try merged.save(txn)
                Self.markDeleted(&old, now: now, caller: caller)
                try old.save(txn)
                names.append(newName)
            }
            return names
        }
    }
}
