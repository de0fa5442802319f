import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    /// The identity's usage: live datasets and their bytes.
    public func describeIdentityUsage(pool: String, identity: String) async throws -> IdentityUsage {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        let scope = Self.scope(pool: pool, identity: identity)
        return try await store.read { txn in
            let rows = try DatasetRow.all(txn, Query(DatasetRow.live(scope: scope)))
            return IdentityUsage(identityId: identity, identityPoolId: pool, lastModifiedDate: rows.map(\.lastModified).max(),
                                 datasetCount: rows.count, dataStorage: rows.reduce(0) { $0 + $1.storage })
        }
    }

    /// The pool's usage, or ``SyncError/Code/notFound`` for a pool never used.
    public func describePoolUsage(pool: String) async throws -> PoolUsage {
        try Self.validateId(pool, what: "IdentityPoolId")
        guard let usage = try await store.read({ txn in try Self.usage(txn, pool: pool) }) else {
            throw SyncError(.notFound, "identity pool '\(pool)' does not exist")
        }
        return usage
    }

    /// Every pool's usage, by id, one page at a time.
    public func listPoolUsage(nextToken: String?, maxResults: Int?) async throws -> (pools: [PoolUsage], nextToken: String?) {
        let limit = try Self.pageSize(maxResults)
        let after = try nextToken.map { try Self.decodeToken($0, parts: 2) }
        if let after, after[0] != "p" { throw SyncError(.invalidValue, "nextToken is not one this service issued") }
        return try await store.read { txn in
            let predicate: QueryPredicate = after.map { Field(SystemField.id) > .string($0[1]) } ?? .all
            let rows = try txn.records(in: PoolRow.table, matching: Query(predicate, order: [SortKey(SystemField.id)], limit: limit + 1))
            let pools = try rows.prefix(limit).compactMap { try Self.usage(txn, pool: $0.id) }
            return (pools, rows.count > limit ? pools.last.map { Self.encodeToken(["p", $0.identityPoolId]) } : nil)
        }
    }

    static func usage(_ txn: any LocalReadTransaction, pool: String) throws -> PoolUsage? {
        guard let row = try PoolRow.find(txn, id: pool) else { return nil }
        // Storage and the last change come from the datasets themselves, so an update never
        // has to write the pool's row (one row every update of the pool would contend on).
        var storage: Int64 = 0
        var lastModified: Timestamp? = row.lastModified
        var offset = 0
        while true {
            let page = try DatasetRow.all(txn, Query(
                DatasetRow.field(.pool) == .string(pool), order: [SortKey(SystemField.id)], limit: 1000, offset: offset))
            for dataset in page {
                if dataset.live { storage += dataset.storage }
                if lastModified.map({ dataset.lastModified > $0 }) ?? true { lastModified = dataset.lastModified }
            }
            if page.count < 1000 { break }
            offset += page.count
        }
        return PoolUsage(identityPoolId: pool, syncSessionsCount: row.sessions, dataStorage: storage,
                         lastModifiedDate: lastModified)
    }
}
