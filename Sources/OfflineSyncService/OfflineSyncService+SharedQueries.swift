import OfflineSync
import OfflineSyncStoreKit

// The list APIs (the Datasync tables routes) over shared tables: the caller's data view is
// the rows the rules let it read — Datasync's `GetDataView` — and every query, count and
// lookup is made inside it, so nothing outside it is listed, counted or confirmed to exist.
//
// A view is the union of a few store queries, one per grant the caller meets (its own rows,
// rows naming it, rows of its groups in chunks of groups, rows of rows it owns), each
// answered by the rules' indexes. A list merges those queries' pages in the requested
// order, so it holds O(sources × page) rows whatever the view's size; a count adds the
// store's count of each source minus the sources before it, so it holds nothing.

extension OfflineSyncService {
    /// How many group keys go into one source's `in (…)` list.
    private static let keyChunk = 500

    /// One store query that selects part of a caller's view: the rows whose `field` is one of
    /// `values`. A row the query selects is one the grant that made it admits, and the
    /// sources of a view together select every row the caller may read.
    struct ViewSource: Sendable {
        let field: String
        let values: [Value]

        /// The rows this source selects.
        var selects: QueryPredicate { values.count == 1 ? .compare(field, .equal, values[0]) : .isIn(field, values) }

        /// The rows this source does not select, null fields included: `not (f = v)` alone is
        /// unknown, not true, for a null `f`, and would drop such rows from a count.
        var excludes: QueryPredicate { .not(.and([selects, .not(.isNull(field))])) }
    }

    /// The caller's view of the shared `table`: `nil` when an `everyone` grant admits it (it
    /// reads the table), else the sources of each grant whose conditions it meets, a grant's
    /// chunks together (they are disjoint: one row has one value of the grant's key).
    func viewSources(claims: Claims, table: String, _ txn: any LocalReadTransaction) throws -> [[ViewSource]]? {
        if readsDirectly(table, claims: claims) { return nil }
        let me = Value.string(claims.identity.text)
        var families: [[ViewSource]] = []
        func chunks(_ key: String, _ values: [Value]) -> [ViewSource] {
            let field = key == SystemField.id ? Meta.item : key
            return stride(from: 0, to: values.count, by: Self.keyChunk).map {
                ViewSource(field: field, values: Array(values[$0..<min($0 + Self.keyChunk, values.count)]))
            }
        }
        for grant in rules.rules(for: table)?.read ?? [] where grant.conditions.allSatisfy({ $0.holds(for: claims) }) {
            switch grant.kind {
            case .owner:
                families.append([ViewSource(field: Meta.owner, values: [me])])
            case .everyone:
                break
            case .identityField(let field):
                families.append([ViewSource(field: field, values: [me])])
            case let .member(name, key, roles):
                guard let membership = rules.memberships[name] else { continue }
                var mine = Field(membership.member) == me && Field(SystemField.deleted) == false
                if let roles, let role = membership.role { mine = mine && Field(role).isIn(roles.map(Value.string)) }
                let rows = try txn.records(in: membership.table, matching: Query(mine))
                families.append(chunks(key, Self.distinct(rows.compactMap { RuleEvaluator.value(of: membership.group, in: $0) })))
            case let .ownerOf(target, key):
                let rows = try txn.records(in: target, matching: Query(Field(Meta.owner) == me && Field(SystemField.deleted) == false))
                families.append(chunks(key, Self.distinct(rows.compactMap { $0[Meta.item].stringValue.map(Value.string) })))
            }
        }
        // Fewest sources first: a count excludes every earlier family from each later source,
        // so the many-chunk family is excluded from nothing.
        return families.filter { !$0.isEmpty }.sorted { $0.count < $1.count }
    }

    /// `values` without repeats, where an integral double counts as the integer it equals (a
    /// store compares them as equal, so both in two chunks would select one row twice).
    private static func distinct(_ values: [Value]) -> [Value] {
        var seen = Set<Value>()
        return values.compactMap { value in
            var key = value
            if case .double(let d) = value, d.rounded() == d, let i = Int64(exactly: d) { key = .int(i) }
            return seen.insert(key).inserted ? key : nil
        }
    }

