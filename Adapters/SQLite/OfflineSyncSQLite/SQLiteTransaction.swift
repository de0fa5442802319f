#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OfflineSync
import OfflineSyncStoreKit

/// A read transaction lent to a ``SQLiteStore/read(_:)`` closure. It runs on its connection's
/// queue; once the closure returns (or from any other thread) every call throws
/// ``SyncError/Code/storeClosed``.
class SQLiteReadTransaction: LocalReadTransaction {
    private var connection: SQLiteConnection?
    /// The thread the transaction was made on: the closure it is lent to runs there from start
    /// to end (it is synchronous, inside one block of the connection's serial queue), so no
    /// other thread may use it. Comparing thread ids costs a register read; asking Dispatch
    /// for a queue-specific value cost 1.6% of a get by id (`perf`, local-reads-get-in-read).
    /// A call from inside a `sync` block of another queue runs on this thread while the
    /// closure waits, so it is still one caller at a time, and is allowed.
    private let owner = pthread_self()
    private var tableMemo: [ExactString: SQLiteTable] = [:]
    /// The table the last call named: a transaction that writes a page of rows names the same
    /// table on every row, and comparing its bytes is cheaper than hashing the name.
    private var lastTable: (name: ExactString, info: SQLiteTable)?

    init(connection: SQLiteConnection) {
        self.connection = connection
    }

    /// Ends the transaction: later calls throw ``SyncError/Code/storeClosed``.
    func end() {
        connection = nil
        tableMemo = [:]
        lastTable = nil
    }

    /// The connection, while the transaction is open and the caller is on its thread.
    func live() throws -> SQLiteConnection {
        // Checked first, from any thread, without touching mutable state: only the owner
        // thread may go on to read `connection`.
        guard pthread_equal(pthread_self(), owner) != 0, let connection else {
            throw SyncError(.storeClosed, "the transaction has ended (it was used outside its closure)")
        }
        return connection
    }

    /// The table's mapping, read from the catalog once per transaction.
    func table(_ name: String) throws -> SQLiteTable {
        try table(name, on: try live())
    }

    /// ``table(_:)`` for a caller that already holds the live connection.
    func table(_ name: String, on connection: SQLiteConnection) throws -> SQLiteTable {
        let key = ExactString(name)
        if let last = lastTable, last.name == key { return last.info }
        if let info = tableMemo[key] {
            lastTable = (key, info)
            return info
        }
        let row = try connection.withStatement(
            "SELECT \"num\", \"schema\" FROM \(SQLiteName.catalog) WHERE \"name\" = ?1", [.text(name)]
        ) { statement -> (Int64, [UInt8])? in
            guard try statement.step() else { return nil }
            return (statement.int64(0), statement.blob(1))
        }
        guard let (number, bytes) = row else {
            throw SyncError(.tableNotDefined, "table '\(name)' is not defined")
        }
        let info: SQLiteTable
        if let cached = connection.tableInfoCache[key], cached.number == number, cached.schemaBytes == bytes {
            info = cached
        } else {
            info = SQLiteTable(number: number, schema: try ValueCodec.decodeSchema(bytes), schemaBytes: bytes)
            connection.tableInfoCache[key] = info
        }
        tableMemo[key] = info
        lastTable = (key, info)
        return info
    }

    func schema(of table: String) throws -> TableSchema {
        try self.table(table).schema
    }

    func tables() throws -> [TableSchema] {
        let connection = try live()
        let schemas = try connection.withStatement("SELECT \"schema\" FROM \(SQLiteName.catalog)") { statement in
            var result: [TableSchema] = []
            while try statement.step() { result.append(try ValueCodec.decodeSchema(statement.blob(0))) }
            return result
        }
        return schemas.sorted { Value.utf8Less($0.name, $1.name) }
    }

    func record(in table: String, id: String) throws -> Record? {
        let connection = try live()
        let info = try self.table(table, on: connection)
        return try connection.withStatement(info.selectByID, [.text(id)]) { statement in
            try statement.step() ? try info.decodeRow(statement, id: id) : nil
        }
    }

