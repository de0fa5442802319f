/// Rows a transaction has decided to write but not yet written, written table by table with
/// one ``LocalWriteTransaction/upsert(_:in:)-([Record],_)`` call per ``chunk`` rows, and the
/// rest at ``flush(_:)``.
///
/// Holding a row back is only safe while nothing reads it from the store: the user writes
/// out (``flush(_:)``) before any read that could see a held row, and at its end. The sync
/// server holds a pushed batch's owner-only rows and outcomes this way; the client holds the
/// local copies a push's settle replaces with the remote's. On SQLite that turns a batch's
/// thousands of single-row statements into a few dozen multi-row ones.
package struct PendingWrites {
    /// Rows of one table written together. Bounded, rather than the whole batch, so a row is
    /// written while it is still in the processor's cache and no more than this many rows per
    /// table are held; 64 is also the most rows one SQLite statement writes.
    package static let chunk = 64

    /// The tables in the order they were first written, each with its held rows in order (an
    /// id written twice is held twice, the later last).
    private var tables: [(name: String, rows: [Record])] = []
    /// Each table's position in ``tables``: by exact bytes, as the store tells names apart.
    private var positions: [ExactString: Int] = [:]

    package init() {}

    /// Holds `row` for `table`; writes the table's held rows when they make a ``chunk``.
    package mutating func add(_ row: Record, in table: String, _ txn: any LocalWriteTransaction) throws {
        let key = ExactString(table)
        let position: Int
        if let known = positions[key] {
            position = known
        } else {
            position = tables.count
            positions[key] = position
            tables.append((table, []))
            tables[position].rows.reserveCapacity(Self.chunk)
        }
        tables[position].rows.append(row)
        if tables[position].rows.count >= Self.chunk {
            try txn.upsert(tables[position].rows, in: table)
            tables[position].rows.removeAll(keepingCapacity: true)
        }
    }

    /// Writes every held row.
    package mutating func flush(_ txn: any LocalWriteTransaction) throws {
        for position in tables.indices where !tables[position].rows.isEmpty {
            try txn.upsert(tables[position].rows, in: tables[position].name)
            tables[position].rows.removeAll(keepingCapacity: true)
        }
    }
}
