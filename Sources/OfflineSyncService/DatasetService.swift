import Foundation
import OfflineSync
import OfflineSyncDatasets

/// The authoritative side of datasets, in the Amazon Cognito Sync model, over any
/// ``LocalStore``: what the server's Cognito Sync–compatible API and the in-process
/// ``remote(pool:identity:)`` call.
///
/// - **Sync counts.** Each dataset has a sync count that an accepted update raises by one;
///   every record changed by that update carries the new count. Listing the records after a
///   sync count returns every change since, in (sync count, key) order, so paging while
///   others write never skips one.
/// - **All or nothing.** An update whose patch names a record sync count that is not the
///   record's current one (0 for a new key) is ``SyncError/Code/conflict`` and applies
///   nothing; so does one that breaks a limit (``SyncError/Code/limitExceeded``): keys up to
///   128 characters, values up to 1 MiB, 1 MiB of keys and values per dataset, 20 datasets
///   per identity.
/// - **Sessions.** Listing records hands out a sync session token; an update must carry one
///   issued for the same identity and dataset within ``sessionLifetime``.
/// - **Deletion.** A deleted dataset keeps its row (and its sync count, which never goes
///   back), so a client that last synchronized before the deletion is told, even after the
///   dataset was created again.
/// - **Identity pools.** Everything is scoped by pool and identity; a pool exists once one
///   of its identities has used it or it was configured.
public final class DatasetService: Sendable {
    /// The store holding the datasets.
    public let store: any LocalStore
    private let streamSink: (any DatasetStreamSink)?

    /// How long a sync session token is accepted, in milliseconds (one hour).
    public static let sessionLifetime: Int64 = 3_600_000
    /// The largest page of records or datasets.
    public static let maxPageSize = 1000
    /// The page size when none is asked for.
    public static let defaultPageSize = 100

    enum Tables {
        static let pools = "__cs_pools"
        static let datasets = "__cs_datasets"
        static let records = "__cs_records"
        static let sessions = "__cs_sessions"
        static let devices = "__cs_devices"
        static let subscriptions = "__cs_subscriptions"
        static let signatures = "__cs_signatures"
    }

