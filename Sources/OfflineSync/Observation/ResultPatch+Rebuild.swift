extension ResultPatch {
    /// A record with the value of its query's first sort key taken out once, so comparing
    /// two of them looks up no field unless that key ties.
    struct Ordered {
        let record: Record
        let first: Value

        init(_ record: Record, _ order: [SortKey]) {
            self.record = record
            first = order.first.map { record[$0.field] } ?? .null
        }

        /// `a` sorts before `b` in `order` (``QueryEvaluator/areInIncreasingOrder(_:_:_:)``).
        static func precedes(_ a: Ordered, _ b: Ordered, _ order: [SortKey]) -> Bool {
            guard let key = order.first else { return Value.utf8Less(a.record.id, b.record.id) }
            let c = QueryEvaluator.orderCompare(a.first, b.first)
            if c != 0 { return key.ascending ? c < 0 : c > 0 }
            return QueryEvaluator.areInIncreasingOrder(a.record, b.record, order)
        }
    }

    /// The patch for many changed rows (a pulled page): the last result's other rows, merged
    /// with the changed rows that match, in order. Under a limit only the first `limit`
    /// matching rows are kept as they come, so a page costs about one comparison per row,
    /// not a sort of every row that matches.
    static func rebuilt(_ query: Query, last: [Record], latest: Latest) -> Patched? {
        let order = query.order
        var candidates: [Ordered] = []
        for record in latest.written.values where QueryEvaluator.matches(record, query.predicate) {
            let candidate = Ordered(record, order)
            guard let limit = query.limit else {
                candidates.append(candidate)
                continue
            }
            if candidates.count >= limit, let worst = candidates.last, !Ordered.precedes(candidate, worst, order) { continue }
            candidates.insert(candidate, at: insertionIndex(in: candidates) { Ordered.precedes($0, candidate, order) })
            if candidates.count > limit { candidates.removeLast() }
        }
        if query.limit == nil { candidates.sort { Ordered.precedes($0, $1, order) } }
        let rows = merged(last.lazy.filter { !latest.ids.contains(ExactString($0.id)) }, candidates, order, limit: query.limit)
        if let limit = query.limit, last.count >= limit {
            // Rows the last result left out all sort after its last row: the rows known up to
            // that row must fill the limit.
            guard let boundary = last.last, rows.count >= limit,
                  !QueryEvaluator.areInIncreasingOrder(boundary, rows[limit - 1], order) else { return nil }
        }
        let changed = rows != last
        return Patched(rows: changed ? rows : last, changed: changed, shown: .rebuilt)
    }

    /// `kept` and `candidates`, each in `order`, merged in order, up to `limit` rows.
    private static func merged(_ kept: some Sequence<Record>, _ candidates: [Ordered], _ order: [SortKey], limit: Int?) -> [Record] {
        let limit = limit ?? .max
        var rows: [Record] = []
        var kept = kept.makeIterator(), next = kept.next().map { Ordered($0, order) }
        var index = candidates.startIndex
        while rows.count < limit {
            if let row = next, index == candidates.endIndex || Ordered.precedes(row, candidates[index], order) {
                rows.append(row.record)
                next = kept.next().map { Ordered($0, order) }
            } else if index < candidates.endIndex {
                rows.append(candidates[index].record)
                index += 1
            } else {
                break
            }
        }
        return rows
    }
}
