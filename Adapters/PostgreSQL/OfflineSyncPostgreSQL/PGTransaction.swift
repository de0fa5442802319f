import Dispatch
import OfflineSync
import OfflineSyncStoreKit

/// A transaction lent to a ``PostgreSQLStore`` closure. It runs on its connection's queue;
/// once the closure returns (or from any other thread) every call throws
/// ``SyncError/Code/storeClosed``.
///
/// Upserts are buffered per table and written with multi-row statements: when a table's
/// buffer reaches ``flushThreshold`` rows, before any query or count on that table (in the
/// query's round trip, through libpq's pipeline mode), and before `COMMIT`. Reads by id see
/// the buffer first, so the transaction always reads its own writes; deletes run at once
/// (dropping a buffered upsert of the same id). A write the server refuses at a flush fails
/// the whole transaction, which is rolled back.
///
/// It keeps the default `insert(_:in:)`, which leaves the look-up of the id to the caller: the
/// core then reads the item with its queued operations in one round trip, where a checked
/// insert would cost one of its own.
final class PGTransaction: HoldingWriteTransaction {
    private var connection: PGConnection?
    private let queueKey: DispatchSpecificKey<Bool>
    private let schema: String
    private let writable: Bool
    private var tableMemo: [ExactString: PGTable] = [:]
    /// Buffered upserts per table number: the table, the ids in first-write order and the
    /// latest row of each id.
    private(set) var pending: [Int64: (table: PGTable, order: [ExactString], rows: [ExactString: PendingRow])] = [:]
    /// Rows buffered per table before they are written.
    static let flushThreshold = 1_000

    init(connection: PGConnection, queueKey: DispatchSpecificKey<Bool>, schema: String, writable: Bool) {
        self.connection = connection
        self.queueKey = queueKey
        self.schema = schema
        self.writable = writable
    }

    /// Ends the transaction: later calls throw ``SyncError/Code/storeClosed``.
    func end() {
        connection = nil
        tableMemo = [:]
        pending = [:]
    }

    /// Writes every buffered upsert, in one round trip.
    func flush() throws {
        let statements = pending.keys.sorted().flatMap { takePending($0) }
        if !statements.isEmpty { try live().execute(statements) }
    }

    /// Removes the buffered upserts of one table and returns the statements that write them.
    func takePending(_ number: Int64) -> [PGStatement] {
        guard let buffer = pending.removeValue(forKey: number) else { return [] }
        var rows = buffer.rows
        return buffer.table.upsertStatements(buffer.order.compactMap { rows.removeValue(forKey: $0) })
    }

    /// Runs a query on a table after its buffered upserts, in the same round trip.
    private func run(_ table: PGTable, _ sql: String, _ parameters: [PGParameter]) throws -> PGResult {
        try live().execute(takePending(table.number) + [PGStatement(sql, parameters)])
    }

    /// The connection, while the transaction is open and the caller is on its queue.
    func live() throws -> PGConnection {
        guard DispatchQueue.getSpecific(key: queueKey) == true, let connection else {
            throw SyncError(.storeClosed, "the transaction has ended (it was used outside its closure)")
        }
        return connection
    }

    /// The table's layout, read from the catalog once per transaction.
    func table(_ name: String) throws -> PGTable {
        let connection = try live()
        let key = ExactString(name)
        if let table = tableMemo[key] { return table }
        let result = try connection.execute("SELECT \"num\", \"schema\" FROM \(schema).\"__osync_catalog\" WHERE \"name\" = $1",
                                            [.bytes(Array(name.utf8))], prepare: true)
        guard result.count == 1, let number = result.int64(0, 0) else {
            throw SyncError(.tableNotDefined, "table '\(name)' is not defined")
        }
        let bytes = result.bytes(0, 1) ?? []
        let table: PGTable
        if let cached = connection.tables[key], cached.number == number, cached.schemaBytes == bytes, cached.storeSchema == schema {
            table = cached.table
        } else {
            table = PGTable(number: number, schema: try ValueCodec.decodeSchema(bytes), quotedSchema: schema)
            connection.tables[key] = (number, bytes, schema, table)
        }
        tableMemo[key] = table
        return table
    }

