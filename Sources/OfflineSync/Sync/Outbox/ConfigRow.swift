/// A row of `__config` (Azure's `MS_TableConfig`): one per-table setting as a string, keyed
/// by table and key — pull cursors per query id, dataset sync counts, schema versions.
struct ConfigRow: StoredRow {
    static let table = "__config"
    enum CodingKeys: String, CodingKey { case id, table, key, keyType, value }

    /// What a row holds, in its `keyType` column.
    enum KeyType: String {
        /// A pull cursor; the key is ``cursorKey(_:)`` of the query id.
        case cursor
        /// When a pull of the table last reached its end (milliseconds since 1970); the key
        /// is ``pulledAtKey``.
        case pulledAt
        /// The push's in-flight marker (``InFlight``): one row, under the outbox's table name.
        case inFlight
        /// A resent view being marked for a sweep (``SyncContext/sweepKey(_:)``): the remote
        /// reset the table's cursor, so rows it does not send again leave when the pull ends.
        case sweep
    }

    var id: String
    var table: String
    var key: String
    var keyType: String
    var value: String

    static let schema = TableSchema(table, fields: [
        column(.table, .string, indexed: true),
        column(.key, .string),
        column(.keyType, .string),
        column(.value, .string),
    ], undeclaredFields: .reject)

    /// The id of a row: unambiguous for any table name and key.
    static func id(table: String, key: String) -> String { CompositeKey.slashed(table, last: key) }

    /// The key of the pull cursor of a query id.
    static func cursorKey(_ queryId: String) -> String { "cursor:" + queryId }

    /// The key of the time a pull of the table last reached its end.
    static let pulledAtKey = "pulledAt"

    /// The rows of `table` holding pull cursors, and notes of sweeps under way (a purge
    /// drops both: the next pull starts over).
    static func cursors(of table: String) -> QueryPredicate {
        field(.table) == .string(table) && field(.keyType).isIn([.string(KeyType.cursor.rawValue), .string(KeyType.sweep.rawValue)])
    }

    /// When each table's last pull reached its end (tables never pulled, or purged since, are absent).
    static func pulledAtTimes(_ txn: any LocalReadTransaction) throws -> [String: Timestamp] {
        var times: [String: Timestamp] = [:]
        for row in try all(txn, Query(field(.keyType) == .string(KeyType.pulledAt.rawValue))) {
            if let milliseconds = Int64(row.value) { times[row.table] = Timestamp(millisecondsSince1970: milliseconds) }
        }
        return times
    }

    static func value(_ txn: any LocalReadTransaction, table: String, key: String) throws -> String? {
        try find(txn, id: id(table: table, key: key))?.value
    }

    /// Writes (or with `nil`, removes) a value.
    static func setValue(_ txn: any LocalWriteTransaction, table: String, key: String, keyType: String, value: String?) throws {
        let id = id(table: table, key: key)
        guard let value else { try delete(txn, id: id); return }
        try ConfigRow(id: id, table: table, key: key, keyType: keyType, value: value).save(txn)
    }
}
