import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    /// The identity's dataset `name`, if it exists and is not deleted.
    static func liveDataset(_ txn: any LocalReadTransaction, scope: String, name: String) throws -> DatasetRow? {
        guard let row = try DatasetRow.find(txn, id: datasetId(scope: scope, name: name)), row.live else { return nil }
        return row
    }

    /// The pool's row, created on first use.
    @discardableResult
    static func ensurePool(_ txn: any LocalWriteTransaction, pool: String, now: Timestamp) throws -> PoolRow {
        if let row = try PoolRow.find(txn, id: pool) { return row }
        let row = PoolRow(id: pool, now: now)
        try row.save(txn)
        return row
    }
}
