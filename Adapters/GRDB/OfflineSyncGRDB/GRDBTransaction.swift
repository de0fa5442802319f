#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit

/// A read transaction of a ``GRDBStore``, lent to one closure on the GRDB connection's thread.
///
/// A `__`-prefixed table (the sync engine's bookkeeping) is read through the SQLite adapter's
/// layout (``SQLiteEmbeddedTables``); any other table is one of the app's typed tables
/// (``GRDBTypedTable``), read with plain SQL and its side table.
class GRDBReadTransaction: LocalReadTransaction {
    let sql: SQLiteEmbeddedTables
    private let system: any LocalReadTransaction
    /// The app's synced tables, by exact name, as the catalog held them when the transaction began.
    private(set) var typed: [ExactString: GRDBTypedTable]
    private let owner = pthread_self()
    private var isOpen = true
    let statistics: GRDBQueryStatistics
    /// The columns this transaction read by id and could not read (a value its field's type
    /// cannot read, which the app wrote and whose write was refused), by row: each one's
    /// position and what it holds. The record read leaves the field out; a write of the row
    /// without the field (a push's settle writes back the record it read, with the server's
    /// version) keeps the column as it is instead of emptying it.
    var unreadableColumns: [RowKey: [Int: SQLiteValue]] = [:]

    /// A row of an app table, by the exact bytes of its table's name and its id.
    struct RowKey: Hashable {
        let table: ExactString
        let id: ExactString

        init(_ table: GRDBTypedTable, _ id: String) {
            self.table = ExactString(table.schema.name)
            self.id = ExactString(id)
        }
    }

    init(sql: SQLiteEmbeddedTables, system: any LocalReadTransaction, typed: [ExactString: GRDBTypedTable],
         statistics: GRDBQueryStatistics) {
        self.sql = sql
        self.system = system
        self.typed = typed
        self.statistics = statistics
    }

    /// Ends the transaction: later calls throw ``SyncError/Code/storeClosed``.
    func end() { isOpen = false }

    func checkOpen() throws {
        guard isOpen, pthread_equal(pthread_self(), owner) != 0 else {
            throw SyncError(.storeClosed, "the transaction has ended (it was used outside its closure)")
        }
    }

    /// Whether `name` is one of the sync engine's tables, kept in the SQLite adapter's layout.
    static func isSystem(_ name: String) -> Bool { name.utf8.starts(with: "__".utf8) }

    /// The app table `name`, or `nil` for a system table; ``SyncError/Code/tableNotDefined``
    /// for an app table the catalog lacks.
    func typedTable(_ name: String) throws -> GRDBTypedTable? {
        try checkOpen()
        if Self.isSystem(name) { return nil }
        guard let table = typed[ExactString(name)] else {
            throw SyncError(.tableNotDefined, "table '\(name)' is not defined")
        }
        return table
    }

    /// Replaces the catalog snapshot after a definition changed it.
    func setTyped(_ table: GRDBTypedTable) {
        typed[ExactString(table.schema.name)] = table
    }

    func schema(of table: String) throws -> TableSchema {
        if let typed = try typedTable(table) { return typed.schema }
        return try system.schema(of: table)
    }

    func tables() throws -> [TableSchema] {
        try checkOpen()
        return (try system.tables() + typed.values.map(\.schema)).sorted { Value.utf8Less($0.name, $1.name) }
    }

    /// The row with this id; a column it cannot read is left out of the record (and noted
    /// in ``unreadableColumns``).
    func record(in table: String, id: String) throws -> Record? {
        guard let typed = try typedTable(table) else { return try system.record(in: table, id: id) }
        var found: Record?
        try sql.rows(typed.selectFrom + " WHERE t.\"id\" = ?1", [.text(id)]) { found = try readable(typed, $0) }
        return found
    }

    /// The record of a row read by id, without the fields whose columns it cannot read; those
    /// are noted for the writes of this transaction.
    private func readable(_ table: GRDBTypedTable, _ row: [SQLiteValue]) throws -> Record {
        var held: [Int: SQLiteValue] = [:]
        let record = try table.decode(row) { position, _ in held[position] = row[position + 1] }
        if !held.isEmpty || !unreadableColumns.isEmpty {
            unreadableColumns[RowKey(table, record.id)] = held.isEmpty ? nil : held
        }
        return record
    }

