import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    /// Registers a device of the identity for push sync and returns its id; the same platform
    /// and token give the same id. Platforms other than ``PushPlatform/webSocket`` need the
    /// pool's push-sync configuration (``SyncError/Code/invalidConfiguration`` otherwise).
    public func registerDevice(pool: String, identity: String, platform: PushPlatform, token: String) async throws -> String {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        guard !token.isEmpty, token.utf8.count <= 4096 else { throw SyncError(.invalidValue, "a push token is 1 to 4096 bytes") }
        let scope = Self.scope(pool: pool, identity: identity)
        let now = Timestamp.now()
        return try await store.write { txn in
            let poolRow = try Self.ensurePool(txn, pool: pool, now: now)
            if platform != .webSocket, (poolRow.applicationArns ?? []).isEmpty {
                throw SyncError(.invalidConfiguration, "push sync is not configured for identity pool '\(pool)'")
            }
            if let existing = try DeviceRow.first(txn, Query(DeviceRow.field(.scope) == .string(scope)
                && DeviceRow.field(.platform) == .string(platform.rawValue) && DeviceRow.field(.token) == .string(token))) {
                return existing.id
            }
            let id = UUID().uuidString.lowercased()
            try DeviceRow(id: id, scope: scope, platform: platform.rawValue, token: token).save(txn)
            return id
        }
    }

    /// Subscribes the identity's device to `dataset` (``SyncError/Code/notFound`` for a device
    /// the identity did not register).
    public func subscribe(pool: String, identity: String, dataset: String, deviceId: String) async throws {
        let scope = try subscriptionScope(pool: pool, identity: identity, dataset: dataset)
        try await store.write { txn in
            try Self.requireDevice(txn, scope: scope, deviceId: deviceId)
            try SubscriptionRow(id: Self.subscriptionId(scope: scope, dataset: dataset, device: deviceId), scope: scope,
                                dataset: dataset, device: deviceId).save(txn)
        }
    }

    /// Ends the device's subscription to `dataset` (``SyncError/Code/notFound`` for a device
    /// the identity did not register).
    public func unsubscribe(pool: String, identity: String, dataset: String, deviceId: String) async throws {
        let scope = try subscriptionScope(pool: pool, identity: identity, dataset: dataset)
        try await store.write { txn in
            try Self.requireDevice(txn, scope: scope, deviceId: deviceId)
            try SubscriptionRow.delete(txn, id: Self.subscriptionId(scope: scope, dataset: dataset, device: deviceId))
        }
    }

    /// Whether the device is subscribed to the identity's `dataset`.
    public func isSubscribed(pool: String, identity: String, dataset: String, deviceId: String) async throws -> Bool {
        let scope = Self.scope(pool: pool, identity: identity)
        return try await store.read { txn in
            try SubscriptionRow.find(txn, id: Self.subscriptionId(scope: scope, dataset: dataset, device: deviceId)) != nil
        }
    }

    /// Whether `deviceId` is a device the identity registered, and its platform.
    public func device(pool: String, identity: String, deviceId: String) async throws -> PushPlatform? {
        let scope = Self.scope(pool: pool, identity: identity)
        return try await store.read { txn in
            guard let row = try DeviceRow.find(txn, id: deviceId), row.scope == scope else { return nil }
            return PushPlatform(rawValue: row.platform)
        }
    }

    private func subscriptionScope(pool: String, identity: String, dataset: String) throws -> String {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        try Self.validateDatasetName(dataset)
        return Self.scope(pool: pool, identity: identity)
    }

    static func requireDevice(_ txn: any LocalReadTransaction, scope: String, deviceId: String) throws {
        guard let row = try DeviceRow.find(txn, id: deviceId), row.scope == scope else {
            throw SyncError(.notFound, "no device with that id is registered for this identity")
        }
    }
}