    /// The caller's readable rows of the shared `table` (server form) that match `mapped` (a
    /// predicate already on stored names; tombstones only with `includeDeleted`), in `order`
    /// then by id, after skipping `offset`, at most `limit` (`nil`: all).
    ///
    /// Each source is read a window of `offset + limit` rows at a time in `order`, and the
    /// windows are merged; a row two sources select is taken once, and every row is checked
    /// by the full rules before it is taken. Memory is O(sources × window), not the view; with
    /// one source the store pages it alone, and memory is the page.
    func readableRows(claims: Claims, table: String, matching mapped: QueryPredicate, includeDeleted: Bool,
                      order: [SortKey], offset: Int, limit: Int?, _ txn: any LocalReadTransaction) throws -> [Record] {
        let wanted = Self.wanted(mapped, includeDeleted: includeDeleted)
        let sources: [QueryPredicate] = try viewSources(claims: claims, table: table, txn)
            .map { $0.joined().map { wanted == .all ? $0.selects : $0.selects && wanted } } ?? [wanted]
        if limit == 0 || sources.isEmpty { return [] }
        if sources.count == 1 {
            // One source (one grant, a reader of the whole table): the store skips `offset`
            // rows itself, so a large `$skip` holds nothing. A source selects only rows its
            // grant admits; the check below only guards that.
            return try txn.records(in: table, matching: Query(sources[0], order: order, limit: limit, offset: offset))
                .filter { try evaluator.canRead($0, in: table, claims: claims, txn) }
        }
        let window = limit.map { offset + $0 }
        var buffers: [[Record]] = [], positions: [Int] = [], fetched: [Int] = []
        var finished: [Bool] = []
        for source in sources {
            let rows = try txn.records(in: table, matching: Query(source, order: order, limit: window))
            buffers.append(rows); positions.append(0); fetched.append(rows.count)
            finished.append(window.map { rows.count < $0 } ?? true)
        }
        // By id, compared by bytes: ids that differ only in normalisation are two rows.
        var taken = Set<ExactString>(), result: [Record] = [], skipped = 0
        while limit.map({ result.count < $0 }) ?? true {
            var best: Int?
            for index in sources.indices {
                if positions[index] == buffers[index].count, !finished[index], let window {
                    // The same read transaction: an offset names the same rows it did a window ago.
                    let rows = try txn.records(in: table, matching: Query(sources[index], order: order, limit: window,
                                                                           offset: fetched[index]))
                    buffers[index] = rows; positions[index] = 0; fetched[index] += rows.count
                    finished[index] = rows.count < window
                }
                guard positions[index] < buffers[index].count else { continue }
                if let current = best,
                   !QueryEvaluator.areInIncreasingOrder(buffers[index][positions[index]], buffers[current][positions[current]], order) {
                    continue
                }
                best = index
            }
            guard let best else { break }
            let row = buffers[best][positions[best]]
            positions[best] += 1
            guard !taken.contains(ExactString(row.id)), try evaluator.canRead(row, in: table, claims: claims, txn) else { continue }
            taken.insert(ExactString(row.id))
            if skipped < offset { skipped += 1 } else { result.append(row) }
        }
        return result
    }

    /// How many of the caller's readable rows of the shared `table` match `mapped`: each
    /// source's store count of the rows no earlier family selects, so no row counts twice and
    /// nothing is read into memory.
    func readableCount(claims: Claims, table: String, matching mapped: QueryPredicate, includeDeleted: Bool,
                       _ txn: any LocalReadTransaction) throws -> Int {
        let wanted = Self.wanted(mapped, includeDeleted: includeDeleted)
        guard let families = try viewSources(claims: claims, table: table, txn) else {
            return try txn.count(in: table, matching: wanted)
        }
        var total = 0
        var earlier: [QueryPredicate] = []
        for family in families {
            for source in family {
                var parts = [source.selects] + earlier
                if wanted != .all { parts.append(wanted) }
                total += try txn.count(in: table, matching: .and(parts))
            }
            earlier += family.map(\.excludes)
        }
        return total
    }

    /// `mapped` on live rows, or on every row with `includeDeleted`.
    private static func wanted(_ mapped: QueryPredicate, includeDeleted: Bool) -> QueryPredicate {
        var parts: [QueryPredicate] = []
        if mapped != .all { parts.append(mapped) }
        if !includeDeleted { parts.append(Field(SystemField.deleted) == false) }
        return parts.isEmpty ? .all : .and(parts)
    }

    /// The tables `claims` read through an `everyone` grant whose conditions they meet.
    public func tablesReadByEveryone(claims: Claims) -> Set<String> {
        tablesWithEveryoneGrants.filter { readsDirectly($0, claims: claims) }
    }

    /// Whether an `everyone` read grant of `table` whose conditions `claims` meet admits the
    /// caller: it then reads the table itself rather than its view log.
    func readsDirectly(_ table: String, claims: Claims) -> Bool {
        rules.rules(for: table)?.read.contains { grant in
            grant.kind == .everyone && grant.conditions.allSatisfy { $0.holds(for: claims) }
        } ?? false
    }

    /// The shared row `id` when the caller may read it; `nil` both when there is none and
    /// when the rules hide it, so an answer never tells the two apart.
    func readableRecord(claims: Claims, table: String, id: String, _ txn: any LocalReadTransaction) throws -> Record? {
        guard let row = try txn.record(in: table, id: id), try evaluator.canRead(row, in: table, claims: claims, txn) else {
            return nil
        }
        return Self.publicRecord(row)
    }
}
