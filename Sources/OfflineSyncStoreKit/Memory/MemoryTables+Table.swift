import Foundation
import OfflineSync

extension MemoryTables {
    /// One table: used only while the engine's lock is held.
    final class Table {
        var schema: TableSchema
        var rows: [RowID: Record] = [:]
        /// Hash indexes by field: value key → ids.
        var equality: [ExactString: [IndexKey: Set<RowID>]] = [:]
        /// Sorted indexes by field.
        var ordered: [ExactString: OrderedIndex] = [:]
        /// The fields of `equality` and `ordered`, iterated without touching the dictionaries.
        var equalityFields: [ExactString] = []
        var orderedFields: [ExactString] = []
        /// The smallest id, once computed (`.some(nil)`: the table is empty); kept up to date on
        /// inserts and forgotten when it is deleted. `first(in:matching: .all)` asks for it in
        /// every sync transaction.
        var smallestID: RowID??
        /// How many records the last write transaction touched here: the next one reserves
        /// that much room for its bookkeeping.
        var touchedHint = 0


        init(schema: TableSchema) { self.schema = schema }

        /// Stores or removes a record, keeping the indexes up to date; returns the previous one.
        func set(_ id: RowID, _ record: Record?) -> Record? {
            let previous: Record?
            if let record { previous = rows.updateValue(record, forKey: id) } else { previous = rows.removeValue(forKey: id) }
            if case .some(let smallest) = smallestID {
                if previous == nil, record != nil, smallest.map({ id.utf8Less(than: $0) }) ?? true {
                    smallestID = .some(id)
                } else if previous != nil, record == nil, smallest == id {
                    smallestID = nil
                }
            }
            for field in equalityFields {
                let old = previous.flatMap { IndexKey($0[field.value]) }, new = record.flatMap { IndexKey($0[field.value]) }
                if previous != nil && record != nil && old == new { continue }
                if let old { equality[field]![old]?.remove(id) }
                if let new { equality[field]![new, default: []].insert(id) }
            }
            for field in orderedFields {
                if let previous { ordered[field]!.remove(previous[field.value], id) }
                if let record { ordered[field]!.insert(record[field.value], id) }
            }
            return previous
        }

        /// The records matching `query`, exactly as `QueryEvaluator/apply(_:to:)` orders them.
        func select(_ query: Query) -> [Record] {
            if let ids = candidates(query.predicate) {
                // Nothing to evaluate (the newest-operation look-up of every new item's insert):
                // the evaluator's generic pass over an empty sequence cost a third of it in `perf`.
                if ids.isEmpty { return [] }
                let rows = self.rows
                return QueryEvaluator.apply(query, to: ids.lazy.compactMap { rows[$0] })
            }
            guard let limit = query.limit else { return QueryEvaluator.apply(query, to: rows.values) }
            let needed = limit > Int.max - query.offset ? Int.max : query.offset + limit
            if limit <= 0 { return [] }
            let first = query.order.first ?? SortKey(SystemField.id)
            if first.field == SystemField.id {
                // Ids are unique, so a sorted index would be all maintenance and no grouping:
                // keep the best `needed` of one pass instead (over the keys alone when every
                // record matches).
                if case .all = query.predicate {
                    if needed == 1 && first.ascending && query.offset == 0 {
                        if smallestID == nil { smallestID = .some(Table.topIDs(1, ascending: true, of: rows.keys).first) }
                        return smallestID!.map { [rows[$0]!] } ?? []
                    }
                    return Table.topIDs(needed, ascending: first.ascending, of: rows.keys)
                        .dropFirst(query.offset).map { rows[$0]! }
                }
                return Table.top(needed, offset: query.offset, of: rows.values, query)
            }
            let field = ExactString(first.field)
            if ordered[field] == nil {
                var index = OrderedIndex()
                index.build(rows.map { ($0.value[field.value], $0.key) })
                ordered[field] = index
                orderedFields.append(field)
            }
            let entries = ordered[field]!.entries
            var result: [Record] = []
            var position = first.ascending ? 0 : entries.count - 1
            while result.count < needed && entries.indices.contains(position) {
                // One group of equal values of the first key, ordered by the full query order.
                let groupValue = entries[position].value
                var group: [Record] = []
                while entries.indices.contains(position), QueryEvaluator.orderCompare(entries[position].value, groupValue) == 0 {
                    if let record = rows[entries[position].id], QueryEvaluator.matches(record, query.predicate) { group.append(record) }
                    position += first.ascending ? 1 : -1
                }
                group.sort { QueryEvaluator.areInIncreasingOrder($0, $1, query.order) }
                result += group
            }
            let start = min(query.offset, result.count)
            return Array(result[start..<min(needed, result.count)])
        }