    /// The reads in order, as their own calls answer them, but the look-ups by id of one table
    /// made several to a statement (``SQLiteTable/selectsByID``, through ``GroupedReads``):
    /// the sync server reads a pushed batch's stored outcomes and rows this way, two look-ups
    /// per operation, and one statement per look-up spent more on running a statement
    /// (binding, stepping into the program, resetting) than on finding the row (`perf`,
    /// push-10k-server). A table named once keeps the single look-up. A missing table throws
    /// as its own call would.
    func read(_ reads: [LocalRead]) throws -> [[Record]] {
        // Two reads or fewer (a local write's item and newest queued operation): one
        // statement each costs no more than one IN statement, and the bookkeeping for sharing
        // statements was 3% of a write (`perf`, local-writes-sqlite).
        if reads.count <= 2 { return try readOneByOne(reads) }
        return try GroupedReads.answer(reads, records: { try records(in: $0, matching: $1) }) { table, ids in
            guard ids.count > 1 else { return try ids.compactMap { try record(in: table, id: $0) } }
            let info = try self.table(table)
            let connection = try live()
            var found: [Record] = []
            found.reserveCapacity(ids.count)
            var bindings: [SQLiteValue] = []
            try SQLiteTable.powerOfTwoRuns(ids.count, levels: info.selectsByID.count) { run, level in
                bindings.removeAll(keepingCapacity: true)
                for id in ids[run] { bindings.append(.text(id)) }
                try connection.withStatement(info.selectsByID[level], bindings) { statement in
                    while try statement.step() { found.append(try info.decodeRow(statement)) }
                }
            }
            return found
        }
    }

    func records(in table: String, matching query: Query) throws -> [Record] {
        let info = try self.table(table)
        let connection = try live()
        // The page clause only when the query pages: with a `LIMIT`, SQLite sorts through an
        // ephemeral B-tree (which can drop rows past the limit) instead of its sorter, and
        // opening, filling and closing that tree cost a 100-row query by an indexed field a
        // fifth of its time in `perf` (local-reads-query-in-read).
        let paged = query.limit != nil || query.offset > 0
        let page: [SQLiteValue] = paged ? [.int(query.limit.map(Int64.init) ?? -1), .int(Int64(query.offset))] : []
        func selectAll(_ sql: SQLiteSQL, _ bindings: [SQLiteValue]) throws -> [Record] {
            try connection.withStatement(sql, bindings) { statement in
                var result: [Record] = []
                while try statement.step() { result.append(try info.decodeRow(statement)) }
                return result
            }
        }
        let parameter = SQLiteDialect(table: info).parameter
        // A query with the structure of a recent one validates as it did and has its SQL.
        if let reused = connection.shapes.sql(reusing: query, table: info, parameter: parameter) {
            return try selectAll(reused.sql, paged ? reused.parameters + page : reused.parameters)
        }
        try query.validate(against: info.schema)
        let shaped = SQLQueryShape.of(query, table: info, column: info.column, parameter: parameter)
        if let shaped, let sql = connection.shapes.sql(for: shaped.shape, table: info, query: query) {
            return try selectAll(sql, paged ? shaped.parameters + page : shaped.parameters)
        }
        let translator = SQLiteQueryTranslator(table: info)
        let (filter, rest) = translator.split(query.predicate)
        let order = translator.orderBy(query.order)
        var sql = "SELECT \(info.selectList) FROM \(info.sqlName)"
        var bindings: [SQLiteValue] = []
        if let filter {
            sql += " WHERE " + filter.sql
            bindings = filter.bindings
        }
        let residual: QueryPredicate = .and(rest)

        if rest.isEmpty, let order {
            // Everything in SQL.
            sql += " \(order)"
            if paged { sql += " LIMIT ?\(bindings.count + 1) OFFSET ?\(bindings.count + 2)" }
            let key = SQLiteSQL(sql)
            // A shape's SQL is kept only when the translation bound exactly its values.
            if let shaped, SQLQueryShape.bound(shaped.parameters, as: bindings, same: Self.sameBinding) {
                connection.shapes.remember(key, for: shaped.shape, table: info, query: query)
            }
            return try selectAll(key, bindings + page)
        }
        if let order {
            // SQL orders and pre-filters; the evaluator finishes the filter while streaming,
            // so offset and limit apply as rows arrive and stepping stops at the limit.
            sql += " \(order)"
            return try connection.withStatement(sql, bindings) { statement in
                var result: [Record] = []
                var skipped = 0
                if query.limit == 0 { return result }
                while try statement.step() {
                    let record = try info.decodeRow(statement)
                    guard QueryEvaluator.matches(record, residual) else { continue }
                    if skipped < query.offset { skipped += 1; continue }
                    result.append(record)
                    if let limit = query.limit, result.count >= limit { break }
                }
                return result
            }
        }
        // SQL pre-filters; the evaluator filters the rest and the matches are sorted in Swift.
        let matched = try connection.withStatement(sql, bindings) { statement in
            var result: [Record] = []
            while try statement.step() {
                let record = try info.decodeRow(statement)
                if QueryEvaluator.matches(record, residual) { result.append(record) }
            }
            return result
        }
        let sorted = matched.sorted { QueryEvaluator.areInIncreasingOrder($0, $1, query.order) }
        let start = min(query.offset, sorted.count)
        let end = query.limit.map { start + min(sorted.count - start, $0) } ?? sorted.count
        return Array(sorted[start..<end])
    }