    /// The reads in order; the look-ups by id of one table made several to a statement
    /// (``GroupedReads``): up to ``GRDBTypedTable/rowsPerStatement`` for an app table (a pull
    /// reads a page's ids this way), the SQLite adapter's batching for a bookkeeping table.
    func read(_ reads: [LocalRead]) throws -> [[Record]] {
        if reads.count <= 2 { return try readOneByOne(reads) }
        return try GroupedReads.answer(reads, records: { try records(in: $0, matching: $1) }) { name, ids in
            guard let typed = try typedTable(name) else {
                return try system.read(ids.map { .record(table: name, id: $0) }).flatMap { $0 }
            }
            var found: [Record] = []
            found.reserveCapacity(ids.count)
            for start in stride(from: 0, to: ids.count, by: GRDBTypedTable.rowsPerStatement) {
                let chunk = ids[start..<min(start + GRDBTypedTable.rowsPerStatement, ids.count)]
                let list = (1...chunk.count).map { "?\($0)" }.joined(separator: ", ")
                try sql.rows(typed.selectFrom + " WHERE t.\"id\" IN (\(list))", chunk.map { .text($0) }) { row in
                    found.append(try readable(typed, row))
                }
            }
            return found
        }
    }

    /// Answered a row at a time (``GRDBQuery``): SQL judges what it can exactly, the
    /// evaluator the rest, and only the rows the answer needs are kept. A row the adapter
    /// cannot read is left out.
    func records(in table: String, matching query: Query) throws -> [Record] {
        guard let typed = try typedTable(table) else { return try system.records(in: table, matching: query) }
        try query.validate(against: typed.schema)
        return try GRDBQuery(table: typed, sql: sql, statistics: statistics).records(query)
    }

    /// A whole table's count is SQL's `count(*)` less the rows the adapter cannot read, which
    /// ``records(in:matching:)`` and every other count leave out; any other count reads the
    /// matching rows and keeps none.
    func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
        guard let typed = try typedTable(table) else { return try system.count(in: table, matching: predicate) }
        if case .all = predicate {
            guard case .int(let count)? = try sql.scalar("SELECT count(*) FROM \(typed.sqlName)") else { return 0 }
            return Int(count) - (try unreadableRows(of: typed))
        }
        try Query(predicate).validate(against: typed.schema)
        return try GRDBQuery(table: typed, sql: sql, statistics: statistics).count(predicate)
    }

    /// How many rows of `table` the adapter cannot read. Only the app writes such a row, and
    /// the capture refuses each such write and notes the row in `__osync_refused` until a
    /// write mends it (``GRDBCapture``): so only the noted rows are read, and the answer is
    /// exact for every row the capture saw. (A row the app wrote while the table's capture
    /// triggers were gone, dropped by its own migration and not yet put back, is neither
    /// queued nor known to be unreadable.)
    private func unreadableRows(of table: GRDBTypedTable) throws -> Int {
        var unreadable = 0
        try sql.rows(table.selectFrom + " WHERE t.\"id\" IN (SELECT \"id\" FROM \(GRDBName.refused) WHERE \"tbl\" = ?1)",
                     [.int(table.number)]) { row in
            do {
                _ = try table.decode(row)
            } catch is SyncError {
                unreadable += 1
            }
        }
        return unreadable
    }
}

/// A write transaction of a ``GRDBStore``: the app-table writes go to the app's columns and
/// the side table, with the capture triggers silenced (the store holds a row in
/// `__osync_applying` for the transaction's length), so nothing the engine writes is queued
/// again.
final class GRDBWriteTransaction: GRDBReadTransaction, LocalWriteTransaction {
    private let systemWriter: any LocalWriteTransaction
    /// The app tables written, by name: GRDB's observations of them are told at the end.
    private(set) var touched: Set<String> = []