        /// The `needed` smallest (or largest) ids, in that order.
        static func topIDs(_ needed: Int, ascending: Bool, of ids: Dictionary<RowID, Record>.Keys) -> [RowID] {
            func before(_ a: RowID, _ b: RowID) -> Bool {
                ascending ? a.utf8Less(than: b) : b.utf8Less(than: a)
            }
            var best: [RowID] = []
            for id in ids {
                if best.count == needed {
                    guard before(id, best[needed - 1]) else { continue }
                    best.removeLast()
                }
                var low = 0, high = best.count
                while low < high {
                    let mid = (low + high) / 2
                    if before(best[mid], id) { low = mid + 1 } else { high = mid }
                }
                best.insert(id, at: low)
            }
            return best
        }

        /// The first `needed` records matching `query` in its order, from one pass that keeps
        /// only the best so far, then `offset` of them dropped.
        static func top(_ needed: Int, offset: Int, of records: Dictionary<RowID, Record>.Values, _ query: Query) -> [Record] {
            var best: [Record] = []
            best.reserveCapacity(min(needed, 1024))
            for record in records where QueryEvaluator.matches(record, query.predicate) {
                if best.count == needed {
                    guard QueryEvaluator.areInIncreasingOrder(record, best[needed - 1], query.order) else { continue }
                    best.removeLast()
                }
                var low = 0, high = best.count
                while low < high {
                    let mid = (low + high) / 2
                    if QueryEvaluator.areInIncreasingOrder(best[mid], record, query.order) { low = mid + 1 } else { high = mid }
                }
                best.insert(record, at: low)
            }
            return Array(best[min(offset, best.count)...])
        }

        /// The number of records matching `predicate`.
        func count(_ predicate: QueryPredicate) -> Int {
            if case .all = predicate { return rows.count }
            if let ids = candidates(predicate) {
                if ids.isEmpty { return 0 }
                let rows = self.rows
                return QueryEvaluator.count(predicate, in: ids.lazy.compactMap { rows[$0] })
            }
            return QueryEvaluator.count(predicate, in: rows.values)
        }

        /// A superset of the ids matching `predicate` from the equality indexes, or `nil` when
        /// no index narrows it (then every record is a candidate).
        func candidates(_ predicate: QueryPredicate) -> Set<RowID>? {
            switch predicate {
            case .compare(let field, .equal, let literal):
                guard let key = IndexKey(literal) else { return nil }
                if field == SystemField.id {
                    guard case .string(let id) = literal else { return nil }
                    let key = RowID(id)
                    return rows[key] == nil ? [] : [key]
                }
                return ids(field, [key])
            case .isIn(let field, let literals):
                let present = literals.filter { !$0.isNull }
                let keys = present.compactMap(IndexKey.init)
                guard keys.count == present.count, field != SystemField.id else { return nil }
                return ids(field, keys)
            case .and(let parts):
                var best: Set<RowID>?
                for part in parts {
                    if let ids = candidates(part), ids.count < (best?.count ?? .max) { best = ids }
                    if best?.isEmpty == true { break }
                }
                return best
            default:
                return nil
            }
        }

        private func ids(_ name: String, _ keys: [IndexKey]) -> Set<RowID> {
            let field = ExactString(name)
            if equality[field] == nil {
                var index: [IndexKey: Set<RowID>] = [:]
                for (id, record) in rows {
                    if let key = IndexKey(record[name]) { index[key, default: []].insert(id) }
                }
                equality[field] = index
                equalityFields.append(field)
            }
            if keys.count == 1 { return equality[field]![keys[0]] ?? [] }
            var union = Set<RowID>()
            for key in keys { union.formUnion(equality[field]![key] ?? []) }
            return union
        }
    }

    /// A value as a hash key, equal exactly when `QueryEvaluator` finds the values equal
    /// (an integer and a double of the same number share a key). `nil` for null, arrays and
    /// objects, which an equality index does not cover.
    enum IndexKey: Hashable {
        case bool(Bool), number(Int64), double(UInt64), string(ExactString), bytes([UInt8]), date(Int64)

        init?(_ value: Value) {
            switch value {
            case .bool(let b): self = .bool(b)
            case .int(let i): self = .number(i)
            case .double(let d):
                if d.isNaN { return nil }
                if d == d.rounded(.towardZero), d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0 {
                    self = .number(Int64(d))
                } else {
                    self = .double(d.bitPattern)
                }
            case .string(let s): self = .string(ExactString(s))
            case .bytes(let b): self = .bytes(b)
            case .date(let t): self = .date(t.millisecondsSince1970)
            case .null, .array, .object: return nil
            }
        }
    }

