import COfflineSyncLMDB
import OfflineSync
import OfflineSyncStoreKit

/// Answers a query on one table. Every plan only narrows or orders the records it hands to
/// ``QueryEvaluator``, which decides the result, so results always equal the evaluator's:
///
/// 1. **equality on an index prefix**: the predicate is (a conjunction containing) `field ==
///    literal` or `field IN (literals)` for the leading fields of an index, each literal of
///    the field's declared type; only the index ranges with those prefixes are read;
/// 2. **ordered by an index**: the first ordering key is the first field of an index and is
///    declared bool, int or date (fixed-width keys, so index order is the evaluator's order),
///    and the query has a limit: the index is walked in order and stops once enough records
///    matched and the ordering value changes;
/// 3. **first records by id**: no ordering key and a limit: the records are walked in key
///    (= id) order and the walk stops once enough matched;
/// 4. otherwise every record of the table is decoded and tested, one at a time.
///
/// `count(.all)` reads the entry count of the records database without decoding anything.
struct LMDBQueryPlanner {
    let transaction: LMDBReadTransaction
    let entry: LMDBTable

    func records(_ query: Query) throws -> [Record] {
        let dbi = try transaction.recordsDatabase(entry)
        if let records = try equalityCandidates(query.predicate, dbi: dbi) {
            return QueryEvaluator.apply(query, to: records)
        }
        if let limit = query.limit {
            let wanted = query.offset.addingReportingOverflow(limit)
            let needed = wanted.overflow ? Int.max : wanted.partialValue
            if let first = query.order.first {
                if let ordered = try orderedScan(first, query.predicate, needed: needed, dbi: dbi) {
                    return QueryEvaluator.apply(query, to: ordered)
                }
            } else {
                return QueryEvaluator.apply(query, to: try firstByID(query.predicate, needed: needed, dbi: dbi))
            }
        }
        var matched: [Record] = []
        try transaction.scan(dbi) { _, value in
            let record = try LMDBReadTransaction.decode(value)
            if QueryEvaluator.matches(record, query.predicate) { matched.append(record) }
            return true
        }
        return QueryEvaluator.apply(Query(.all, order: query.order, limit: query.limit, offset: query.offset), to: matched)
    }

    func count(_ predicate: QueryPredicate) throws -> Int {
        let dbi = try transaction.recordsDatabase(entry)
        if predicate == .all { return try transaction.entryCount(dbi) }
        if let records = try equalityCandidates(predicate, dbi: dbi) {
            return records.reduce(0) { count, record in count + (QueryEvaluator.matches(record, predicate) ? 1 : 0) }
        }
        var count = 0
        try transaction.scan(dbi) { _, value in
            if QueryEvaluator.matches(try LMDBReadTransaction.decode(value), predicate) { count += 1 }
            return true
        }
        return count
    }

    /// Plan 1: the records of the longest index prefix the predicate fixes, or `nil`. A field
    /// fixed by `field IN (…)` fans the prefix out into one per listed value (at most
    /// ``maxPrefixes`` in all), each read as its own index range: the queue's "which of these
    /// items have operations" reads only those items' entries, not the whole table's.
    private func equalityCandidates(_ predicate: QueryPredicate, dbi: MDB_dbi) throws -> [Record]? {
        // The fields compared with literals, each with its literals: a short list searched by
        // its names' bytes (a query names a few fields; hashing them into a dictionary, and
        // building each prefix through `flatMap`, was most of the newest-operation look-up
        // every local write makes, in `perf` of local-writes-lmdb).
        var fixed: [(field: ExactString, literals: [Value])] = []
        func literals(of field: ExactString) -> [Value]? { fixed.first { $0.field == field }?.literals }
        for conjunct in Self.conjuncts(predicate) {
            let field: String, literals: [Value]
            switch conjunct {
            case let .compare(name, .equal, literal): (field, literals) = (name, [literal])
            case let .isIn(name, list): (field, literals) = (name, list)
            default: continue
            }
            guard let declared = entry.schema.field(named: field),
                  literals.allSatisfy({ LMDBIndexKey.isExactEquality($0, declared.type) }) else { continue }
            // Two conjuncts on one field: either narrows the rows; keep the shorter list.
            let key = ExactString(field)
            if let known = fixed.firstIndex(where: { $0.field == key }) {
                if fixed[known].literals.count > literals.count { fixed[known].literals = literals }
            } else {
                fixed.append((key, literals))
            }
        }
        guard !fixed.isEmpty else { return nil }
        var best: (position: Int, prefixes: [[UInt8]], length: Int)?
        for (position, fields) in entry.indexes.enumerated() {
            var prefixes: [[UInt8]] = [[]]
            var length = 0
            for field in fields {
                guard let literals = literals(of: ExactString(field)), prefixes.count * literals.count <= Self.maxPrefixes else { break }
                if literals.count == 1 {
                    // One value: every prefix grows in place.
                    for i in prefixes.indices { LMDBIndexKey.append(literals[0], to: &prefixes[i]) }
                } else {
                    prefixes = prefixes.flatMap { prefix in
                        literals.map { literal in
                            var longer = prefix
                            LMDBIndexKey.append(literal, to: &longer)
                            return longer
                        }
                    }
                }
                length += 1
            }
            if length > 0, prefixes.allSatisfy({ $0.count < LMDBIndexKey.maxLength }), length > (best?.length ?? 0) {
                best = (position, prefixes, length)
            }
        }
        guard let best else { return nil }
        let index = try transaction.indexDatabase(entry, best.position)
        let fields = entry.indexes[best.position]
        var records: [Record] = []
        // Each distinct prefix once: a value listed twice must not return its records twice.
        for prefix in best.prefixes.count == 1 ? best.prefixes : Array(Set(best.prefixes)) {
            try transaction.scan(index, from: prefix) { key, data in
                guard key.buffer.starts(with: prefix) else { return false }
                records.append(try indexed(dbi, fields, key, data))
                return true
            }
        }
        return records
    }