    /// Every record of the result (which selected the table's ``PGTable/selectList``).
    func decodeAll(_ result: PGResult, _ table: PGTable) throws -> [Record] {
        var records: [Record] = []
        records.reserveCapacity(result.count)
        for row in 0..<result.count { records.append(try table.decode(result, row)) }
        return records
    }

    func schema(of table: String) throws -> TableSchema { try self.table(table).schema }

    func tables() throws -> [TableSchema] {
        let result = try live().execute("SELECT \"schema\" FROM \(schema).\"__osync_catalog\"", prepare: true)
        return try (0..<result.count).map { row in try result.withBytes(row, 0) { try ValueCodec.decodeSchema($0) } }
            .sorted { Value.utf8Less($0.name, $1.name) }
    }

    func record(in table: String, id: String) throws -> Record? {
        let info = try self.table(table)
        if let buffered = pending[info.number]?.rows[ExactString(id)] { return buffered.record(in: info.schema) }
        let result = try live().execute(info.selectByID, [.bytes(Array(id.utf8))], prepare: true)
        guard result.count > 0 else { return nil }
        return try info.decode(result, 0)
    }

    /// ``record(in:id:)``, held (``HoldingWriteTransaction``): first a transaction-scoped
    /// advisory lock keyed by the row (`pg_advisory_xact_lock_shared`, or the exclusive form
    /// for an `exclusive` hold; PostgreSQL queues those fairly, where a stream of `FOR SHARE`
    /// lockers can keep a waiting `UPDATE` out for good), then the row `FOR SHARE` (or `FOR
    /// NO KEY UPDATE`), in one round trip: a concurrent `UPDATE` or `DELETE` of the row waits
    /// for this transaction to end, and under `SERIALIZABLE` a row changed by a transaction
    /// that committed after this one's snapshot fails the statement with a serialization
    /// failure (40001), which ``PostgreSQLStore``'s concurrent writers run again. The lock's
    /// key is `(1330858060, h)` ("OSHL", and 32 bits of a 64-bit FNV-1a hash of schema, table
    /// and id, NUL-separated): another row with the same 32 bits only waits needlessly. A row
    /// this transaction has buffered is its own to write.
    func heldRecord(in table: String, id: String, exclusive: Bool) throws -> Record? {
        let info = try self.table(table)
        if let buffered = pending[info.number]?.rows[ExactString(id)] { return buffered.record(in: info.schema) }
        let lock = exclusive ? "SELECT pg_advisory_xact_lock(1330858060, $1::integer)"
                             : "SELECT pg_advisory_xact_lock_shared(1330858060, $1::integer)"
        let key = Int32(truncatingIfNeeded: FNV1a.hash64(schema.utf8 + [0] + table.utf8 + [0] + id.utf8))
        let result = try live().execute(takePending(info.number) + [
            PGStatement(lock, [.int64(Int64(key))]),
            PGStatement(exclusive ? info.selectByIDLocked : info.selectByIDHeld, [.bytes(Array(id.utf8))]),
        ])
        guard result.count > 0 else { return nil }
        return try info.decode(result, 0)
    }

    /// Runs a query. When SQL can evaluate the whole predicate and order, filtering,
    /// ordering, offset and limit all happen in PostgreSQL (using the table's indexes);
    /// otherwise SQL narrows the rows by the conjuncts it can evaluate and ``QueryEvaluator``
    /// decides the rest over rows streamed through a server-side cursor, a page at a time, so
    /// memory holds the matches, never the table. When SQL can order the rows, the stream
    /// stops once `offset + limit` rows have matched. Either way the result equals the
    /// reference semantics.
    func records(in table: String, matching query: Query) throws -> [Record] {
        let info = try self.table(table)
        switch try plan(query, info) {
        case let .whole(sql, parameters):
            return try decodeAll(try run(info, sql, parameters), info)
        case let .streamed(sql, parameters, residue, orderBy):
            var matched: [Record] = []
            guard let orderBy else {
                try stream(info, sql, parameters) { record in
                    if QueryEvaluator.matches(record, residue) { matched.append(record) }
                    return true
                }
                return QueryEvaluator.apply(Query(order: query.order, limit: query.limit, offset: query.offset), to: matched)
            }
            // Rows arrive in the query's order: keep the matches up to offset + limit.
            let needed = query.limit.map { query.offset + $0 }
            if needed == 0 { return [] }
            try stream(info, sql + " " + orderBy, parameters) { record in
                if QueryEvaluator.matches(record, residue) { matched.append(record) }
                return needed.map { matched.count < $0 } ?? true
            }
            return Array(matched.dropFirst(query.offset))
        }
    }

