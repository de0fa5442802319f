import Foundation
import OfflineSync

/// An in-memory table engine that key/value-style adapters build on: tables of records keyed
/// by exact id, schema definition and migration with the checks every store makes, read and
/// write transactions, and queries through ``QueryEvaluator``.
///
/// Every change is described by a ``ChangeSet`` that is handed to a *commit hook* before the
/// transaction ends, so an adapter can persist it first (append it to a log, put it in a
/// key/value database) and replay it later with ``apply(_:)``:
///
/// ```swift
/// let tables = MemoryTables()
/// try tables.define(schema) { changes in try log.append(changes.encode()) }
/// let n = try tables.write({ tx in try tx.upsert(record, in: "items"); return 1 },
///                          commit: { changes in try log.append(changes.encode()) })
/// ```
///
/// If the hook throws, memory is put back exactly as it was and the error is rethrown.
///
/// Queries are answered from indexes the engine builds on demand and then keeps up to date:
/// a hash index per field compared with `==` or `in` (a conjunction uses its most selective
/// field), and a sorted index per field a limited query orders by (the id when it orders by
/// nothing). Results are always exactly what ``QueryEvaluator`` returns on all the records.
///
/// Concurrency: transactions, definitions and replays run one at a time (serializable), each
/// holding the engine's lock for its duration, commit hook included, so no reader ever sees a
/// change that is not committed. ``snapshot(maxChunkBytes:_:)`` copies the state (copy on
/// write) and works outside the lock. Closures run on the caller's thread and must not call
/// back into the same engine.
public final class MemoryTables: @unchecked Sendable {
    // @unchecked Sendable: every access to `tables` (and the Table objects in it) holds
    // `lock`; `snapshot` iterates copies of the row dictionaries, values no one else can reach.
    // An NSLock rather than a Mutex: the lock is held while the caller's closures run and
    // return results of any type, which a Mutex's `sending` result would refuse.
    private let lock = NSLock()
    private var tables: [ExactString: Table] = [:]

    /// Creates an engine with no tables.
    public init() {}

    // MARK: - Schema

    /// Defines a table, or migrates it to a changed schema: checks names
    /// (``TableSchema/validate()``) and that every stored record fits the new declared field
    /// types, then calls `commit` with a change set holding the definition, then applies it.
    /// Defining a table exactly as it is already defined changes nothing and does not call
    /// `commit`.
    ///
    /// Throws ``SyncError/Code/invalidName``, ``SyncError/Code/schemaMismatch``, or what
    /// `commit` throws; on any error nothing changes.
    public func define(_ schema: TableSchema, commit: (ChangeSet) throws -> Void) throws {
        try schema.validate()
        lock.lock()
        defer { lock.unlock() }
        let key = ExactString(schema.name)
        if let table = tables[key] {
            if table.schema == schema { return }
            for record in table.rows.values {
                for field in schema.fields where !field.type.accepts(record[field.name]) {
                    throw SyncError(.schemaMismatch, "table '\(schema.name)': record '\(record.id)' has a \(record[field.name].kind.rawValue) in field '\(field.name)', which the new schema declares \(field.type.rawValue)")
                }
            }
        }
        try commit(ChangeSet(definitions: [schema]))
        if tables[key] == nil { tables[key] = Table(schema: schema) } else { tables[key]!.schema = schema }
    }

