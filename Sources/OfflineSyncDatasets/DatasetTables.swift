import OfflineSync

/// The two tables datasets live in on the device, under the reserved prefix, each declared
/// once: its row, its columns (the coding keys) and its schema.
enum DatasetTables {
    /// `__datasets`: one row per dataset of an identity, keyed by ``datasetId(identity:name:)``.
    struct DatasetRow: StoredRow {
        static let table = "__datasets"
        enum CodingKeys: String, CodingKey {
            case id, identity, name, lastSyncCount, deletedLocally, created, lastModified, deletePending, mergedFrom
        }

        var id: String
        var identity: String
        var name: String
        /// The remote sync count the local records were last brought up to (0: never synchronized).
        var lastSyncCount: Int64
        /// Deleted on this device; the row stays until the deletion reaches the remote.
        var deletedLocally: Bool
        var created: Timestamp
        var lastModified: Timestamp
        /// The next synchronize deletes the remote dataset first.
        var deletePending: Bool
        /// For a dataset a merge of identities renamed, the name it had.
        var mergedFrom: String?

        /// A dataset never synchronized.
        init(identity: String, name: String, created: Timestamp, lastModified: Timestamp) {
            id = DatasetTables.datasetId(identity: identity, name: name)
            self.identity = identity
            self.name = name
            lastSyncCount = 0
            deletedLocally = false
            self.created = created
            self.lastModified = lastModified
            deletePending = false
        }

        static let schema = TableSchema(table, fields: [
            column(.identity, .string, indexed: true), column(.name, .string),
            column(.lastSyncCount, .int), column(.deletedLocally, .bool),
            column(.created, .date), column(.lastModified, .date), column(.deletePending, .bool),
            column(.mergedFrom, .string),
        ], undeclaredFields: .reject)

        /// The identity's datasets not deleted on this device.
        static func live(identity: String) -> QueryPredicate {
            field(.identity) == .string(identity) && field(.deletedLocally) == false
        }
    }

    /// `__dataset_records`: one row per key of a dataset, keyed by
    /// ``recordId(identity:dataset:key:)``; a removed key keeps its row without a value until
    /// the removal is synchronized.
    struct RecordRow: StoredRow {
        static let table = "__dataset_records"
        enum CodingKeys: String, CodingKey { case id, identity, dataset, key, value, syncCount, lastModified, modified }

        var id: String
        var identity: String
        var dataset: String
        var key: String
        var value: String?
        var syncCount: Int64
        var lastModified: Timestamp
        /// Changed on this device since the last synchronize.
        var modified: Bool

        init(_ record: DatasetRecord, identity: String, dataset: String) {
            id = DatasetTables.recordId(identity: identity, dataset: dataset, key: record.key)
            self.identity = identity
            self.dataset = dataset
            key = record.key
            value = record.value
            syncCount = record.syncCount
            lastModified = record.lastModified
            modified = record.isModified
        }

        static let schema = TableSchema(table, fields: [
            column(.identity, .string), column(.dataset, .string), column(.key, .string),
            column(.value, .string), column(.syncCount, .int), column(.lastModified, .date),
            column(.modified, .bool),
        ], indexes: [IndexDefinition([CodingKeys.identity.rawValue, CodingKeys.dataset.rawValue])], undeclaredFields: .reject)

        /// The rows of one dataset.
        static func of(identity: String, dataset: String) -> QueryPredicate {
            field(.identity) == .string(identity) && field(.dataset) == .string(dataset)
        }

        var datasetRecord: DatasetRecord {
            DatasetRecord(key: key, value: value, syncCount: syncCount, lastModified: lastModified, isModified: modified)
        }
    }

    static func define(in store: any LocalStore) async throws {
        try await store.defineTable(DatasetRow.schema)
        try await store.defineTable(RecordRow.schema)
    }

    static func datasetId(identity: String, name: String) -> String { CompositeKey.slashed(identity, last: name) }

    static func recordId(identity: String, dataset: String, key: String) -> String {
        CompositeKey.slashed(identity, dataset, last: key)
    }

    static func record(_ txn: any LocalReadTransaction, identity: String, dataset: String, key: String) throws -> DatasetRecord? {
        try RecordRow.find(txn, id: recordId(identity: identity, dataset: dataset, key: key))?.datasetRecord
    }

    /// Every key of the dataset, removed ones included, by key.
    static func records(_ txn: any LocalReadTransaction, identity: String, dataset: String) throws -> [DatasetRecord] {
        try RecordRow.all(txn, Query(RecordRow.of(identity: identity, dataset: dataset), order: [RecordRow.sorted(.key)]))
            .map(\.datasetRecord)
    }

    static func store(_ record: DatasetRecord, identity: String, dataset: String, txn: any LocalWriteTransaction) throws {
        try RecordRow(record, identity: identity, dataset: dataset).save(txn)
    }

    static func removeRecord(_ txn: any LocalWriteTransaction, identity: String, dataset: String, key: String) throws {
        try RecordRow.delete(txn, id: recordId(identity: identity, dataset: dataset, key: key))
    }

    /// Deletes every key of the dataset.
    static func removeRecords(_ txn: any LocalWriteTransaction, identity: String, dataset: String) throws {
        for record in try records(txn, identity: identity, dataset: dataset) {
            try removeRecord(txn, identity: identity, dataset: dataset, key: record.key)
        }
    }
}