    /// How a query runs: wholly in SQL, or SQL narrowing rows that a residue decides.
    enum QueryPlan {
        /// One statement answers the query: filter, order, limit and offset.
        case whole(sql: String, parameters: [PGParameter])
        /// `sql` selects candidate rows (unordered); the evaluator keeps those matching
        /// `residue`, in `orderBy`'s order when SQL can order them, or sorts them itself.
        case streamed(sql: String, parameters: [PGParameter], residue: QueryPredicate, orderBy: String?)
    }

    /// Validates `query` and plans it over `info`. A query of a remembered shape
    /// (`SQLQueryShape`) reuses its SQL and binds only its values.
    func plan(_ query: Query, _ info: PGTable) throws -> QueryPlan {
        let connection = try live()
        func whole(_ sql: String, _ bound: [PGParameter]) -> QueryPlan {
            var parameters = bound
            if let limit = query.limit { parameters.append(.int64(Int64(limit))) }
            if query.offset > 0 { parameters.append(.int64(Int64(query.offset))) }
            return .whole(sql: sql, parameters: parameters)
        }
        // A query with the structure of a recent one validates as it did and has its SQL.
        if let reused = connection.shapes.sql(reusing: query, table: info, parameter: { PGTable.parameter($0) }) {
            return whole(reused.sql, reused.parameters)
        }
        try query.validate(against: info.schema)
        let shaped = SQLQueryShape.of(query, table: info, column: info.column) { PGTable.parameter($0) }
        if let shaped, let sql = connection.shapes.sql(for: shaped.shape, table: info, query: query) {
            return whole(sql, shaped.parameters)
        }
        var translator = SQLPredicateTranslator<PGDialect>(table: info, textFunctions: connection.serverUsesUTF8)
        let (filter, rest) = translator.split(query.predicate)
        var sql = "SELECT \(info.selectList) FROM \(info.sqlName)"
        if let filter { sql += " WHERE " + filter }
        let orderBy = translator.orderBy(query.order)
        guard rest.isEmpty, let orderBy else {
            return .streamed(sql: sql, parameters: translator.parameters, residue: .and(rest), orderBy: orderBy)
        }
        // A shape's SQL is kept only when the translation bound exactly its values.
        let remember = shaped.map { SQLQueryShape.bound($0.parameters, as: translator.parameters, same: Self.sameParameter) } ?? false
        sql += " " + orderBy
        if let limit = query.limit { sql += " LIMIT " + translator.bind(.int64(Int64(limit))) }
        if query.offset > 0 { sql += " OFFSET " + translator.bind(.int64(Int64(query.offset))) }
        if remember, let shaped { connection.shapes.remember(sql, for: shaped.shape, table: info, query: query) }
        return .whole(sql: sql, parameters: translator.parameters)
    }

    /// Whether two bound parameters are the same: equal integers, or equal bytes.
    static func sameParameter(_ a: PGParameter, _ b: PGParameter) -> Bool {
        switch (a, b) {
        case let (.int64(x), .int64(y)): return x == y
        case let (.bytes(x), .bytes(y)): return x == y
        default: return false
        }
    }

