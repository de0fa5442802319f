import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    /// Publishes every record of the pool to its configured stream, then returns. Needs
    /// enabled streams (``SyncError/Code/invalidValue``); refused with
    /// ``SyncError/Code/busy`` while one runs and with ``SyncError/Code/rejected`` within 24
    /// hours of one that succeeded.
    public func bulkPublish(pool: String) async throws {
        try Self.validateId(pool, what: "IdentityPoolId")
        let now = Timestamp.now()
        let day: Int64 = 86_400_000
        try await store.write { txn in
            guard var row = try PoolRow.find(txn, id: pool) else {
                throw SyncError(.notFound, "identity pool '\(pool)' does not exist")
            }
            guard row.isStreaming else {
                throw SyncError(.invalidValue, "bulk publish needs Cognito streams configured and enabled for the pool")
            }
            let started = row.bulkStart?.millisecondsSince1970 ?? 0
            switch row.bulkStatus {
            case .inProgress? where now.millisecondsSince1970 - started < 3_600_000:
                throw SyncError(.busy, "a bulk publish of this pool is in progress")
            case .succeeded? where now.millisecondsSince1970 - (row.bulkComplete?.millisecondsSince1970 ?? 0) < day:
                throw SyncError(.rejected, "this pool was published less than 24 hours ago")
            default: break
            }
            row.bulkStatus = .inProgress
            row.bulkStart = now
            row.bulkComplete = nil
            row.bulkFailure = nil
            try row.save(txn)
        }
        var failure: String?
        do {
            try await publishAll(pool: pool)
        } catch {
            failure = (error as? SyncError)?.message ?? "publishing failed"
        }
        try await store.write { [failure] txn in
            guard var row = try PoolRow.find(txn, id: pool) else { return }
            row.bulkStatus = failure == nil ? .succeeded : .failed
            row.bulkComplete = Timestamp.now()
            row.bulkFailure = failure
            try row.save(txn)
        }
    }

    /// The pool's last bulk publish, or ``SyncError/Code/notFound`` for an unknown pool.
    public func bulkPublishDetails(pool: String) async throws -> BulkPublishDetails {
        try Self.validateId(pool, what: "IdentityPoolId")
        let row = try await existingPool(pool)
        return BulkPublishDetails(identityPoolId: pool, status: row.bulkStatus?.rawValue ?? "NOT_STARTED",
                                  startTime: row.bulkStart, completeTime: row.bulkComplete, failureMessage: row.bulkFailure)
    }

    /// Streams the pool's records page by page (datasets by id, records by key).
    private func publishAll(pool: String) async throws {
        guard let streamSink else { throw SyncError(.invalidConfiguration, "the server has no stream destination") }
        guard let streamName = try await configuration(pool: pool).streams?.streamName else { return }
        var datasetOffset = 0
        while true {
            let datasets = try await store.read { [datasetOffset] txn in
                try DatasetRow.all(txn, Query(DatasetRow.field(.pool) == .string(pool) && DatasetRow.field(.live) == true,
                                              order: [SortKey(SystemField.id)], limit: 100, offset: datasetOffset))
            }
            for dataset in datasets {
                let scope = dataset.scope, name = dataset.name, identity = dataset.identity
                var after: String?
                while true {
                    let page = try await store.read { [after] txn in
                        var predicate = RecordRow.of(scope: scope, dataset: name)
                        if let after { predicate = predicate && RecordRow.field(.key) > .string(after) }
                        return try RecordRow.all(txn, Query(predicate, order: [RecordRow.sorted(.key)], limit: 500))
                    }
                    if page.isEmpty { break }
                    try await streamSink.publish(stream: streamName, records: page.map {
                        DatasetStreamRecord(identityPoolId: pool, identityId: identity, datasetName: name, record: $0.remote)
                    })
                    after = page.last?.key
                    if page.count < 500 { break }
                }
            }
            if datasets.count < 100 { break }
            datasetOffset += datasets.count
        }
    }

    func stream(pool: String, records: [DatasetStreamRecord]) async {
        guard let streamSink, let name = try? await configuration(pool: pool).streams?.streamName else { return }
        // Streams are a copy for analytics; a failed delivery does not undo the update.
        try? await streamSink.publish(stream: name, records: records)
    }
}