    /// The number of records in all tables.
    public var recordCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return tables.values.reduce(0) { $0 + $1.rows.count }
    }

    /// Every defined table's schema, ordered by name (UTF-8 byte order).
    public var schemas: [TableSchema] {
        lock.lock()
        defer { lock.unlock() }
        return tables.values.map(\.schema).sorted { Value.utf8Less($0.name, $1.name) }
    }

    // MARK: - Transactions

    /// Runs `body` in a read transaction that sees one consistent state. The transaction is
    /// lent to `body` and throws ``SyncError/Code/storeClosed`` if used after it returned.
    public func read<T>(_ body: (any LocalReadTransaction) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        let transaction = Transaction(engine: self, writable: false)
        defer { transaction.isOpen = false }
        return try body(transaction)
    }

    /// Runs `body` in a write transaction (it reads its own writes). When it returns, `commit`
    /// receives the net changes as one ``ChangeSet``; once `commit` returns, the transaction is
    /// committed. If `body` or `commit` throws, every change is undone and the error is
    /// rethrown. `commit` is not called when the transaction changed nothing.
    public func write<T>(_ body: (any LocalWriteTransaction) throws -> T,
                         commit: (ChangeSet) throws -> Void) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        let transaction = Transaction(engine: self, writable: true)
        defer { transaction.isOpen = false }
        do {
            let result = try body(transaction)
            transaction.isOpen = false
            let changes = transaction.changeSet()
            if !changes.isEmpty { try commit(changes) }
            return result
        } catch {
            transaction.rollback()
            throw error
        }
    }

    /// Applies a change set produced by ``write(_:commit:)`` or ``define(_:commit:)`` (when an
    /// adapter replays its log): definitions first, then upserts and deletes, without running
    /// the checks again. Throws ``SyncError/Code/tableNotDefined`` (changing nothing) if it
    /// changes records of a table that is neither defined nor defined by the change set.
    public func apply(_ changes: ChangeSet) throws {
        lock.lock()
        defer { lock.unlock() }
        let defined = Set(changes.definitions.map { ExactString($0.name) })
        for table in changes.tables where tables[ExactString(table.table)] == nil && !defined.contains(ExactString(table.table)) {
            throw SyncError(.tableNotDefined, "a change set changes records of table '\(table.table)', which is not defined")
        }
        for schema in changes.definitions {
            let key = ExactString(schema.name)
            if tables[key] == nil { tables[key] = Table(schema: schema) } else { tables[key]!.schema = schema }
        }
        for table in changes.tables {
            let key = ExactString(table.table)
            for record in table.upserts { _ = tables[key]!.set(ExactString(record.id), record) }
            for id in table.deletes { _ = tables[key]!.set(ExactString(id), nil) }
        }
    }

    /// Describes the current state as a sequence of change sets which, applied in order to an
    /// empty engine, rebuild it: first one with every table definition, then the records in
    /// chunks of roughly `maxChunkBytes` of encoded records each (so a compacting adapter never
    /// holds a second encoded copy of everything). It works on a copy-on-write copy taken at
    /// the start, outside the lock. Rethrows what `emit` throws.
    public func snapshot(maxChunkBytes: Int = 1 << 20, _ emit: (ChangeSet) throws -> Void) throws {
        lock.lock()
        let ordered = tables.sorted { Value.utf8Less($0.key.value, $1.key.value) }
            .map { (key: $0.key, value: (schema: $0.value.schema, rows: $0.value.rows)) }
        lock.unlock()
        try emit(ChangeSet(definitions: ordered.map(\.value.schema)))
        var chunk = ChangeSet()
        var chunkBytes = 0
        for (name, table) in ordered {
            var upserts: [Record] = []
            for record in table.rows.values {
                upserts.append(record)
                chunkBytes += record.estimatedEncodedSize
                if chunkBytes >= maxChunkBytes {
                    chunk.tables.append(.init(table: name.value, upserts: upserts))
                    try emit(chunk)
                    chunk = ChangeSet()
                    upserts = []
                    chunkBytes = 0
                }
            }
            if !upserts.isEmpty { chunk.tables.append(.init(table: name.value, upserts: upserts)) }
        }
        if !chunk.isEmpty { try emit(chunk) }
    }

    /// A transaction over the engine; only used while `lock` is held. A writable one changes
    /// the tables in place and remembers each touched record's original for commit and undo.
    private final class Transaction: LocalWriteTransaction {
        unowned let engine: MemoryTables
        let writable: Bool
        var isOpen = true
        /// Per touched table (a handful at most, searched by identity): per touched id, the
        /// record before this transaction and the record now (`nil`: absent).
        var touched: [(key: ExactString, table: Table, changes: [ExactString: (original: Record?, current: Record?)])] = []
        /// The table looked up last: consecutive calls on one table skip the dictionary. Tables
        /// cannot be defined while a transaction holds the lock, so it stays valid.
        private var last: (key: ExactString, table: Table)?

        init(engine: MemoryTables, writable: Bool) {
            self.engine = engine
            self.writable = writable
        }

        private func table(_ name: String) throws -> (key: ExactString, table: Table) {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            let key = ExactString(name)
            if let last, last.key == key { return last }
            guard let table = engine.tables[key] else {
                throw SyncError(.tableNotDefined, "table '\(name)' is not defined")
            }
            last = (key, table)
            return (key, table)
        }

        func schema(of table: String) throws -> TableSchema { try self.table(table).table.schema }

        func tables() throws -> [TableSchema] {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            return engine.tables.values.map(\.schema).sorted { Value.utf8Less($0.name, $1.name) }
        }

        func record(in table: String, id: String) throws -> Record? {
            try self.table(table).table.rows[ExactString(id)]
        }

        func records(in table: String, matching query: Query) throws -> [Record] {
            let stored = try self.table(table).table
            try query.validate(against: stored.schema)
            return stored.select(query)
        }

        func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
            let stored = try self.table(table).table
            try Query(predicate).validate(against: stored.schema)
            return stored.count(predicate)
        }

        func upsert(_ record: Record, in table: String) throws {
            let (key, stored) = try self.table(table)
            guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
            try stored.schema.validate(record)
            let id = ExactString(record.id)
            remember(stored.set(id, record), record, id, stored, key)
        }

        func delete(id: String, in table: String) throws -> Bool {
            let (key, stored) = try self.table(table)
            guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
            let id = ExactString(id)
            guard stored.rows[id] != nil else { return false }
            remember(stored.set(id, nil), nil, id, stored, key)
            return true
        }

        private func remember(_ previous: Record?, _ current: Record?, _ id: ExactString, _ table: Table,
                              _ key: ExactString) {
            let slot: Int
            if let found = touched.firstIndex(where: { $0.table === table }) {
                slot = found
            } else {
                var changes: [ExactString: (original: Record?, current: Record?)] = [:]
                // Transactions tend to look alike: start at the size the last one reached.
                changes.reserveCapacity(min(table.touchedHint, 1 << 12))
                touched.append((key, table, changes))
                slot = touched.count - 1
            }
            // One lookup: the original is stored only if the id is new to this transaction.
            touched[slot].changes[id, default: (previous, nil)].current = current
        }

        /// The net changes: each touched record as it is now, or its deletion.
        func changeSet() -> ChangeSet {
            var changeSet = ChangeSet()
            for (key, table, changes) in touched.sorted(by: { $0.key.utf8Less(than: $1.key) }) {
                table.touchedHint = changes.count
                var entry = ChangeSet.TableChanges(table: key.value)
                entry.upserts.reserveCapacity(changes.count)
                for (id, change) in changes {
                    if let current = change.current {
                        entry.upserts.append(current)
                    } else if change.original != nil {
                        entry.deletes.append(id.value)
                    }
                }
                if !entry.upserts.isEmpty || !entry.deletes.isEmpty { changeSet.tables.append(entry) }
            }
            return changeSet
        }

        /// Puts every touched record back as it was.
        func rollback() {
            for (_, table, changes) in touched {
                for (id, change) in changes { _ = table.set(id, change.original) }
            }
            touched.removeAll()
        }
    }
}