    init(sql: SQLiteEmbeddedTables, system: any LocalWriteTransaction, typed: [ExactString: GRDBTypedTable],
         statistics: GRDBQueryStatistics) {
        systemWriter = system
        super.init(sql: sql, system: system, typed: typed, statistics: statistics)
    }

    /// `record`'s bindings, keeping each column this transaction could not read
    /// (``unreadableColumns``) that the record has no value for.
    private func bindings(for record: Record, in table: GRDBTypedTable) throws -> (row: [SQLiteValue], meta: [SQLiteValue]) {
        let bound = try table.bindings(for: record)
        var row = bound.row
        if !unreadableColumns.isEmpty {
            let key = RowKey(table, record.id)
            if let held = unreadableColumns[key] {
                var still: [Int: SQLiteValue] = [:]
                for (position, stored) in held where row[position + 1] == .null {
                    row[position + 1] = stored
                    still[position] = stored
                }
                unreadableColumns[key] = still.isEmpty ? nil : still
            }
        }
        return (row, bound.meta)
    }

    func upsert(_ record: Record, in table: String) throws {
        guard let typed = try typedTable(table) else { return try systemWriter.upsert(record, in: table) }
        let (row, meta) = try bindings(for: record, in: typed)
        try sql.execute(typed.upsertSQL, row)
        try sql.execute(typed.metaUpsertSQL, meta)
        touched.insert(typed.schema.name)
    }

    /// Up to ``GRDBTypedTable/rowsPerStatement`` rows to a statement (a pull's page), each
    /// with its side row; a record whose id an earlier one has replaces it.
    func upsert(_ records: [Record], in table: String) throws {
        guard let typed = try typedTable(table) else { return try systemWriter.upsert(records, in: table) }
        // The last record of each id, so one statement never names an id twice.
        var last: [ExactString: Int] = [:]
        for (index, record) in records.enumerated() { last[ExactString(record.id)] = index }
        let kept = records.indices.filter { last[ExactString(records[$0].id)] == $0 }.map { records[$0] }
        for start in stride(from: 0, to: kept.count, by: GRDBTypedTable.rowsPerStatement) {
            let chunk = kept[start..<min(start + GRDBTypedTable.rowsPerStatement, kept.count)]
            var rows: [SQLiteValue] = [], metas: [SQLiteValue] = []
            for record in chunk {
                let (row, meta) = try bindings(for: record, in: typed)
                rows += row
                metas += meta
            }
            try sql.execute(typed.upsertSQL(rows: chunk.count), rows)
            try sql.execute(typed.metaUpsertSQL(rows: chunk.count), metas)
        }
        if !kept.isEmpty { touched.insert(typed.schema.name) }
    }

    @discardableResult
    func delete(id: String, in table: String) throws -> Bool {
        guard let typed = try typedTable(table) else { return try systemWriter.delete(id: id, in: table) }
        let existed = try sql.execute("DELETE FROM \(typed.sqlName) WHERE \"id\" = ?1", [.text(id)]) > 0
        try sql.execute("DELETE FROM \(typed.metaName) WHERE \"id\" = ?1", [.text(id)])
        if !unreadableColumns.isEmpty { unreadableColumns[RowKey(typed, id)] = nil }
        if existed { touched.insert(typed.schema.name) }
        return existed
    }

    @discardableResult
    func delete(ids: [String], in table: String) throws -> Int {
        guard try typedTable(table) != nil else { return try systemWriter.delete(ids: ids, in: table) }
        var existed = 0
        for id in Set(ids.map(ExactString.init)) where try delete(id: id.value, in: table) { existed += 1 }
        return existed
    }

    func insert(_ record: Record, in table: String) throws -> LocalInsertOutcome {
        guard let typed = try typedTable(table) else { return try systemWriter.insert(record, in: table) }
        let (row, meta) = try bindings(for: record, in: typed)
        guard try sql.execute(typed.insertSQL, row) > 0 else { return .idExists }
        try sql.execute(typed.metaUpsertSQL, meta)
        touched.insert(typed.schema.name)
        return .inserted
    }
}
