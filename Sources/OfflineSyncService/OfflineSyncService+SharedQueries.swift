import OfflineSync
import OfflineSyncStoreKit

// The list APIs (the Datasync tables routes) over shared tables: the caller's data view is
// the rows the rules let it read — Datasync's `GetDataView` — and every query, count and
// lookup is made inside it, so nothing outside it is listed, counted or confirmed to exist.

extension OfflineSyncService {
    /// How many view entries go into one store query's `in (…)` list.
    private static let viewChunk = 500

    /// The caller's readable rows of the shared `table` (server form) that match `mapped`, a
    /// predicate already mapped onto stored names, tombstones only with `includeDeleted`. A
    /// caller an `everyone` grant admits reads the table; any other, the rows its view log
    /// holds as visible, looked up by id in chunks. Each row is checked by the full rules.
    ///
    /// The cost follows the caller's view, not the table: the view log is read through its
    /// (identity, table, sequence) index, and the predicate is applied by the store.
    func readableRows(claims: Claims, table: String, matching mapped: QueryPredicate, includeDeleted: Bool,
                      _ txn: any LocalReadTransaction) throws -> [Record] {
        var parts: [QueryPredicate] = []
        if mapped != .all { parts.append(mapped) }
        if !includeDeleted { parts.append(Field(SystemField.deleted) == false) }
        let wanted: QueryPredicate = parts.isEmpty ? .all : .and(parts)
        var candidates: [Record] = []
        if readsDirectly(table, claims: claims) {
            candidates = try txn.records(in: table, matching: Query(wanted))
        } else {
            let entries = try ViewRow.all(txn, Query(ViewRow.after(-1, identity: claims.identity, table: table)
                && ViewRow.field(.visible) == true))
            var start = 0
            while start < entries.count {
                let chunk = entries[start..<min(start + Self.viewChunk, entries.count)].map { Value.string($0.item) }
                let inChunk: QueryPredicate = .isIn(Meta.item, chunk)
                candidates += try txn.records(in: table, matching: Query(wanted == .all ? inChunk : inChunk && wanted))
                start += Self.viewChunk
            }
        }
        return try candidates.filter { try evaluator.canRead($0, in: table, claims: claims, txn) }
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
