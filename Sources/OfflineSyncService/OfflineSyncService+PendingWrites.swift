import OfflineSync

extension OfflineSyncService {
    /// The rows a pushed batch has decided to write but not yet written — owner-only rows and
    /// stored outcomes —, written table by table with one
    /// ``LocalWriteTransaction/upsert(_:in:)-([Record],_)`` call per ``chunk`` rows of a
    /// table, and the rest when the batch ends or before anything reads the store directly.
    ///
    /// Safe to hold because, until then, the batch reads those rows only through
    /// ``BatchReads``, which learns each write as it is decided. An operation that reads the
    /// store itself — every shared table's (its rules read membership and logs, whichever
    /// tables those are) and one whose row the batch did not read — is preceded by
    /// ``flush(_:)``, so it sees every earlier operation's writes. On SQLite this turns a
    /// batch's 2,000 single-row statements into a few dozen multi-row ones.
    struct PendingWrites {
        /// Rows of one table written together. Bounded, rather than the whole batch, so a
        /// row is written while it is still in the processor's cache and a batch holds no more
        /// than this many rows per table beyond what it read; 64 is also the most rows one
        /// SQLite statement writes (``OfflineSyncSQLite``'s `rowsPerUpsert`).
        static let chunk = 64

        /// The tables in the order they were first written, each with its rows in order (an
        /// id written twice is written twice, the later last).
        private var tables: [(name: String, rows: [Record])] = []
        /// Each table's position in ``tables``: by exact bytes, as the store tells names apart.
        private var positions: [ExactString: Int] = [:]

        /// Notes `row` for `table`; writes the table's noted rows when they make a ``chunk``.
        mutating func add(_ row: Record, in table: String, _ txn: any LocalWriteTransaction) throws {
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

        /// Writes every noted row.
        mutating func flush(_ txn: any LocalWriteTransaction) throws {
            for position in tables.indices where !tables[position].rows.isEmpty {
                try txn.upsert(tables[position].rows, in: tables[position].name)
                tables[position].rows.removeAll(keepingCapacity: true)
            }
        }
    }
}
