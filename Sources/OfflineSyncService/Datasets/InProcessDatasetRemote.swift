import Foundation
import OfflineSync
import OfflineSyncDatasets

/// The service as a ``DatasetRemote`` for one identity, in process.
struct InProcessDatasetRemote: DatasetRemote {
    let service: DatasetService
    let pool: String
    let identity: String

    func listDatasets(nextToken: String?, maxResults: Int?) async throws -> RemoteDatasetList {
        try await service.listDatasets(pool: pool, identity: identity, nextToken: nextToken, maxResults: maxResults)
    }

    func describeDataset(_ name: String) async throws -> RemoteDataset? {
        do { return try await service.describeDataset(pool: pool, identity: identity, name: name) } catch let error as SyncError
            where error.code == .notFound { return nil }
    }

    func listRecords(dataset: String, lastSyncCount: Int64, nextToken: String?, maxResults: Int?,
                     syncSessionToken: String?) async throws -> RemoteRecordsPage {
        try await service.listRecords(pool: pool, identity: identity, dataset: dataset, lastSyncCount: lastSyncCount,
                                      nextToken: nextToken, maxResults: maxResults, syncSessionToken: syncSessionToken)
    }

    func updateRecords(dataset: String, patches: [RecordPatch], syncSessionToken: String,
                       deviceId: String?) async throws -> [RemoteDatasetRecord] {
        try await service.updateRecords(pool: pool, identity: identity, dataset: dataset, patches: patches,
                                        syncSessionToken: syncSessionToken, deviceId: deviceId, caller: identity).records
    }

    func deleteDataset(_ name: String) async throws -> RemoteDataset? {
        do { return try await service.deleteDataset(pool: pool, identity: identity, name: name, caller: identity) } catch let error as SyncError
            where error.code == .notFound { return nil }
    }

    func registerDevice(platform: PushPlatform, token: String) async throws -> String {
        try await service.registerDevice(pool: pool, identity: identity, platform: platform, token: token)
    }

    func subscribe(dataset: String, deviceId: String) async throws {
        try await service.subscribe(pool: pool, identity: identity, dataset: dataset, deviceId: deviceId)
    }

    func unsubscribe(dataset: String, deviceId: String) async throws {
        try await service.unsubscribe(pool: pool, identity: identity, dataset: dataset, deviceId: deviceId)
    }
}
