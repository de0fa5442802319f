/// Brings an observation's last result up to date from the rows later commits wrote, without
/// reading the store: the same result a read would give, or `nil` when the rows at hand
/// cannot decide it (then the observation reads).
///
/// The changes are the commits since the result was read or patched, in commit order, each
/// listing every row it wrote or deleted (``TableChange/written``); a change already in the
/// result is applied again harmlessly. The result must be in the query's order, as a read
/// returns it and as ``QueryEvaluator`` defines it.
///
/// A few rows are moved in place (a linear search by id, a binary search for the new
/// position), so a patch costs about one pass over the result, with no hashing of every
/// row; it also says exactly whether the result changed and which rows entered or left it,
/// so the observation compares nothing and its watcher updates the rows it shows in place.
enum ResultPatch {
    /// A patched result.
    struct Patched {
        /// The rows, in the query's order; the last result itself when nothing changed.
        var rows: [Record]
        /// The rows differ from the last result.
        var changed: Bool
        /// How the ids of the rows shown changed.
        var shown: ShownUpdate
    }

    /// How the ids of the rows an observation shows changed with a patch.
    enum ShownUpdate {
        /// These ids entered the result and these left it.
        case delta(entered: [ExactString], left: [ExactString])
        /// The result was rebuilt: the ids are those of its rows.
        case rebuilt
    }

    /// Changed rows past which a patch rebuilds the result (remove, append, sort) rather than
    /// moving each row: each move is a pass over the result.
    static let movesLimit = 32

    /// The records of a query without an offset, patched. A result cut by a limit is patched
    /// only as far as it is known: rows the last result left out all sort after its last row,
    /// so a patch that would need one of them returns `nil`.
    static func query(_ query: Query, last: [Record], changes: [TableChange]) -> Patched? {
        guard query.offset == 0, let latest = Latest(changes) else { return nil }
        if latest.ids.isEmpty { return Patched(rows: last, changed: false, shown: .delta(entered: [], left: [])) }
        if latest.ids.count > movesLimit { return rebuilt(query, last: last, latest: latest) }
        var rows = last
        // The ids taken out of the last result, and those put in that it did not hold.
        var removed: [ExactString] = [], inserted: [ExactString] = []
        for id in latest.ids {
            let old = rows.firstIndex { ExactString.sameBytes($0.id, id.value) }
            let new = latest.written[id].flatMap { QueryEvaluator.matches($0, query.predicate) ? $0 : nil }
            if let old, let new, rows[old] == new { continue }
            if let old {
                rows.remove(at: old)
                removed.append(id)
            }
            if let new {
                rows.insert(new, at: insertionIndex(in: rows) { QueryEvaluator.areInIncreasingOrder($0, new, query.order) })
                if old == nil { inserted.append(id) }
            }
        }
        if removed.isEmpty, inserted.isEmpty { return Patched(rows: last, changed: false, shown: .delta(entered: [], left: [])) }
        var left = removed.filter { id in !rows.contains { ExactString.sameBytes($0.id, id.value) } }
        if let limit = query.limit {
            if last.count >= limit {
                // Rows the last result left out all sort after its last row: the rows known up
                // to that row must fill the limit.
                guard let boundary = last.last else { return nil }
                let known = rows.prefix { !QueryEvaluator.areInIncreasingOrder(boundary, $0, query.order) }.count
                guard known >= limit else { return nil }
            }
            if rows.count > limit {
                for row in rows[limit...] where !inserted.contains(ExactString(row.id)) { left.append(ExactString(row.id)) }
                rows.removeSubrange(limit...)
            }
        }
        let entered = inserted.filter { id in rows.contains { ExactString.sameBytes($0.id, id.value) } }
        // A row taken out but still there was changed in place; otherwise the result changed
        // only if a row entered or left.
        let changed = !entered.isEmpty || !left.isEmpty || removed.contains { id in rows.contains { ExactString.sameBytes($0.id, id.value) } }
        return Patched(rows: changed ? rows : last, changed: changed, shown: .delta(entered: entered, left: left))
    }

    /// The one record with `id` (an empty array while there is none), patched.
    static func record(id text: String, last: [Record], changes: [TableChange]) -> Patched? {
        let id = ExactString(text)
        var rows = last
        for change in changes {
            guard let ids = change.ids else { return nil }
            guard ids.contains(id) else { continue }
            guard let written = change.written else { return nil }
            rows = written[id].map { [$0] } ?? []
        }
        let changed = rows != last
        let entered = last.isEmpty ? rows.map { ExactString($0.id) } : [], left = rows.isEmpty ? last.map { ExactString($0.id) } : []
        return Patched(rows: changed ? rows : last, changed: changed, shown: .delta(entered: entered, left: left))
    }

    /// The rows some commits wrote or deleted, each as the last of them left it.
    struct Latest {
        /// Every row written or deleted.
        var ids: Set<ExactString>
        /// The rows written and not deleted since (an id of `ids` missing here was deleted).
        var written: [ExactString: Record]

        /// The rows `changes` wrote, in commit order; `nil` when a change does not list its
        /// rows. One change is taken as it is, without copying.
        init?(_ changes: [TableChange]) {
            guard let first = changes.first, let ids = first.ids, let written = first.written else {
                if changes.isEmpty { (self.ids, self.written) = ([], [:]); return }
                return nil
            }
            (self.ids, self.written) = (ids, written)
            for change in changes.dropFirst() {
                guard let ids = change.ids, let written = change.written else { return nil }
                for id in ids { self.written[id] = written[id] }
                self.ids.formUnion(ids)
            }
        }
    }

    /// Where an element goes in `sorted`: after every element that `precedes` it.
    static func insertionIndex<Element>(in sorted: [Element], after precedes: (Element) -> Bool) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if precedes(sorted[mid]) { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
