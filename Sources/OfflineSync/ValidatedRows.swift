/// Rows of one table, each checked against the table's schema as it was added and laid out
/// by it: every declared field's value at its position in ``TableSchema/fields``, the
/// undeclared fields the schema keeps beside them.
///
/// A store whose schema of the table lays rows out as ``schema`` does
/// (``TableSchema/hasSameLayout(as:)``) writes them with
/// ``LocalWriteTransaction/upsert(_:in:)-(ValidatedRows,_)`` without looking a field up or
/// checking a value again: the sync server builds a pushed batch's rows this way, placing its
/// own fields by position instead of adding them to each record's dictionary, so a row is
/// checked once on its way to the store instead of once by the server and once by the store.
///
/// Only the `append` methods add rows, and both check what they add: a value here has passed
/// ``TableSchema/validate(_:)`` against ``schema``.
public struct ValidatedRows: Sendable {
    /// One row's properties beside its fields.
    private struct Header: Sendable {
        var id: String
        var version: String?
        var updatedAt: Timestamp?
        var deleted: Bool
        /// Where the row's undeclared fields end in ``ValidatedRows/undeclared``.
        var undeclaredEnd: Int
    }

    /// The schema every row was checked against.
    public let schema: TableSchema
    private var headers: [Header] = []
    /// Every row's declared values, `schema.fields.count` per row, in row order (`.null` where
    /// a row has no value): one buffer for the batch, not an array per row.
    private var declared: [Value] = []
    private var undeclared: [(key: String, value: Value)] = []

    /// No rows yet, to be checked against `schema`.
    public init(schema: TableSchema) {
        self.schema = schema
    }

    /// How many rows there are.
    public var count: Int { headers.count }
    /// Whether there are none.
    public var isEmpty: Bool { headers.isEmpty }

    /// Row `index`.
    public subscript(index: Int) -> ValidatedRow {
        let header = headers[index]
        let width = schema.fields.count
        let undeclaredStart = index == 0 ? 0 : headers[index - 1].undeclaredEnd
        return ValidatedRow(id: header.id, version: header.version, updatedAt: header.updatedAt, deleted: header.deleted,
                            declared: declared[(index * width)..<((index + 1) * width)],
                            undeclared: undeclared[undeclaredStart..<header.undeclaredEnd])
    }

    /// The rows as records (a field whose value is `.null` is left out, as ``Record`` leaves it).
    public var records: [Record] {
        (0..<count).map { self[$0].record(in: schema) }
    }

    /// Adds `record`, checked as ``TableSchema/validate(_:)`` checks it. Throws what that
    /// throws, and then adds nothing.
    public mutating func append(_ record: Record) throws {
        try append(id: record.id, fields: record.fields, version: record.version, updatedAt: record.updatedAt,
                   deleted: record.deleted)
    }

    /// Adds the row with `id`, `fields` and, by position in ``TableSchema/fields``, the
    /// declared values `positioned` (one given there replaces a field of the same name in
    /// `fields`), all checked as ``TableSchema/validate(_:)`` checks a record (a positioned
    /// value must fit its field's type). Throws what that throws, a position outside the
    /// declared fields as ``SyncError/Code/schemaMismatch``, and then adds nothing.
    public mutating func append(id: String, fields: [String: Value], positioned: [(position: Int, value: Value)] = [],
                                version: String?, updatedAt: Timestamp?, deleted: Bool) throws {
        let width = schema.fields.count, start = declared.count, undeclaredStart = undeclared.count
        declared.append(contentsOf: repeatElement(.null, count: width))
        do {
            try schema.validate(id: id, fields: fields, declared: { declared[start + $0] = $1 },
                                undeclared: { if !$1.isNull { undeclared.append(($0, $1)) } })
            for (position, value) in positioned {
                guard schema.fields.indices.contains(position) else {
                    throw SyncError(.schemaMismatch, "table '\(schema.name)' declares no field at position \(position)")
                }
                try schema.validate(value, of: position)
                declared[start + position] = value
            }
        } catch {
            declared.removeSubrange(start...)
            undeclared.removeSubrange(undeclaredStart...)
            throw error
        }
        headers.append(Header(id: id, version: version, updatedAt: updatedAt, deleted: deleted,
                              undeclaredEnd: undeclared.count))
    }

    /// Removes the last row, if there is one.
    public mutating func removeLast() {
        guard headers.popLast() != nil else { return }
        declared.removeSubrange((declared.count - schema.fields.count)...)
        undeclared.removeSubrange((headers.last?.undeclaredEnd ?? 0)...)
    }

    /// Removes every row, keeping the buffers' capacity for the next ones.
    public mutating func removeAll(keepingCapacity: Bool = false) {
        headers.removeAll(keepingCapacity: keepingCapacity)
        declared.removeAll(keepingCapacity: keepingCapacity)
        undeclared.removeAll(keepingCapacity: keepingCapacity)
    }
}

/// One row of ``ValidatedRows``: a view of the batch's buffers, valid while the batch is.
public struct ValidatedRow: Sendable {
    /// The row's id.
    public let id: String
    /// The row's version.
    public let version: String?
    /// When the row last changed.
    public let updatedAt: Timestamp?
    /// Whether the row is a tombstone.
    public let deleted: Bool
    /// The declared fields' values by position in ``TableSchema/fields`` (`.null` where the
    /// row has none). A slice: its indices start where the row's do in the batch, so read it
    /// with `declared[declared.startIndex + position]` or by iterating.
    public let declared: ArraySlice<Value>
    /// The undeclared fields the schema keeps (distinct names, in no particular order).
    public let undeclared: ArraySlice<(key: String, value: Value)>

    /// The row as a record of `schema`'s table (the schema its batch was checked against).
    public func record(in schema: TableSchema) -> Record {
        var fields: [String: Value] = [:]
        fields.reserveCapacity(declared.count + undeclared.count)
        for (position, value) in zip(schema.fields.indices, declared) where !value.isNull {
            fields[schema.fields[position].name] = value
        }
        for (name, value) in undeclared { fields[name] = value }
        return Record(id: id, nonNullFields: fields, version: version, updatedAt: updatedAt, deleted: deleted)
    }
}