    /// Opens the service over `store`, defining its tables. Records streamed by bulk publish
    /// and by updates to pools whose streams are enabled go to `streamSink`.
    public init(store: any LocalStore, streamSink: (any DatasetStreamSink)? = nil) async throws {
        self.store = store
        self.streamSink = streamSink
        try await store.defineTable(TableSchema(Tables.pools, fields: [
            FieldDefinition("created", .date), FieldDefinition("lastModified", .date), FieldDefinition("sessions", .int),
            FieldDefinition("applicationArns", .array), FieldDefinition("pushRoleArn", .string),
            FieldDefinition("streamName", .string), FieldDefinition("streamRoleArn", .string),
            FieldDefinition("streamingStatus", .string), FieldDefinition("eventType", .string),
            FieldDefinition("eventTarget", .string), FieldDefinition("bulkStatus", .string),
            FieldDefinition("bulkStart", .date), FieldDefinition("bulkComplete", .date), FieldDefinition("bulkFailure", .string),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.datasets, fields: [
            FieldDefinition("pool", .string, indexed: true), FieldDefinition("scope", .string, indexed: true),
            FieldDefinition("identity", .string), FieldDefinition("name", .string), FieldDefinition("syncCount", .int),
            FieldDefinition("created", .date), FieldDefinition("lastModified", .date), FieldDefinition("lastModifiedBy", .string),
            FieldDefinition("live", .bool), FieldDefinition("deletedAt", .int), FieldDefinition("storage", .int),
            FieldDefinition("count", .int), FieldDefinition("mergedFrom", .string),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.records, fields: [
            FieldDefinition("scope", .string), FieldDefinition("dataset", .string), FieldDefinition("key", .string),
            FieldDefinition("value", .string), FieldDefinition("syncCount", .int), FieldDefinition("lastModified", .date),
            FieldDefinition("lastModifiedBy", .string), FieldDefinition("deviceLastModified", .date),
        ], indexes: [IndexDefinition(["scope", "dataset", "syncCount"])], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.sessions, fields: [
            FieldDefinition("scope", .string), FieldDefinition("dataset", .string), FieldDefinition("created", .date, indexed: true),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.devices, fields: [
            FieldDefinition("scope", .string, indexed: true), FieldDefinition("platform", .string), FieldDefinition("token", .string),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.signatures, fields: [
            FieldDefinition("at", .date, indexed: true), FieldDefinition("answer", .bytes),
        ], undeclaredFields: .reject))
        try await store.defineTable(TableSchema(Tables.subscriptions, fields: [
            FieldDefinition("scope", .string), FieldDefinition("dataset", .string), FieldDefinition("device", .string),
        ], indexes: [IndexDefinition(["scope", "dataset"])], undeclaredFields: .reject))
    }

    /// A ``DatasetRemote`` for one identity of `pool`, for in-process use.
    public func remote(pool: String, identity: String) -> any DatasetRemote {
        InProcessDatasetRemote(service: self, pool: pool, identity: identity)
    }

    // MARK: Names and ids

    /// Pool and identity ids: 1 to 128 characters of letters, digits, `_`, `-` and `:`
    /// (Cognito's are `region:uuid`), or ``SyncError/Code/invalidValue``.
    public static func validateId(_ id: String, what: String) throws {
        let ok = (1...128).contains(id.utf8.count) && id.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":")
        }
        guard ok else { throw SyncError(.invalidValue, "\(what) must be 1 to 128 characters of A-Z, a-z, 0-9, '_', '-' and ':'") }
    }

    static func validateDatasetName(_ name: String) throws {
        do { try DatasetManager.validateName(name) } catch let error as SyncError {
            throw SyncError(.invalidValue, error.message)
        }
    }

    static func scope(pool: String, identity: String) -> String { "\(pool.utf8.count):\(pool)\(identity.utf8.count):\(identity)" }
    static func datasetId(scope: String, name: String) -> String { "\(scope)\(name)" }
    static func recordId(scope: String, dataset: String, key: String) -> String { "\(scope)\(dataset.utf8.count):\(dataset)\(key)" }
    static func subscriptionId(scope: String, dataset: String, device: String) -> String {
        "\(scope)\(dataset.utf8.count):\(dataset)\(device)"
    }

    static func pageSize(_ maxResults: Int?) throws -> Int {
        guard let maxResults else { return defaultPageSize }
        guard maxResults >= 1 else { throw SyncError(.invalidValue, "maxResults must be at least 1") }
        return min(maxResults, maxPageSize)
    }

    static func encodeToken(_ parts: [String]) -> String {
        Data(parts.joined(separator: "\n").utf8).base64EncodedString()
    }

    static func decodeToken(_ token: String, parts count: Int) throws -> [String] {
        guard let data = Data(base64Encoded: token), let text = String(data: data, encoding: .utf8) else {
            throw SyncError(.invalidValue, "nextToken is not one this service issued")
        }
        let parts = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == count else { throw SyncError(.invalidValue, "nextToken is not one this service issued") }
        return parts
    }

    // MARK: Rows

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

    // MARK: Datasets

    /// The identity's datasets, by name, one page at a time.
    public func listDatasets(pool: String, identity: String, nextToken: String?, maxResults: Int?) async throws -> RemoteDatasetList {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        let limit = try Self.pageSize(maxResults)
        let after = try nextToken.map { try Self.decodeToken($0, parts: 2) }
        let scope = Self.scope(pool: pool, identity: identity)
        if let after, after[0] != "d" { throw SyncError(.invalidValue, "nextToken is not one this service issued") }
        return try await store.read { txn in
            var predicate = Field("scope") == .string(scope) && Field("live") == true
            if let after { predicate = predicate && Field("name") > .string(after[1]) }
            let rows = try txn.records(in: Tables.datasets, matching: Query(predicate, order: [SortKey("name")], limit: limit + 1))
            let page = rows.prefix(limit).map(Self.dataset)
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
        return Self.dataset(row)
    }

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

    /// What ``claimSignedRequest(_:window:abandonAfter:)`` found for a signature.
    public enum SignedRequestClaim: Sendable, Equatable {
        /// The first time: run the request, then ``completeSignedRequest(_:answer:)`` (or
        /// ``releaseSignedRequest(_:)`` when it failed).
        case claimed
        /// The request ran and succeeded already: these are its answer's bytes.
        case answered([UInt8])
        /// The same request is running now.
        case inProgress
    }

    /// Claims the signature of a signed request that changes something, so the same bytes
    /// run once while their date is still valid: a replay (or an SDK's retry that reused the
    /// signing second) gets the first run's answer instead of running again. Kept in the
    /// service's store, so every instance sharing it agrees. A claim left running for longer
    /// than `abandonAfter` (its server died) may be taken over. Signatures older than
    /// `window` (at least twice the clock skew a date may have) are forgotten a few at a
    /// time: by then the date check refuses the request anyway.
    public func claimSignedRequest(_ signature: String, window: Duration,
                                   abandonAfter: Duration = .seconds(30)) async throws -> SignedRequestClaim {
        let now = Timestamp.now()
        let cutoff = Timestamp(millisecondsSince1970: now.millisecondsSince1970 - window.components.seconds * 1000)
        let stale = now.millisecondsSince1970 - abandonAfter.components.seconds * 1000
        return try await store.write { txn in
            if let row = try txn.record(in: Tables.signatures, id: signature) {
                if case .bytes(let answer) = row["answer"] { return .answered(answer) }
                if let at = row["at"].dateValue, at.millisecondsSince1970 > stale { return .inProgress }
            }
            try txn.upsert(Record(id: signature, fields: ["at": .date(now)]), in: Tables.signatures)
            for old in try txn.records(in: Tables.signatures, matching: Query(Field("at") < .date(cutoff), limit: 16)) {
                _ = try txn.delete(id: old.id, in: Tables.signatures)
            }
            return .claimed
        }
    }

    /// Keeps the answer of a claimed request that succeeded, for its replays.
    public func completeSignedRequest(_ signature: String, answer: [UInt8]) async throws {
        try await store.write { txn in
            guard var row = try txn.record(in: Tables.signatures, id: signature) else { return }
            row["answer"] = .bytes(answer)
            try txn.upsert(row, in: Tables.signatures)
        }
    }

    /// Forgets a claimed signature whose request failed, so the same bytes may run again
    /// (an error is not replayed: the server's data may have moved on since).
    public func releaseSignedRequest(_ signature: String) async throws {
        try await store.write { txn in _ = try txn.delete(id: signature, in: Tables.signatures) }
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
        let scope = Self.scope(pool: pool, identity: identity)
        let now = Timestamp.now()
        try await checkSession(syncSessionToken, scope: scope, dataset: name, now: now)
        let result = try await store.write { txn -> (UpdateResult, Bool) in
            let poolRow = try Self.ensurePool(txn, pool: pool, now: now)
            let id = Self.datasetId(scope: scope, name: name)
            var row = try txn.record(in: Tables.datasets, id: id)
            if row?["live"].boolValue != true {
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
                row = Record(id: id, fields: fields)
            }
            guard var dataset = row else { throw SyncError(.storageFailure, "dataset row vanished") }
            var storage = dataset["storage"].intValue ?? 0
            var count = dataset["count"].intValue ?? 0
            let syncCount = (dataset["syncCount"].intValue ?? 0) + (patches.isEmpty ? 0 : 1)
            var written: [Record] = []
            for patch in patches {
                let recordId = Self.recordId(scope: scope, dataset: name, key: patch.key)
                let current = try txn.record(in: Tables.records, id: recordId)
                guard (current?["syncCount"].intValue ?? 0) == patch.syncCount else {
                    throw SyncError(.conflict, "a record changed on the server since sync count \(patch.syncCount); list the records again")
                }
                if let value = current?["value"].stringValue {
                    storage -= Int64(patch.key.utf8.count + value.utf8.count)
                    count -= 1
                }
                var fields: [String: Value] = [
                    "scope": .string(scope), "dataset": .string(name), "key": .string(patch.key), "syncCount": .int(syncCount),
                    "lastModified": .date(now), "lastModifiedBy": .string(caller),
                ]
                if patch.op == .replace, let value = patch.value {
                    fields["value"] = .string(value)
                    storage += Int64(patch.key.utf8.count + value.utf8.count)
                    count += 1
                }
                if let device = patch.deviceLastModifiedDate { fields["deviceLastModified"] = .date(device) }
                written.append(Record(id: recordId, fields: fields))
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
            let before = Self.dataset(row)
            while true {
                let records = try txn.records(in: Tables.records, matching: Query(
                    Field("scope") == .string(scope) && Field("dataset") == .string(name), limit: 1000))
                if records.isEmpty { break }
                for record in records { _ = try txn.delete(id: record.id, in: Tables.records) }
            }
            Self.markDeleted(&row, now: now, caller: caller)
            try txn.upsert(row, in: Tables.datasets)
            return before
        }
    }

    /// Turns a dataset row into the memory of a deletion: its sync count moves on by one and
    /// is remembered as the deletion's, so clients that synchronized before are told.
    static func markDeleted(_ row: inout Record, now: Timestamp, caller: String) {
        let count = (row["syncCount"].intValue ?? 0) + 1
        row.fields["syncCount"] = .int(count)
        row.fields["deletedAt"] = .int(count)
        row.fields["live"] = false
        row.fields["storage"] = 0
        row.fields["count"] = 0
        row.fields["lastModified"] = .date(now)
        row.fields["lastModifiedBy"] = .string(caller)
        row.fields["mergedFrom"] = .null
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
            let datasets = try txn.records(in: Tables.datasets, matching: Query(
                Field("scope") == .string(source) && Field("live") == true, order: [SortKey("name")]))
            for var old in datasets {
                let name = old["name"].stringValue ?? ""
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
                let previous = try txn.record(in: Tables.datasets, id: targetId)
                let syncCount = max(old["syncCount"].intValue ?? 0, previous?["syncCount"].intValue ?? 0) + 1
                let records = try txn.records(in: Tables.records, matching: Query(
                    Field("scope") == .string(source) && Field("dataset") == .string(name)))
                for record in records {
                    var moved = record
                    moved.id = Self.recordId(scope: target, dataset: newName, key: record["key"].stringValue ?? "")
                    moved.fields["scope"] = .string(target)
                    moved.fields["dataset"] = .string(newName)
                    moved.fields["syncCount"] = .int(syncCount)
                    try txn.upsert(moved, in: Tables.records)
                    _ = try txn.delete(id: record.id, in: Tables.records)
                }
                var fields = old.fields
                fields["scope"] = .string(target)
                fields["identity"] = .string(into)
                fields["name"] = .string(newName)
                fields["syncCount"] = .int(syncCount)
                fields["lastModified"] = .date(now)
                fields["lastModifiedBy"] = .string(caller)
                fields["mergedFrom"] = mergedFrom.map(Value.string) ?? .null
                if let deletedAt = previous?["deletedAt"].intValue { fields["deletedAt"] = .int(deletedAt) }
                try txn.upsert(Record(id: targetId, fields: fields), in: Tables.datasets)
                Self.markDeleted(&old, now: now, caller: caller)
                try txn.upsert(old, in: Tables.datasets)
                names.append(newName)
            }
            return names
        }
    }

    // MARK: Usage

    /// The identity's usage: live datasets and their bytes.
    public func describeIdentityUsage(pool: String, identity: String) async throws -> IdentityUsage {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        let scope = Self.scope(pool: pool, identity: identity)
        return try await store.read { txn in
            let rows = try txn.records(in: Tables.datasets, matching: Query(Field("scope") == .string(scope) && Field("live") == true))
            return IdentityUsage(identityId: identity, identityPoolId: pool,
                                 lastModifiedDate: rows.compactMap { $0["lastModified"].dateValue }.max(),
                                 datasetCount: rows.count, dataStorage: rows.reduce(0) { $0 + ($1["storage"].intValue ?? 0) })
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
            let rows = try txn.records(in: Tables.pools, matching: Query(predicate, order: [SortKey(SystemField.id)], limit: limit + 1))
            let pools = try rows.prefix(limit).compactMap { try Self.usage(txn, pool: $0.id) }
            return (pools, rows.count > limit ? pools.last.map { Self.encodeToken(["p", $0.identityPoolId]) } : nil)
        }
    }

    static func usage(_ txn: any LocalReadTransaction, pool: String) throws -> PoolUsage? {
        guard let row = try txn.record(in: Tables.pools, id: pool) else { return nil }
        // Storage and the last change come from the datasets themselves, so an update never
        // has to write the pool's row (one row every update of the pool would contend on).
        var storage: Int64 = 0
        var lastModified = row["lastModified"].dateValue
        var offset = 0
        while true {
            let page = try txn.records(in: Tables.datasets, matching: Query(
                Field("pool") == .string(pool), order: [SortKey(SystemField.id)], limit: 1000, offset: offset))
            for dataset in page {
                if dataset["live"].boolValue == true { storage += dataset["storage"].intValue ?? 0 }
                if let date = dataset["lastModified"].dateValue, lastModified.map({ date > $0 }) ?? true { lastModified = date }
            }
            if page.count < 1000 { break }
            offset += page.count
        }
        return PoolUsage(identityPoolId: pool, syncSessionsCount: row["sessions"].intValue ?? 0, dataStorage: storage,
                         lastModifiedDate: lastModified)
    }

    // MARK: Devices and subscriptions

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
            if platform != .webSocket, (poolRow["applicationArns"].arrayValue ?? []).isEmpty {
                throw SyncError(.invalidConfiguration, "push sync is not configured for identity pool '\(pool)'")
            }
            if let existing = try txn.first(in: Tables.devices, matching: Query(
                Field("scope") == .string(scope) && Field("platform") == .string(platform.rawValue) && Field("token") == .string(token))) {
                return existing.id
            }
            let id = UUID().uuidString.lowercased()
            try txn.upsert(Record(id: id, fields: [
                "scope": .string(scope), "platform": .string(platform.rawValue), "token": .string(token),
            ]), in: Tables.devices)
            return id
        }
    }

    /// Subscribes the identity's device to `dataset` (``SyncError/Code/notFound`` for a device
    /// the identity did not register).
    public func subscribe(pool: String, identity: String, dataset: String, deviceId: String) async throws {
        let scope = try subscriptionScope(pool: pool, identity: identity, dataset: dataset)
        try await store.write { txn in
            try Self.requireDevice(txn, scope: scope, deviceId: deviceId)
            try txn.upsert(Record(id: Self.subscriptionId(scope: scope, dataset: dataset, device: deviceId), fields: [
                "scope": .string(scope), "dataset": .string(dataset), "device": .string(deviceId),
            ]), in: Tables.subscriptions)
        }
    }

    /// Ends the device's subscription to `dataset` (``SyncError/Code/notFound`` for a device
    /// the identity did not register).
    public func unsubscribe(pool: String, identity: String, dataset: String, deviceId: String) async throws {
        let scope = try subscriptionScope(pool: pool, identity: identity, dataset: dataset)
        try await store.write { txn in
            try Self.requireDevice(txn, scope: scope, deviceId: deviceId)
            _ = try txn.delete(id: Self.subscriptionId(scope: scope, dataset: dataset, device: deviceId), in: Tables.subscriptions)
        }
    }

    /// Whether the device is subscribed to the identity's `dataset`.
    public func isSubscribed(pool: String, identity: String, dataset: String, deviceId: String) async throws -> Bool {
        let scope = Self.scope(pool: pool, identity: identity)
        return try await store.read { txn in
            try txn.record(in: Tables.subscriptions, id: Self.subscriptionId(scope: scope, dataset: dataset, device: deviceId)) != nil
        }
    }

    /// Whether `deviceId` is a device the identity registered, and its platform.
    public func device(pool: String, identity: String, deviceId: String) async throws -> PushPlatform? {
        let scope = Self.scope(pool: pool, identity: identity)
        return try await store.read { txn in
            guard let row = try txn.record(in: Tables.devices, id: deviceId), row["scope"].stringValue == scope else { return nil }
            return row["platform"].stringValue.flatMap(PushPlatform.init(rawValue:))
        }
    }

    private func subscriptionScope(pool: String, identity: String, dataset: String) throws -> String {
        try Self.validateId(pool, what: "IdentityPoolId")
        try Self.validateId(identity, what: "IdentityId")
        try Self.validateDatasetName(dataset)
        return Self.scope(pool: pool, identity: identity)
    }

    static func requireDevice(_ txn: any LocalReadTransaction, scope: String, deviceId: String) throws {
        guard let row = try txn.record(in: Tables.devices, id: deviceId), row["scope"].stringValue == scope else {
            throw SyncError(.notFound, "no device with that id is registered for this identity")
        }
    }

    // MARK: Pool configuration

    /// The pool's push-sync and streams configuration, or ``SyncError/Code/notFound``.
    public func configuration(pool: String) async throws -> PoolConfiguration {
        try Self.validateId(pool, what: "IdentityPoolId")
        guard let row = try await store.read({ txn in try txn.record(in: Tables.pools, id: pool) }) else {
            throw SyncError(.notFound, "identity pool '\(pool)' does not exist")
        }
        return Self.configuration(row)
    }

    static func configuration(_ row: Record) -> PoolConfiguration {
        let arns = (row["applicationArns"].arrayValue ?? []).compactMap(\.stringValue)
        let push = arns.isEmpty && row["pushRoleArn"].stringValue == nil
            ? nil : PushSyncConfiguration(applicationArns: arns, roleArn: row["pushRoleArn"].stringValue)
        let streams = row["streamName"].stringValue.map {
            StreamsConfiguration(streamName: $0, roleArn: row["streamRoleArn"].stringValue,
                                 enabled: row["streamingStatus"].stringValue == "ENABLED")
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
                row.fields["applicationArns"] = .array(pushSync.applicationArns.map(Value.string))
                row.fields["pushRoleArn"] = pushSync.roleArn.map(Value.string) ?? .null
            }
            if let streams {
                row.fields["streamName"] = .string(streams.streamName)
                row.fields["streamRoleArn"] = streams.roleArn.map(Value.string) ?? .null
                row.fields["streamingStatus"] = .string(streams.enabled ? "ENABLED" : "DISABLED")
            }
            try txn.upsert(row, in: Tables.pools)
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
        guard let row = try await store.read({ txn in try txn.record(in: Tables.pools, id: pool) }) else {
            throw SyncError(.notFound, "identity pool '\(pool)' does not exist")
        }
        guard let type = row["eventType"].stringValue, let target = row["eventTarget"].stringValue else { return [:] }
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
            row.fields["eventType"] = events.first.map { Value.string($0.key) } ?? .null
            row.fields["eventTarget"] = events.first.map { Value.string($0.value) } ?? .null
            try txn.upsert(row, in: Tables.pools)
        }
    }

