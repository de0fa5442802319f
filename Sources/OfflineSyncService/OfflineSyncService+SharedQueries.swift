import OfflineSync
import OfflineSyncStoreKit

// The list APIs (the Datasync tables routes) over shared tables: the caller's data view is
// the rows the rules let it read — Datasync's `GetDataView` — and every query, count and
// lookup is made inside it, so nothing outside it is listed, counted or confirmed to exist.

extension OfflineSyncService {
    /// How many keys go into one store query's `in (…)` list.
    private static let keyChunk = 500

    /// The caller's readable rows of the shared `table` (server form) that match `mapped`, a
    /// predicate already mapped onto stored names, tombstones only with `includeDeleted`. A
    /// caller an `everyone` grant admits reads the table; any other reads, grant by grant,
    /// the rows it names (its own rows, rows naming it, rows of its groups, rows of rows it
    /// owns) through the rules' indexes. Each row is checked by the full rules.
    ///
    /// The cost follows the caller's view and its groups, not the table; the predicate is
    /// applied by the store.
    func readableRows(claims: Claims, table: String, matching mapped: QueryPredicate, includeDeleted: Bool,
                      _ txn: any LocalReadTransaction) throws -> [Record] {
        var parts: [QueryPredicate] = []
        if mapped != .all { parts.append(mapped) }
        if !includeDeleted { parts.append(Field(SystemField.deleted) == false) }
        let wanted: QueryPredicate = parts.isEmpty ? .all : .and(parts)
        func narrowed(_ predicate: QueryPredicate) -> QueryPredicate { wanted == .all ? predicate : predicate && wanted }
        if readsDirectly(table, claims: claims) {
            return try txn.records(in: table, matching: Query(wanted)).filter { try evaluator.canRead($0, in: table, claims: claims, txn) }
        }
        let me = Value.string(claims.identity)
        var found: [String: Record] = [:]
        func add(_ rows: [Record]) { for row in rows { found[row.id] = row } }
        func add(whereKey key: String, in values: [Value]) throws {
            let field = key == SystemField.id ? Meta.item : key
            var start = 0
            while start < values.count {
                let chunk = Array(values[start..<min(start + Self.keyChunk, values.count)])
                add(try txn.records(in: table, matching: Query(narrowed(.isIn(field, chunk)))))
                start += Self.keyChunk
            }
        }
        for grant in rules.rules(for: table)?.read ?? [] {
            switch grant.kind {
            case .owner:
                add(try txn.records(in: table, matching: Query(narrowed(Field(Meta.owner) == me))))
            case .everyone:
                break
            case .identityField(let field):
                add(try txn.records(in: table, matching: Query(narrowed(Field(field) == me))))
            case let .member(name, key, _):
                guard let membership = rules.memberships[name] else { continue }
                let rows = try txn.records(in: membership.table, matching: Query(
                    Field(membership.member) == me && Field(SystemField.deleted) == false))
                try add(whereKey: key, in: Array(Set(rows.compactMap { RuleEvaluator.value(of: membership.group, in: $0) })))
            case let .ownerOf(target, key):
                let rows = try txn.records(in: target, matching: Query(Field(Meta.owner) == me && Field(SystemField.deleted) == false))
                try add(whereKey: key, in: rows.compactMap { $0[Meta.item].stringValue.map(Value.string) })
            }
        }
        return try found.values.sorted { $0.id < $1.id }.filter { try evaluator.canRead($0, in: table, claims: claims, txn) }
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
