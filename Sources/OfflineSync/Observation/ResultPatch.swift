/// Brings an observation's last result up to date from the rows later commits wrote, without
/// reading the store: the same result a read would give, or `nil` when the rows at hand
/// cannot decide it (then the observation reads).
///
/// The changes are the commits since the result was read or patched, in commit order, each
/// listing every row it wrote or deleted (``TableChange/written``); a change already in the
/// result is applied again harmlessly. The result must be in the query's order, as a read
/// returns it and as ``QueryEvaluator`` defines it.
enum ResultPatch {
    /// The records of a query without an offset, patched. A result cut by a limit is patched
    /// only as far as it is known: rows the last result left out all sort after its last row,
    /// so a patch that would need one of them returns `nil`.
    static func query(_ query: Query, last: [Record], changes: [TableChange]) -> [Record]? {
        guard query.offset == 0 else { return nil }
        var rows = last
        for change in changes {
            guard let written = change.written, let ids = change.ids else { return nil }
            rows.removeAll { ids.contains($0.id) }
            for record in written.values where QueryEvaluator.matches(record, query.predicate) { rows.append(record) }
        }
        rows.sort { QueryEvaluator.areInIncreasingOrder($0, $1, query.order) }
        guard let limit = query.limit else { return rows }
        // The last result held every matching row: so does the patched one.
        if last.count < limit { return Array(rows.prefix(limit)) }
        guard let boundary = last.last else { return nil }
        let known = rows.prefix { !QueryEvaluator.areInIncreasingOrder(boundary, $0, query.order) }
        return known.count >= limit ? Array(known.prefix(limit)) : nil
    }

    /// The one record with `id` (an empty array while there is none), patched.
    static func record(id: String, last: [Record], changes: [TableChange]) -> [Record]? {
        var rows = last
        for change in changes {
            guard let ids = change.ids else { return nil }
            guard ids.contains(id) else { continue }
            guard let written = change.written else { return nil }
            rows = written[id].map { [$0] } ?? []
        }
        return rows
    }
}
