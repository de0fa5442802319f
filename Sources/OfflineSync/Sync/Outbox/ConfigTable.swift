/// `__config` (Azure's `MS_TableConfig`): per-table settings as strings, keyed by table and
/// key — pull cursors per query id, dataset sync counts, schema versions.
enum ConfigTable {
    static let name = "__config"

    /// The columns; a column's raw value is its field name in the store.
    enum Column: String, CaseIterable {
        case table, key, keyType, value

        /// The column in a query.
        var field: Field { Field(rawValue) }
    }

    /// What a row holds, in its `keyType` column.
    enum KeyType: String {
        /// A pull cursor; the key is ``cursorKey(_:)`` of the query id.
        case cursor
    }

    static let schema = TableSchema(name, fields: [
        FieldDefinition(Column.table.rawValue, .string, indexed: true),
        FieldDefinition(Column.key.rawValue, .string),
        FieldDefinition(Column.keyType.rawValue, .string),
        FieldDefinition(Column.value.rawValue, .string),
    ], undeclaredFields: .reject)

    /// The id of a row: unambiguous for any table name and key.
    static func id(table: String, key: String) -> String { CompositeKey.slashed(table, last: key) }

    /// The key of the pull cursor of a query id.
    static func cursorKey(_ queryId: String) -> String { "cursor:" + queryId }

    /// The rows of `table` holding pull cursors.
    static func cursors(of table: String) -> QueryPredicate {
        Column.table.field == .string(table) && Column.keyType.field == .string(KeyType.cursor.rawValue)
    }

    static func value(_ txn: any LocalReadTransaction, table: String, key: String) throws -> String? {
        try txn.record(in: name, id: id(table: table, key: key))?[Column.value.rawValue].stringValue
    }

    /// Writes (or with `nil`, removes) a value.
    static func setValue(_ txn: any LocalWriteTransaction, table: String, key: String, keyType: String, value: String?) throws {
        let id = id(table: table, key: key)
        guard let value else { try txn.delete(id: id, in: name); return }
        try txn.upsert(Record(id: id, fields: [
            Column.table.rawValue: .string(table), Column.key.rawValue: .string(key),
            Column.keyType.rawValue: .string(keyType), Column.value.rawValue: .string(value),
        ]), in: name)
    }
}
