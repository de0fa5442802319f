/// Rows a transaction has decided to write but not yet written, written table by table with
/// one ``LocalWriteTransaction/upsert(_:in:)-([Record],_)`` (or, for rows added checked,
/// ``LocalWriteTransaction/upsert(_:in:)-(ValidatedRows,_)``) call per ``chunk`` rows, and the
/// rest at ``flush(_:)``.
///
/// Holding a row back is only safe while nothing reads it from the store: the user writes
/// out (``flush(_:)``) before any read that could see a held row, and at its end. The sync
/// server holds a pushed batch's rows, their group-log entries and outcomes this way; the client holds the
/// local copies a push's settle replaces with the remote's. On SQLite that turns a batch's
/// thousands of single-row statements into a few dozen multi-row ones.
package struct PendingWrites {
    /// Rows of one table written together. Bounded, rather than the whole batch, so a row is
    /// written while it is still in the processor's cache and no more than this many rows per
    /// table are held; 64 is also the most rows one SQLite statement writes.
    package static let chunk = 64

    /// One table's held rows: records, or rows checked against its schema. A table holds one
    /// kind at a time (adding the other kind writes the held ones first), so the rows are
    /// written in the order they were added.
    private struct Held {
        let name: String
        var records: [Record] = []
        var checked: ValidatedRows?

        var count: Int { records.count + (checked?.count ?? 0) }

        mutating func write(_ txn: any LocalWriteTransaction) throws {
            if !records.isEmpty {
                try txn.upsert(records, in: name)
                records.removeAll(keepingCapacity: true)
            }
            // Not bound to a local first: a second reference to the rows' buffers would make
            // the removal below copy them instead of keeping their capacity.
            if checked?.isEmpty == false {
                try txn.upsert(checked!, in: name)
                checked!.removeAll(keepingCapacity: true)
            }
        }
    }

    /// The tables in the order they were first written (an id written twice is held twice,
    /// the later last).
    private var tables: [Held] = []
    /// Each table's position in ``tables``: by exact bytes, as the store tells names apart.
    private var positions: [ExactString: Int] = [:]

    package init() {}

    /// Holds `row` for `table`; writes the table's held rows when they make a ``chunk``.
    package mutating func add(_ row: Record, in table: String, _ txn: any LocalWriteTransaction) throws {
        let position = self.position(of: table)
        if tables[position].checked?.isEmpty == false { try tables[position].write(txn) }
        if tables[position].records.capacity == 0 { tables[position].records.reserveCapacity(Self.chunk) }
        tables[position].records.append(row)
        if tables[position].records.count >= Self.chunk { try tables[position].write(txn) }
    }

    /// Writes `table`'s held rows when the next checked add would (they make a ``chunk``, or
    /// are records): called first, it keeps the store's failure to write them apart from the
    /// check's refusal of the added row.
    package mutating func makeRoom(in table: String, _ txn: any LocalWriteTransaction) throws {
        let position = self.position(of: table)
        if !tables[position].records.isEmpty || tables[position].count >= Self.chunk { try tables[position].write(txn) }
    }

    /// Holds for `table` the row ``ValidatedRows/append(id:fields:positioned:version:updatedAt:deleted:)``
    /// checks against `schema` (the table's schema in the store, the same on every call for
    /// `table`), and throws what that throws, holding nothing new. The table's held rows are
    /// written first when they make a ``chunk`` (``makeRoom(in:_:)``, whose failure a caller
    /// that refuses the row on a check's error should keep apart by calling it first), so
    /// until the next call the row is the last held and ``removeLast(in:)`` can take it back.
    package mutating func add(id: String, fields: [String: Value], positioned: [(position: Int, value: Value)],
                              version: String?, updatedAt: Timestamp?, deleted: Bool,
                              in table: String, schema: TableSchema, _ txn: any LocalWriteTransaction) throws {
        try makeRoom(in: table, txn)
        let position = self.position(of: table)
        if tables[position].checked == nil { tables[position].checked = ValidatedRows(schema: schema) }
        assert(tables[position].checked!.schema.hasSameLayout(as: schema), "table '\(table)' held with two schemas")
        try tables[position].checked!.append(id: id, fields: fields, positioned: positioned, version: version,
                                             updatedAt: updatedAt, deleted: deleted)
    }

    /// The last row the checked ``add(id:fields:positioned:version:updatedAt:deleted:in:schema:_:)``
    /// held for `table`, as a record; `nil` when it holds none.
    package func lastChecked(in table: String) -> Record? {
        guard let position = positions[ExactString(table)], let rows = tables[position].checked, !rows.isEmpty else { return nil }
        return rows[rows.count - 1].record(in: rows.schema)
    }

    /// Takes back the last row the checked ``add(id:fields:positioned:version:updatedAt:deleted:in:schema:_:)``
    /// held for `table`, if it is still held.
    package mutating func removeLast(in table: String) {
        guard let position = positions[ExactString(table)] else { return }
        tables[position].checked?.removeLast()
    }

    /// Whether rows of `table` are held, not yet written.
    package func holdsRows(in table: String) -> Bool {
        guard let position = positions[ExactString(table)] else { return false }
        return tables[position].count > 0
    }

    /// Writes every held row.
    package mutating func flush(_ txn: any LocalWriteTransaction) throws {
        for position in tables.indices where tables[position].count > 0 {
            try tables[position].write(txn)
        }
    }

    /// The position of `table` in ``tables``, added if it is new.
    private mutating func position(of table: String) -> Int {
        let key = ExactString(table)
        if let known = positions[key] { return known }
        positions[key] = tables.count
        tables.append(Held(name: table))
        return tables.count - 1
    }
}