// MARK: - Tables and their indexes

extension MemoryTables {
    /// One table: used only while the engine's lock is held.
    final class Table {
        var schema: TableSchema
        var rows: [ExactString: Record] = [:]
        /// Hash indexes by field: value key → ids.
        var equality: [ExactString: [IndexKey: Set<ExactString>]] = [:]
        /// Sorted indexes by field.
        var ordered: [ExactString: OrderedIndex] = [:]
        /// The fields of `equality` and `ordered`, iterated without touching the dictionaries.
        var equalityFields: [ExactString] = []
        var orderedFields: [ExactString] = []
        /// The smallest id, once computed (`.some(nil)`: the table is empty); kept up to date on
        /// inserts and forgotten when it is deleted. `first(in:matching: .all)` asks for it in
        /// every sync transaction.
        var smallestID: ExactString??
        /// How many records the last write transaction touched here: the next one reserves
        /// that much room for its bookkeeping.
        var touchedHint = 0


        init(schema: TableSchema) { self.schema = schema }

        /// Stores or removes a record, keeping the indexes up to date; returns the previous one.
        func set(_ id: ExactString, _ record: Record?) -> Record? {
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

        /// The records matching `query`, exactly as ``QueryEvaluator/apply(_:to:)`` orders them.
        func select(_ query: Query) -> [Record] {
            if let ids = candidates(query.predicate) {
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
                index.build(rows.values.map { ($0[field.value], ExactString($0.id)) })
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
        static func topIDs(_ needed: Int, ascending: Bool, of ids: Dictionary<ExactString, Record>.Keys) -> [ExactString] {
            func before(_ a: ExactString, _ b: ExactString) -> Bool {
                ascending ? a.utf8Less(than: b) : b.utf8Less(than: a)
            }
            var best: [ExactString] = []
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
        static func top(_ needed: Int, offset: Int, of records: Dictionary<ExactString, Record>.Values, _ query: Query) -> [Record] {
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
                let rows = self.rows
                return QueryEvaluator.count(predicate, in: ids.lazy.compactMap { rows[$0] })
            }
            return QueryEvaluator.count(predicate, in: rows.values)
        }

        /// A superset of the ids matching `predicate` from the equality indexes, or `nil` when
        /// no index narrows it (then every record is a candidate).
        func candidates(_ predicate: QueryPredicate) -> Set<ExactString>? {
            switch predicate {
            case .compare(let field, .equal, let literal):
                guard let key = IndexKey(literal) else { return nil }
                if field == SystemField.id {
                    guard case .string(let id) = literal else { return nil }
                    return rows[ExactString(id)] == nil ? [] : [ExactString(id)]
                }
                return ids(field, [key])
            case .isIn(let field, let literals):
                let present = literals.filter { !$0.isNull }
                let keys = present.compactMap(IndexKey.init)
                guard keys.count == present.count, field != SystemField.id else { return nil }
                return ids(field, keys)
            case .and(let parts):
                var best: Set<ExactString>?
                for part in parts {
                    if let ids = candidates(part), ids.count < (best?.count ?? .max) { best = ids }
                    if best?.isEmpty == true { break }
                }
                return best
            default:
                return nil
            }
        }

        private func ids(_ name: String, _ keys: [IndexKey]) -> Set<ExactString> {
            let field = ExactString(name)
            if equality[field] == nil {
                var index: [IndexKey: Set<ExactString>] = [:]
                for (id, record) in rows {
                    if let key = IndexKey(record[name]) { index[key, default: []].insert(id) }
                }
                equality[field] = index
                equalityFields.append(field)
            }
            if keys.count == 1 { return equality[field]![keys[0]] ?? [] }
            var union = Set<ExactString>()
            for key in keys { union.formUnion(equality[field]![key] ?? []) }
            return union
        }
    }

    /// A value as a hash key, equal exactly when ``QueryEvaluator`` finds the values equal
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

    /// Every record's value of one field with its id, sorted by ``QueryEvaluator/orderCompare(_:_:)``
    /// then id.
    struct OrderedIndex {
        var entries: [(value: Value, id: ExactString)] = []

        private static func less(_ a: Value, _ aID: ExactString, _ b: Value, _ bID: ExactString) -> Bool {
            let c = QueryEvaluator.orderCompare(a, b)
            if c != 0 { return c < 0 }
            return Value.utf8Less(aID.value, bID.value)
        }

        mutating func build(_ items: [(Value, ExactString)]) {
            entries = items.map { (value: $0.0, id: $0.1) }
            entries.sort { OrderedIndex.less($0.value, $0.id, $1.value, $1.id) }
        }

        private func lowerBound(_ value: Value, _ id: ExactString) -> Int {
            var low = 0, high = entries.count
            while low < high {
                let mid = (low + high) / 2
                if OrderedIndex.less(entries[mid].value, entries[mid].id, value, id) { low = mid + 1 } else { high = mid }
            }
            return low
        }

        mutating func insert(_ value: Value, _ id: ExactString) {
            if let last = entries.last, !OrderedIndex.less(last.value, last.id, value, id) {
                entries.insert((value, id), at: lowerBound(value, id))
            } else {
                entries.append((value, id))
            }
        }

        mutating func remove(_ value: Value, _ id: ExactString) {
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
    /// Whether the UTF-8 bytes order before `other`'s (``Value/utf8Less(_:_:)``).
    func utf8Less(than other: ExactString) -> Bool { Value.utf8Less(value, other.value) }
}
