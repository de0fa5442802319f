import OfflineSync

/// How an SQL adapter answers ``LocalReadTransaction/read(_:)``: each `.records` read on its
/// own, the `.record` reads of one table together, so one statement can fetch many ids (a
/// pull reads a page's items this way).
package enum GroupedReads {
    /// The answers to `reads`, in order. `records` answers a query; `lookUp` gets a table's
    /// (named exactly as the reads name it, tables in the order first read) distinct ids, each
    /// once, and returns the rows it found in any order; a read whose id it did not return gets
    /// no record.
    package static func answer(_ reads: [LocalRead], records: (_ table: String, Query) throws -> [Record],
                               lookUp: (_ table: String, _ ids: [String]) throws -> [Record]) throws -> [[Record]] {
        var answers = [[Record]](repeating: [], count: reads.count)
        var groups: [ExactString: (name: String, reads: [(index: Int, id: String)])] = [:]
        var order: [ExactString] = []
        for (index, read) in reads.enumerated() {
            switch read {
            case let .record(table, id):
                let key = ExactString(table)
                if groups[key] == nil {
                    groups[key] = (table, [])
                    order.append(key)
                }
                groups[key]!.reads.append((index, id))
            case let .records(table, query):
                answers[index] = try records(table, query)
            }
        }
        for key in order {
            let (table, wanted) = groups[key]!
            var ids: [String] = []
            var seen = Set<ExactString>(minimumCapacity: wanted.count)
            for (_, id) in wanted where seen.insert(ExactString(id)).inserted { ids.append(id) }
            var found: [ExactString: Record] = [:]
            found.reserveCapacity(ids.count)
            for row in try lookUp(table, ids) { found[ExactString(row.id)] = row }
            for (index, id) in wanted { answers[index] = found[ExactString(id)].map { [$0] } ?? [] }
        }
        return answers
    }
}