    func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
        let info = try self.table(table)
        try Query(predicate).validate(against: info.schema)
        var translator = SQLPredicateTranslator<PGDialect>(table: info, textFunctions: try live().serverUsesUTF8)
        let (filter, rest) = translator.split(predicate)
        let whereClause = filter.map { " WHERE " + $0 } ?? ""
        if rest.isEmpty {
            let result = try run(info, "SELECT count(*) FROM \(info.sqlName)\(whereClause)", translator.parameters)
            return Int(result.int64(0, 0) ?? 0)
        }
        let residue = QueryPredicate.and(rest)
        var count = 0
        try stream(info, "SELECT \(info.selectList) FROM \(info.sqlName)\(whereClause)", translator.parameters) { record in
            if QueryEvaluator.matches(record, residue) { count += 1 }
            return true
        }
        return count
    }

    /// Rows fetched per page of a streamed query.
    static let streamPageSize = 1_000
    /// Numbers the transaction's cursors.
    private var cursors = 0

    /// Runs `sql` (after the table's buffered upserts) through a server-side cursor and hands
    /// each row to `body`, a page of ``streamPageSize`` rows at a time, until the rows run out
    /// or `body` returns false.
    private func stream(_ table: PGTable, _ sql: String, _ parameters: [PGParameter],
                        _ body: (Record) throws -> Bool) throws {
        cursors += 1
        let cursor = "\"osync_cursor_\(cursors)\""
        try live().execute(takePending(table.number) + [PGStatement("DECLARE \(cursor) NO SCROLL CURSOR FOR \(sql)", parameters, prepare: false)])
        let fetch = "FETCH FORWARD \(PGTransaction.streamPageSize) FROM \(cursor)"
        var more = true
        while more {
            let page = try live().execute(fetch)
            for row in 0..<page.count where more {
                more = try body(try table.decode(page, row))
            }
            if page.count < PGTransaction.streamPageSize { more = false }
        }
        try live().execute("CLOSE \(cursor)")
    }

    func upsert(_ record: Record, in table: String) throws {
        let info = try self.table(table)
        guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
        try info.schema.validate(record)
        try buffer(CollectionOfOne(.record(record)), of: info)
    }

    /// Buffers rows checked against a schema of the table's layout as they are (their
    /// parameters made by position when they are written); others as records, checked.
    func upsert(_ rows: ValidatedRows, in table: String) throws {
        let info = try self.table(table)
        guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
        guard info.schema.hasSameLayout(as: rows.schema) else {
            for record in rows.records { try upsert(record, in: table) }
            return
        }
        try buffer((0..<rows.count).lazy.map { .checked(rows[$0]) }, of: info)
    }

    /// Adds rows to the table's buffer, each replacing a buffered row of its id; writes the
    /// buffer once it holds ``flushThreshold`` rows.
    private func buffer(_ rows: some Sequence<PendingRow>, of info: PGTable) throws {
        _ = try live()
        var buffer = pending.removeValue(forKey: info.number) ?? (info, [], [:])
        for row in rows {
            let key = ExactString(row.id)
            if buffer.rows.updateValue(row, forKey: key) == nil { buffer.order.append(key) }
        }
        let full = buffer.rows.count >= PGTransaction.flushThreshold
        pending[info.number] = buffer
        if full { try live().execute(takePending(info.number)) }
    }

    @discardableResult
    func delete(id: String, in table: String) throws -> Bool {
        let info = try self.table(table)
        guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
        let key = ExactString(id)
        var wasBuffered = false
        if var buffer = pending.removeValue(forKey: info.number) {
            wasBuffered = buffer.rows.removeValue(forKey: key) != nil
            if wasBuffered, let position = buffer.order.lastIndex(of: key) { buffer.order.remove(at: position) }
            pending[info.number] = buffer
        }
        let result = try live().execute(info.deleteByID + " RETURNING 1", [.bytes(Array(id.utf8))], prepare: true)
        return wasBuffered || result.count > 0
    }
}

/// A buffered upsert: a record (checked when it was buffered) or a row of ``ValidatedRows``
/// checked against the table's layout.
enum PendingRow {
    case record(Record)
    case checked(ValidatedRow)

    var id: String {
        switch self {
        case .record(let record): return record.id
        case .checked(let row): return row.id
        }
    }

    /// The row as a record of the table whose schema is `schema`.
    func record(in schema: TableSchema) -> Record {
        switch self {
        case .record(let record): return record
        case .checked(let row): return row.record(in: schema)
        }
    }
}