    /// Every record's value of one field with its id, sorted by `QueryEvaluator/orderCompare(_:_:)`
    /// then id.
    struct OrderedIndex {
        var entries: [(value: Value, id: RowID)] = []

        private static func less(_ a: Value, _ aID: RowID, _ b: Value, _ bID: RowID) -> Bool {
            let c = QueryEvaluator.orderCompare(a, b)
            if c != 0 { return c < 0 }
            return Value.utf8Less(aID.value, bID.value)
        }

        mutating func build(_ items: [(Value, RowID)]) {
            entries = items.map { (value: $0.0, id: $0.1) }
            entries.sort { OrderedIndex.less($0.value, $0.id, $1.value, $1.id) }
        }

        private func lowerBound(_ value: Value, _ id: RowID) -> Int {
            var low = 0, high = entries.count
            while low < high {
                let mid = (low + high) / 2
                if OrderedIndex.less(entries[mid].value, entries[mid].id, value, id) { low = mid + 1 } else { high = mid }
            }
            return low
        }

        mutating func insert(_ value: Value, _ id: RowID) {
            if let last = entries.last, !OrderedIndex.less(last.value, last.id, value, id) {
                entries.insert((value, id), at: lowerBound(value, id))
            } else {
                entries.append((value, id))
            }
        }

        mutating func remove(_ value: Value, _ id: RowID) {
            let position = lowerBound(value, id)
            if position < entries.count, entries[position].id == id { entries.remove(at: position) }
        }
    }
}

extension Record {
    /// A cheap estimate of the encoded size, for chunking snapshots.
    var estimatedEncodedSize: Int {
        var size = 16 + id.utf8.count
        for (key, value) in fields { size += key.utf8.count + value.estimatedEncodedSize }
        return size
    }
}

extension Value {
    fileprivate var estimatedEncodedSize: Int {
        switch self {
        case .null, .bool: return 1
        case .int, .date, .double: return 9
        case .string(let s): return 2 + s.utf8.count
        case .bytes(let b): return 2 + b.count
        case .array(let items): return items.reduce(2) { $0 + $1.estimatedEncodedSize }
        case .object(let object): return object.reduce(2) { $0 + $1.key.utf8.count + 1 + $1.value.estimatedEncodedSize }
        }
    }
}

extension ExactString {
    /// Whether the UTF-8 bytes order before `other`'s (`Value/utf8Less(_:_:)`).
    func utf8Less(than other: ExactString) -> Bool { Value.utf8Less(value, other.value) }
}

extension MemoryTables {
    /// A row's id as the tables key it: its exact bytes (``ExactString``), with their hash
    /// computed once. Swift's dictionaries and sets keep no hashes, so growing one hashes every
    /// key again, and a probe compares each key it passes: growing the row dictionaries and
    /// the equality indexes' id sets, and comparing ids byte by byte on the way, was about a
    /// fifth of local-writes-encrypted-file in `perf`. With the hash kept, growing feeds one
    /// integer per key to the hasher, and a probe compares integers before bytes.
    struct RowID: Hashable {
        let exact: ExactString
        private let hash: Int

        init(_ id: String) {
            exact = ExactString(id)
            hash = exact.hashValue
        }

        /// The id.
        var value: String { exact.value }

        static func == (lhs: RowID, rhs: RowID) -> Bool { lhs.hash == rhs.hash && lhs.exact == rhs.exact }

        func hash(into hasher: inout Hasher) { hasher.combine(hash) }

        /// The kept hash mixed with the table's seed, without a `Hasher`: through the default,
        /// every look-up, insert and regrowth of a row or index-set dictionary still ran a
        /// `Hasher` over the one kept word (4.4% of local-writes-encrypted-file in `perf`).
        /// The kept hash is already a seeded `Hasher`'s, so flooding is no easier; the seed is
        /// mixed in (SplitMix64's finalizer, not a plain xor) so that two dictionaries with
        /// different seeds order ids differently, as the standard library's types do, and
        /// moving one's ids into another stays linear.
        func _rawHashValue(seed: Int) -> Int {
            var x = UInt64(truncatingIfNeeded: hash ^ seed)
            x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
            x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int(truncatingIfNeeded: x ^ (x >> 31))
        }

        /// Whether the UTF-8 bytes order before `other`'s (`Value/utf8Less(_:_:)`).
        func utf8Less(than other: RowID) -> Bool { exact.utf8Less(than: other.exact) }
    }
}