    // MARK: Bulk publish

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

    private func stream(pool: String, records: [DatasetStreamRecord]) async {
        guard let streamSink, let name = try? await configuration(pool: pool).streams?.streamName else { return }
        // Streams are a copy for analytics; a failed delivery does not undo the update.
        try? await streamSink.publish(stream: name, records: records)
    }
}

/// An identity's dataset usage.
public struct IdentityUsage: Sendable, Hashable {
    /// The identity.
    public var identityId: String
    /// Its pool.
    public var identityPoolId: String
    /// When one of its datasets last changed.
    public var lastModifiedDate: Timestamp?
    /// How many datasets it has.
    public var datasetCount: Int
    /// Bytes of keys and values in them.
    public var dataStorage: Int64
}

/// An identity pool's usage.
public struct PoolUsage: Sendable, Hashable {
    /// The pool.
    public var identityPoolId: String
    /// How many sync sessions were opened.
    public var syncSessionsCount: Int64
    /// Bytes of keys and values of all its identities.
    public var dataStorage: Int64
    /// When it last changed.
    public var lastModifiedDate: Timestamp?
}

/// A pool's push-sync configuration.
public struct PushSyncConfiguration: Sendable, Hashable {
    /// The SNS platform application ARNs.
    public var applicationArns: [String]
    /// The role used to publish.
    public var roleArn: String?
    /// Creates a configuration.
    public init(applicationArns: [String], roleArn: String?) {
        self.applicationArns = applicationArns
        self.roleArn = roleArn
    }
}

