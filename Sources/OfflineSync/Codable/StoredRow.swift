/// A row of a table the framework keeps for itself (the client's dataset tables, the
/// service's dataset, sequence and outcome tables, the server's signature ledger), declared
/// once: a `Codable` struct whose `CodingKeys` are the table's columns, read and written
/// through ``RecordDecoder`` and ``RecordEncoder``. Queries name columns through
/// ``field(_:)`` and ``sorted(_:ascending:)``, so a column's name is spelled only in its
/// `CodingKeys` case.
///
/// A row that does not decode (a column missing or of another kind) is
/// ``SyncError/Code/corrupted``, naming the table and the row's id but no value.
package protocol StoredRow: Codable, Sendable {
    /// The columns; a case's raw value is the field's name in the store, `id` the row's id.
    associatedtype CodingKeys: CodingKey & RawRepresentable where CodingKeys.RawValue == String
    /// The table's name (under the reserved prefix).
    static var table: String { get }
    /// The row's id.
    var id: String { get }
    /// The row as stored. The default encodes it with ``RecordEncoder``; a row written once
    /// per pushed operation spells its fields by hand, since `Codable`'s keyed containers cost
    /// more than the write itself (the push's profile).
    func record() throws -> Record
}

extension StoredRow {
    /// A column's field name, for code that reads or writes the row by hand.
    package static func name(_ column: CodingKeys) -> String { column.rawValue }

    /// A column in a query.
    package static func field(_ column: CodingKeys) -> Field { Field(column.rawValue) }

    /// A column as a sort key.
    package static func sorted(_ column: CodingKeys, ascending: Bool = true) -> SortKey {
        SortKey(column.rawValue, ascending: ascending)
    }

    /// A field definition for the table's schema.
    package static func column(_ column: CodingKeys, _ type: FieldType, indexed: Bool = false) -> FieldDefinition {
        FieldDefinition(column.rawValue, type, indexed: indexed)
    }

    /// Reads a stored row. Throws ``SyncError/Code/corrupted`` when it does not decode.
    package init(row: Record) throws {
        do {
            self = try RecordDecoder().decode(Self.self, from: row)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.corrupted, "row '\(row.id)' of \(Self.table) is unreadable\(Self.column(of: error))")
        }
    }

    /// The column a decoding error points at, for the message (never the value).
    private static func column(of error: any Error) -> String {
        let path: [any CodingKey]
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?: path = context.codingPath + [key]
        case .valueNotFound(_, let context)?, .typeMismatch(_, let context)?, .dataCorrupted(let context)?: path = context.codingPath
        default: path = []
        }
        return path.first.map { ": column '\($0.stringValue)'" } ?? ""
    }

    /// The row as stored. Absent optionals are absent fields, which read as null.
    package func record() throws -> Record { try RecordEncoder().encode(self) }

    /// The row with `id`, if there is one.
    package static func find(_ txn: any LocalReadTransaction, id: String) throws -> Self? {
        try txn.record(in: table, id: id).map { try Self(row: $0) }
    }

    /// The rows `query` selects, in its order.
    package static func all(_ txn: any LocalReadTransaction, _ query: Query) throws -> [Self] {
        try txn.records(in: table, matching: query).map { try Self(row: $0) }
    }

    /// The first row `query` selects.
    package static func first(_ txn: any LocalReadTransaction, _ query: Query) throws -> Self? {
        try txn.first(in: table, matching: query).map { try Self(row: $0) }
    }

    /// How many rows match `predicate`.
    package static func count(_ txn: any LocalReadTransaction, _ predicate: QueryPredicate) throws -> Int {
        try txn.count(in: table, matching: predicate)
    }

    /// Inserts or replaces the row.
    package func save(_ txn: any LocalWriteTransaction) throws { try txn.upsert(record(), in: Self.table) }

    /// Deletes the row with `id`; returns whether there was one.
    @discardableResult
    package static func delete(_ txn: any LocalWriteTransaction, id: String) throws -> Bool {
        try txn.delete(id: id, in: table)
    }
}
