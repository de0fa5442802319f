import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    /// The pool's push-sync and streams configuration, or ``SyncError/Code/notFound``.
    public func configuration(pool: String) async throws -> PoolConfiguration {
        try Self.validateId(pool, what: "IdentityPoolId")
        return Self.configuration(try await existingPool(pool))
    }

    /// The pool's row, or ``SyncError/Code/notFound``.
    func existingPool(_ pool: String) async throws -> PoolRow {
        guard let row = try await store.read({ txn in try PoolRow.find(txn, id: pool) }) else {
            throw SyncError(.notFound, "identity pool '\(pool)' does not exist")
        }
        return row
    }

    static func configuration(_ row: PoolRow) -> PoolConfiguration {
        let arns = row.applicationArns ?? []
        let push = arns.isEmpty && row.pushRoleArn == nil ? nil : PushSyncConfiguration(applicationArns: arns, roleArn: row.pushRoleArn)
        let streams = row.streamName.map {
            StreamsConfiguration(streamName: $0, roleArn: row.streamRoleArn, enabled: row.streamingStatus == .enabled)
        }
        return PoolConfiguration(identityPoolId: row.id, pushSync: push, streams: streams)
    }

    /// Sets the parts of the pool's configuration that are given (creating the pool).
    public func setConfiguration(pool: String, pushSync: PushSyncConfiguration?, streams: StreamsConfiguration?) async throws
        -> PoolConfiguration {
        try Self.validateId(pool, what: "IdentityPoolId")
        if let pushSync {
            for arn in pushSync.applicationArns where !arn.hasPrefix("arn:aws:sns:") || !arn.contains(":app/") {
                throw SyncError(.invalidValue, "an application ARN looks like arn:aws:sns:<region>:<account>:app/<platform>/<name>")
            }
            if let role = pushSync.roleArn { try Self.validateRole(role) }
        }
        if let streams {
            guard (1...128).contains(streams.streamName.utf8.count) else { throw SyncError(.invalidValue, "a stream name is 1 to 128 characters") }
            if let role = streams.roleArn { try Self.validateRole(role) }
        }
        let now = Timestamp.now()
        return try await store.write { txn in
            var row = try Self.ensurePool(txn, pool: pool, now: now)
            if let pushSync {
                row.applicationArns = pushSync.applicationArns
                row.pushRoleArn = pushSync.roleArn
            }
            if let streams {
                row.streamName = streams.streamName
                row.streamRoleArn = streams.roleArn
                row.streamingStatus = streams.enabled ? .enabled : .disabled
            }
            try row.save(txn)
            return Self.configuration(row)
        }
    }

    static func validateRole(_ arn: String) throws {
        guard arn.hasPrefix("arn:aws:iam::"), arn.contains(":role/"), (20...2048).contains(arn.utf8.count) else {
            throw SyncError(.invalidValue, "a role ARN looks like arn:aws:iam::<account>:role/<name>")
        }
    }

    /// The pool's Cognito events (at most one: event type → target), or ``SyncError/Code/notFound``.
    public func events(pool: String) async throws -> [String: String] {
        try Self.validateId(pool, what: "IdentityPoolId")
        let row = try await existingPool(pool)
        guard let type = row.eventType, let target = row.eventTarget else { return [:] }
        return [type: target]
    }

    /// Sets the pool's Cognito events: at most one entry (an empty map clears them). The
    /// server records them; it runs no functions.
    public func setEvents(pool: String, _ events: [String: String]) async throws {
        try Self.validateId(pool, what: "IdentityPoolId")
        guard events.count <= 1 else { throw SyncError(.invalidValue, "Events may hold at most one entry") }
        if let (type, target) = events.first, type.isEmpty || target.isEmpty {
            throw SyncError(.invalidValue, "an event needs a type and a target")
        }
        let now = Timestamp.now()
        try await store.write { txn in
            var row = try Self.ensurePool(txn, pool: pool, now: now)
            row.eventType = events.first?.key
            row.eventTarget = events.first?.value
            try row.save(txn)
        }
    }
}