    /// The most index ranges one query reads through `IN` lists; beyond it the plan uses the
    /// fields before the list.
    static let maxPrefixes = 10_000

    /// The record an index entry points at, checked against the entry. An entry that points
    /// at no record, or at one whose values make another key, can only come from a damaged
    /// file: ``SyncError/Code/corrupted`` rather than a wrong answer.
    private func indexed(_ dbi: MDB_dbi, _ fields: [String], _ indexKey: MDB_val, _ recordKey: MDB_val) throws -> Record {
        guard let record = try transaction.fetch(dbi, key: recordKey.bytes),
              LMDBIndexKey.key(record, fields).elementsEqual(indexKey.buffer) else {
            throw SyncError(.corrupted, "table '\(entry.schema.name)': an index entry does not match its record: the store file is damaged")
        }
        return record
    }

    private static func conjuncts(_ predicate: QueryPredicate) -> [QueryPredicate] {
        if case .and(let parts) = predicate { return parts.flatMap(conjuncts) }
        return [predicate]
    }

    /// Plan 2: the matching records in index order up to `needed`, plus every record that ties
    /// with the last on the ordering field, or `nil` when no index fits.
    private func orderedScan(_ key: SortKey, _ predicate: QueryPredicate, needed: Int, dbi: MDB_dbi) throws -> [Record]? {
        guard let declared = entry.schema.field(named: key.field), LMDBIndexKey.isFixedWidth(declared.type),
              let position = entry.indexes.firstIndex(where: { $0.first.map { $0.utf8.elementsEqual(key.field.utf8) } ?? false })
        else { return nil }
        let index = try transaction.indexDatabase(entry, position)
        let fields = entry.indexes[position]
        var matched: [Record] = []
        var cutoff: [UInt8]?
        try transaction.scan(index, reverse: !key.ascending) { indexKey, data in
            let buffer = indexKey.buffer
            guard let first = buffer.first else { return true }
            let width = first == 0 ? 1 : (first == 1 ? 2 : 9)
            let leading = Array(buffer.prefix(width))
            if let cutoff, cutoff != leading { return false }
            let record = try indexed(dbi, fields, indexKey, data)
            if QueryEvaluator.matches(record, predicate) {
                matched.append(record)
                if matched.count >= needed, cutoff == nil { cutoff = leading }
            }
            return true
        }
        return matched
    }

    /// Plan 3: the first `needed` matching records in key order (plus long ids that share the
    /// last one's key prefix, whose keys do not sort by id).
    private func firstByID(_ predicate: QueryPredicate, needed: Int, dbi: MDB_dbi) throws -> [Record] {
        var matched: [Record] = []
        var sharedPrefix: [UInt8]?
        var done = false
        try transaction.scan(dbi) { key, value in
            if done {
                guard let shared = sharedPrefix, key.buffer.starts(with: shared) else { return false }
            }
            let record = try LMDBReadTransaction.decode(value)
            if QueryEvaluator.matches(record, predicate) { matched.append(record) }
            if !done, matched.count >= needed {
                done = true
                if key.mv_size > LMDBLayout.directIdLength { sharedPrefix = Array(key.buffer.prefix(LMDBLayout.directIdLength + 1)) }
            }
            return true
        }
        return matched
    }
}
