import OfflineSync

/// How the SQL adapters lay out an app table: the four system properties and `extra` in
/// fixed columns (``systemColumns``), then one column per declared field in schema order.
/// Undeclared fields are kept together in `extra`, encoded with ``ValueCodec``, where SQL
/// cannot see them: a query on one is answered by the reference evaluator.
///
/// The layout knows where each field lives and splits a record's fields between the
/// declared columns and `extra`; the adapter chooses each column's name and SQL type.
public struct SQLTableLayout: Sendable {
    /// The system columns, quoted, in the order rows are selected and written: `id`,
    /// `version`, `updatedAt`, `deleted`, `extra`.
    public static let systemColumns = ["\"id\"", "\"version\"", "\"updatedAt\"", "\"deleted\"", "\"extra\""]
    /// The position of the first declared field's column among a row's columns.
    public static let firstFieldColumn = systemColumns.count

    /// The table's schema.
    public let schema: TableSchema

    /// The layout of `schema`'s table.
    public init(_ schema: TableSchema) {
        self.schema = schema
    }

    /// The position among the declared fields of the field with exactly this name (names
    /// that differ only in Unicode normalization are different fields).
    public func position(of field: String) -> Int? {
        schema.position(ofField: field)
    }

    /// The column behind a system property or a declared field; `nil` for an undeclared
    /// field. `fieldColumn` names a declared field's column from its position.
    public func column(_ field: String, fieldColumn: (Int) -> String) -> SQLColumn? {
        switch field {
        case SystemField.id: return SQLColumn(sql: "\"id\"", type: .string)
        case SystemField.version: return SQLColumn(sql: "\"version\"", type: .string)
        case SystemField.updatedAt: return SQLColumn(sql: "\"updatedAt\"", type: .date)
        case SystemField.deleted: return SQLColumn(sql: "\"deleted\"", type: .bool)
        default:
            guard let position = position(of: field) else { return nil }
            return SQLColumn(sql: fieldColumn(position), type: schema.fields[position].type)
        }
    }

    /// A record's fields split for writing: the declared fields' values by position
    /// (`.null` where the record has none) and the `extra` column's bytes (`nil` when every
    /// field is declared).
    public func split(_ fields: [String: Value]) -> (declared: [Value], extra: [UInt8]?) {
        var declared = [Value](repeating: .null, count: schema.fields.count)
        let extra = split(fields) { position, value in declared[position] = value }
        return (declared, extra)
    }

    /// The record checked against the schema (`TableSchema.validate(_:)`, throwing what it
    /// throws) and split as ``split(_:declared:)`` splits it, in one pass over its fields.
    public func validateAndSplit(_ record: Record, declared: (Int, Value) -> Void) throws -> [UInt8]? {
        // The undeclared fields in a list, as ``split(_:declared:)`` gathers them.
        var extra: [(key: String, value: Value)] = []
        try schema.validate(record, declared: declared) { name, value in
            if extra.isEmpty { extra.reserveCapacity(record.fields.count) }
            extra.append((name, value))
        }
        return extra.isEmpty ? nil : ValueCodec.encodeObject(distinct: extra)
    }

    /// ``split(_:)`` without the array of declared values: `declared` gets each declared
    /// field the record has (position, value), in no particular order, and the `extra`
    /// column's bytes are returned. For an adapter that writes the values straight into its
    /// own row of parameters: allocating the array per row (and fetching its generic
    /// metadata) was a fifth of the split in `perf` (local-writes-sqlite).
    @inlinable
    public func split(_ fields: [String: Value], declared: (Int, Value) -> Void) -> [UInt8]? {
        // The undeclared fields are gathered in a list, not a dictionary: their names are a
        // dictionary's keys already, so they are distinct, and nothing looks them up.
        var extra: [(key: String, value: Value)] = []
        for (name, value) in fields {
            if let position = position(of: name) {
                declared(position, value)
            } else {
                if extra.isEmpty { extra.reserveCapacity(fields.count) }
                extra.append((name, value))
            }
        }
        return extra.isEmpty ? nil : ValueCodec.encodeObject(distinct: extra)
    }
}
