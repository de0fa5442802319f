import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    static func dataset(_ row: Record) -> RemoteDataset {
        RemoteDataset(identityId: row["identity"].stringValue ?? "", name: row["name"].stringValue ?? "",
                      creationDate: row["created"].dateValue ?? Timestamp(millisecondsSince1970: 0),
                      lastModifiedDate: row["lastModified"].dateValue ?? Timestamp(millisecondsSince1970: 0),
                      lastModifiedBy: row["lastModifiedBy"].stringValue ?? "", dataStorage: row["storage"].intValue ?? 0,
                      numRecords: row["count"].intValue ?? 0, syncCount: row["syncCount"].intValue ?? 0)
    }

    static func record(_ row: Record) -> RemoteDatasetRecord {
        RemoteDatasetRecord(key: row["key"].stringValue ?? "", value: row["value"].stringValue,
                            syncCount: row["syncCount"].intValue ?? 0,
                            lastModifiedDate: row["lastModified"].dateValue ?? Timestamp(millisecondsSince1970: 0),
                            lastModifiedBy: row["lastModifiedBy"].stringValue ?? "",
                            deviceLastModifiedDate: row["deviceLastModified"].dateValue)
    }

    static func liveDataset(_ txn: any LocalReadTransaction, scope: String, name: String) throws -> Record? {
        guard let row = try txn.record(in: Tables.datasets, id: datasetId(scope: scope, name: name)),
              row["live"].boolValue == true else { return nil }
        return row
    }

    /// The pool's row, created on first use.
    @discardableResult
    static func ensurePool(_ txn: any LocalWriteTransaction, pool: String, now: Timestamp) throws -> Record {
        if let row = try txn.record(in: Tables.pools, id: pool) { return row }
        let row = Record(id: pool, fields: ["created": .date(now), "lastModified": .date(now), "sessions": 0])
        try txn.upsert(row, in: Tables.pools)
        return row
    }
}