    /// Whether two bound parameters are the same: equal integers, or texts of equal UTF-8
    /// bytes (`String`'s `==` is canonical equivalence).
    static func sameBinding(_ a: SQLiteValue, _ b: SQLiteValue) -> Bool {
        switch (a, b) {
        case let (.int(x), .int(y)): return x == y
        case let (.text(x), .text(y)): return x.utf8.elementsEqual(y.utf8)
        default: return false
        }
    }

    func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
        let info = try self.table(table)
        try Query(predicate).validate(against: info.schema)
        let connection = try live()
        let (filter, rest) = SQLiteQueryTranslator(table: info).split(predicate)
        let whereClause = filter.map { " WHERE " + $0.sql } ?? ""
        let bindings = filter?.bindings ?? []
        if rest.isEmpty {
            let total = try connection.scalar("SELECT count(*) FROM \(info.sqlName)\(whereClause)", bindings)
            guard case .int(let n)? = total else { throw SyncError(.storageFailure, "count returned no number") }
            return Int(n)
        }
        let residual: QueryPredicate = .and(rest)
        return try connection.withStatement("SELECT \(info.selectList) FROM \(info.sqlName)\(whereClause)", bindings) { statement in
            var n = 0
            while try statement.step() {
                if QueryEvaluator.matches(try info.decodeRow(statement), residual) { n += 1 }
            }
            return n
        }
    }
}

/// A write transaction lent to a ``SQLiteStore/write(_:)`` closure, inside `BEGIN IMMEDIATE`.
final class SQLiteWriteTransaction: SQLiteReadTransaction, LocalWriteTransaction {
    func upsert(_ record: Record, in table: String) throws {
        let info = try self.table(table)
        let bindings = try info.validatedBindings(for: record)
        try live().execute(info.upsert, bindings)
    }

    /// One `INSERT … ON CONFLICT("id") DO NOTHING`: the id's index is searched once, by the
    /// write, where a look-up and then an upsert searched it twice.
    func insert(_ record: Record, in table: String) throws -> LocalInsertOutcome {
        let info = try self.table(table)
        let bindings = try info.validatedBindings(for: record)
        let connection = try live()
        try connection.execute(info.insertIfAbsent, bindings)
        return connection.changes > 0 ? .inserted : .idExists
    }

    /// Writes the records with as few statements of ``SQLiteTable/upserts`` as the count
    /// allows (the largest first), each statement's records validated as its parameters are
    /// made. A later row with an earlier row's id updates it within the same statement, as
    /// separate upserts would.
    func upsert(_ records: [Record], in table: String) throws {
        let info = try self.table(table)
        let connection = try live()
        var bindings: [SQLiteValue] = []
        try SQLiteTable.powerOfTwoRuns(records.count, levels: info.upserts.count) { run, level in
            bindings.removeAll(keepingCapacity: true)
            for record in records[run] { bindings += try info.validatedBindings(for: record) }
            try connection.execute(info.upserts[level], bindings)
        }
    }

    /// ``upsert(_:in:)-([Record],_)``'s statements, each row's parameters made by position
    /// when the rows were checked against a schema of this table's layout.
    func upsert(_ rows: ValidatedRows, in table: String) throws {
        let info = try self.table(table)
        guard info.schema.hasSameLayout(as: rows.schema) else { return try upsert(rows.records, in: table) }
        let connection = try live()
        var bindings: [SQLiteValue] = []
        try SQLiteTable.powerOfTwoRuns(rows.count, levels: info.upserts.count) { run, level in
            bindings.removeAll(keepingCapacity: true)
            for index in run { bindings += info.bindings(for: rows[index]) }
            try connection.execute(info.upserts[level], bindings)
        }
    }

    @discardableResult
    func delete(id: String, in table: String) throws -> Bool {
        let info = try self.table(table)
        let connection = try live()
        try connection.execute(info.deleteByID, [.text(id)])
        return connection.changes > 0
    }

    /// Deletes with as few statements of ``SQLiteTable/deletes`` as the count allows (the
    /// largest first). `IN` matches each row once however often its id is listed, and an id
    /// repeated in a later statement finds its row gone, so the changes add up to the
    /// distinct ids that existed.
    @discardableResult
    func delete(ids: [String], in table: String) throws -> Int {
        let info = try self.table(table)
        let connection = try live()
        var existed = 0
        try SQLiteTable.powerOfTwoRuns(ids.count, levels: info.deletes.count) { run, level in
            try connection.execute(info.deletes[level], ids[run].map { .text($0) })
            existed += connection.changes
        }
        return existed
    }
}