/// A pool's Cognito streams configuration.
public struct StreamsConfiguration: Sendable, Hashable {
    /// The stream's name.
    public var streamName: String
    /// The role used to publish.
    public var roleArn: String?
    /// Whether updates are streamed.
    public var enabled: Bool
    /// Creates a configuration.
    public init(streamName: String, roleArn: String?, enabled: Bool) {
        self.streamName = streamName
        self.roleArn = roleArn
        self.enabled = enabled
    }
}

/// A pool's configuration.
public struct PoolConfiguration: Sendable, Hashable {
    /// The pool.
    public var identityPoolId: String
    /// Push sync, if configured.
    public var pushSync: PushSyncConfiguration?
    /// Streams, if configured.
    public var streams: StreamsConfiguration?
}

/// The state of a pool's last bulk publish.
public struct BulkPublishDetails: Sendable, Hashable {
    /// The pool.
    public var identityPoolId: String
    /// `NOT_STARTED`, `IN_PROGRESS`, `FAILED` or `SUCCEEDED`.
    public var status: String
    /// When it started.
    public var startTime: Timestamp?
    /// When it ended.
    public var completeTime: Timestamp?
    /// Why it failed.
    public var failureMessage: String?
}

/// One record sent to a pool's stream.
public struct DatasetStreamRecord: Sendable, Hashable {
    /// The pool.
    public var identityPoolId: String
    /// The identity.
    public var identityId: String
    /// The dataset.
    public var datasetName: String
    /// The record (no value for a removed key).
    public var record: RemoteDatasetRecord
}

/// Where Cognito streams go: the server's stand-in for a Kinesis stream.
public protocol DatasetStreamSink: Sendable {
    /// Appends records to the named stream.
    func publish(stream: String, records: [DatasetStreamRecord]) async throws
}

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
