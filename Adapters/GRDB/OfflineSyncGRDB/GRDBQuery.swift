import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit

/// A query on one of the app's tables, answered a row at a time. What SQL can judge exactly
/// (``GRDBDialect``) is its `WHERE` and `ORDER BY`; the rest of the predicate is evaluated
/// on each row as it is read, and only the rows the answer needs are kept:
///
/// - with the order in SQL, rows come in the query's order, and reading stops once the
///   offset and the limit are met (a page of a table ordered by id reads that page);
/// - with a limit but an order SQL cannot give, the best `offset + limit` rows so far are
///   kept (at most twice that many at once), never the whole table;
/// - a count keeps no record at all.
///
/// The answer is what `QueryEvaluator` returns over the table's records. A row the adapter
/// cannot read (a column holding what its field's type cannot read: the app's write of it
/// was refused, see ``GRDBCapture``) is not one of them, and is left out.
struct GRDBQuery {
    let table: GRDBTypedTable
    let sql: SQLiteEmbeddedTables
    let statistics: GRDBQueryStatistics

    /// Bound values above this many make a conjunct fall back to the evaluator (the SQLite
    /// adapter's bound: SQLite caps the parameters of a statement).
    static let maxBindings = 10_000

    /// The statement and what is left to do in Swift.
    private struct Plan {
        /// ``GRDBTypedTable/selectFrom`` with the `WHERE` and `ORDER BY` SQL can judge.
        var statement: String
        var bindings: [SQLiteValue]
        /// The conjuncts SQL cannot judge: a row matches when every one is true.
        var rest: [QueryPredicate]
        /// Whether the rows come in the query's order.
        var ordered: Bool

        func matches(_ record: Record) -> Bool {
            rest.allSatisfy { QueryEvaluator.matches(record, $0) }
        }
    }

    private func plan(_ predicate: QueryPredicate, order: [SortKey]?) throws -> Plan {
        let dialect = try GRDBDialect.probe(table, sql)
        var translator = SQLPredicateTranslator(dialect: dialect, maxParameters: Self.maxBindings)
        let (condition, rest) = translator.split(predicate)
        var statement = table.selectFrom
        if let condition { statement += " WHERE " + condition }
        var ordered = false
        if let order, let orderBy = translator.orderBy(order) {
            statement += " " + orderBy
            ordered = true
        }
        return Plan(statement: statement, bindings: translator.parameters, rest: rest, ordered: ordered)
    }

    /// Thrown from a row callback to stop reading: the statement is reset.
    private struct Enough: Error {}

    /// Reads `plan`'s rows (with `limit` added to its statement when given), handing each
    /// record the adapter can read to `body` until it returns `false`. Returns how many rows
    /// the statement gave and how many of them could not be read.
    private func read(_ plan: Plan, limit: Int? = nil, _ body: (Record) -> Bool) throws -> (rows: Int, unreadable: Int) {
        var rows = 0, unreadable = 0
        var statement = plan.statement, bindings = plan.bindings
        if let limit {
            bindings.append(.int(Int64(limit)))
            statement += " LIMIT ?\(bindings.count)"
        }
        do {
            try sql.rows(statement, bindings) { row in
                rows += 1
                let record: Record
                do {
                    record = try table.decode(row)
                } catch is SyncError {
                    unreadable += 1
                    return
                }
                if !body(record) { throw Enough() }
            }
        } catch is Enough {}
        statistics.note(rowsRead: rows)
        return (rows, unreadable)
    }

    /// The records matching `query` (validated), in its order, after its offset, at most its limit.
    func records(_ query: Query) throws -> [Record] {
        if query.limit == 0 { return [] }
        // The rows the answer needs from the start of the order: offset + limit (none when
        // there is no limit, or the sum does not fit an Int).
        let needed: Int? = query.limit.flatMap { limit in
            let (sum, overflow) = query.offset.addingReportingOverflow(limit)
            return overflow ? nil : sum
        }
        let plan = try self.plan(query.predicate, order: query.order)
        var held = 0
        defer { statistics.note(held: held) }
        if plan.ordered {
            var matched = 0
            var kept: [Record] = []
            func take(_ record: Record) -> Bool {
                guard plan.matches(record) else { return true }
                matched += 1
                if matched > query.offset { kept.append(record) }
                held = max(held, kept.count)
                return needed.map { matched < $0 } ?? true
            }
            // When SQL judges the whole predicate, it can stop at the rows needed too, unless
            // a row it counted could not be read: then read again without stopping early.
            if plan.rest.isEmpty, let needed {
                let (rows, unreadable) = try read(plan, limit: needed, take)
                if unreadable == 0 || rows < needed { return kept }
                matched = 0
                kept.removeAll()
            }
            _ = try read(plan, take)
            return kept
        }
        let sorted: [Record]
        if let needed {
            var best = BestRecords(count: needed, order: query.order)
            _ = try read(plan) { record in
                if plan.matches(record) {
                    best.offer(record)
                    held = max(held, best.held)
                }
                return true
            }
            sorted = best.sorted()
        } else {
            var matching: [Record] = []
            _ = try read(plan) { record in
                if plan.matches(record) {
                    matching.append(record)
                    held = matching.count
                }
                return true
            }
            sorted = matching.sorted { QueryEvaluator.areInIncreasingOrder($0, $1, query.order) }
        }
        let start = min(query.offset, sorted.count)
        let end = query.limit.map { start + min(sorted.count - start, $0) } ?? sorted.count
        return Array(sorted[start..<end])
    }

    /// How many records match `predicate` (validated); keeps none of them.
    func count(_ predicate: QueryPredicate) throws -> Int {
        let plan = try self.plan(predicate, order: nil)
        var count = 0
        _ = try read(plan) { record in
            if plan.matches(record) { count += 1 }
            return true
        }
        return count
    }
}

/// The first `count` records in a query's order among those offered, holding at most twice
/// that many at once: offered records gather until there are `2 × count`, then the best
/// `count` are kept. Each record is sorted in a few times at most, so `n` records cost
/// `O(n log count)`.
struct BestRecords {
    let count: Int
    let order: [SortKey]
    private var kept: [Record] = []
    /// How many records are held now.
    var held: Int { kept.count }

    init(count: Int, order: [SortKey]) {
        self.count = count
        self.order = order
    }

    mutating func offer(_ record: Record) {
        kept.append(record)
        if kept.count - count >= max(count, 1) { trim() }
    }

    /// The best records, in order.
    mutating func sorted() -> [Record] {
        trim()
        return kept
    }

    private mutating func trim() {
        kept.sort { QueryEvaluator.areInIncreasingOrder($0, $1, order) }
        if kept.count > count { kept.removeLast(kept.count - count) }
    }
}
