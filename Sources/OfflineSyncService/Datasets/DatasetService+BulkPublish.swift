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
            guard var row = try txn.record(in: Tables.pools, id: pool) else {
                throw SyncError(.notFound, "identity pool '\(pool)' does not exist")
            }
            guard row["streamName"].stringValue != nil, row["streamingStatus"].stringValue == "ENABLED" else {
                throw SyncError(.invalidValue, "bulk publish needs Cognito streams configured and enabled for the pool")
            }
            let started = row["bulkStart"].dateValue?.millisecondsSince1970 ?? 0
            switch row["bulkStatus"].stringValue {
            case "IN_PROGRESS" where now.millisecondsSince1970 - started < 3_600_000:
                throw SyncError(.busy, "a bulk publish of this pool is in progress")
            case "SUCCEEDED" where now.millisecondsSince1970 - (row["bulkComplete"].dateValue?.millisecondsSince1970 ?? 0) < day:
                throw SyncError(.rejected, "this pool was published less than 24 hours ago")
            default: break
            }
            row.fields["bulkStatus"] = "IN_PROGRESS"
            row.fields["bulkStart"] = .date(now)
            row.fields["bulkComplete"] = .null
            row.fields["bulkFailure"] = .null
            try txn.upsert(row, in: Tables.pools)
        }
        var failure: String?
        do {
            try await publishAll(pool: pool)
        } catch {
            failure = (error as? SyncError)?.message ?? "publishing failed"
        }
        try await store.write { [failure] txn in
            guard var row = try txn.record(in: Tables.pools, id: pool) else { return }
            row.fields["bulkStatus"] = .string(failure == nil ? "SUCCEEDED" : "FAILED")
            row.fields["bulkComplete"] = .date(Timestamp.now())
            row.fields["bulkFailure"] = failure.map(Value.string) ?? .null
            try txn.upsert(row, in: Tables.pools)
        }
    }

    /// The pool's last bulk publish, or ``SyncError/Code/notFound`` for an unknown pool.
    public func bulkPublishDetails(pool: String) async throws -> BulkPublishDetails {
        try Self.validateId(pool, what: "IdentityPoolId")
        guard let row = try await store.read({ txn in try txn.record(in: Tables.pools, id: pool) }) else {
            throw SyncError(.notFound, "identity pool '\(pool)' does not exist")
        }
        return BulkPublishDetails(identityPoolId: pool, status: row["bulkStatus"].stringValue ?? "NOT_STARTED",
                                  startTime: row["bulkStart"].dateValue, completeTime: row["bulkComplete"].dateValue,
                                  failureMessage: row["bulkFailure"].stringValue)
    }

    /// Streams the pool's records page by page (datasets by id, records by key).
    private func publishAll(pool: String) async throws {
        guard let streamSink else { throw SyncError(.invalidConfiguration, "the server has no stream destination") }
        guard let streamName = try await configuration(pool: pool).streams?.streamName else { return }
        var datasetOffset = 0
        while true {
            let datasets = try await store.read { [datasetOffset] txn in
                try txn.records(in: Tables.datasets, matching: Query(
                    Field("pool") == .string(pool) && Field("live") == true, order: [SortKey(SystemField.id)], limit: 100,
                    offset: datasetOffset))
            }
            for dataset in datasets {
                let scope = dataset["scope"].stringValue ?? "", name = dataset["name"].stringValue ?? ""
                let identity = dataset["identity"].stringValue ?? ""
                var after: String?
                while true {
                    let page = try await store.read { [after] txn in
                        var predicate = Field("scope") == .string(scope) && Field("dataset") == .string(name)
                        if let after { predicate = predicate && Field("key") > .string(after) }
                        return try txn.records(in: Tables.records, matching: Query(predicate, order: [SortKey("key")], limit: 500))
                    }
                    if page.isEmpty { break }
                    try await streamSink.publish(stream: streamName, records: page.map {
                        DatasetStreamRecord(identityPoolId: pool, identityId: identity, datasetName: name, record: Self.record($0))
                    })
                    after = page.last?["key"].stringValue
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
