import Foundation

/// An in-memory table engine that key/value-style adapters build on: tables of records keyed
/// by exact id, schema definition and migration with the checks every store makes, read and
/// write transactions, and queries through ``QueryEvaluator``.
///
/// Every change is described by a ``ChangeSet`` that is handed to a *commit hook* before it
/// becomes visible, so an adapter can persist it first (append it to a log, put it in a
/// key/value database) and replay it later with ``apply(_:)``:
///
/// ```swift
/// let tables = MemoryTables()
/// try tables.define(schema) { changes in try log.append(changes.encode()) }
/// let n = try tables.write({ tx in try tx.upsert(record, in: "items"); return 1 },
///                          commit: { changes in try log.append(changes.encode()) })
/// ```
///
/// If the hook throws, memory is left exactly as it was and the error is rethrown.
///
/// Concurrency: writers (``write(_:commit:)``, ``define(_:commit:)``, ``apply(_:)``,
/// ``snapshot(maxChunkBytes:_:)``) run one at a time; readers run while a writer builds its
/// transaction and runs its commit hook, and only wait for the short moment a committed change
/// is applied. Closures run on the caller's thread and must not call back into the same
/// engine.
public final class MemoryTables: @unchecked Sendable {
    // @unchecked Sendable: `tables` is mutated only while holding both `writeLock` and
    // `stateLock`. Readers hold `stateLock`; the single writer (holding `writeLock`) reads
    // without `stateLock`, which is safe because nobody else can mutate while it holds
    // `writeLock`, and concurrent reads of a Swift collection are safe.
    private let writeLock = NSLock()
    private let stateLock = NSLock()
    private var tables: [ExactString: Table] = [:]

    struct Table {
        var schema: TableSchema
        var rows: [ExactString: Record] = [:]
    }

    /// Creates an engine with no tables.
    public init() {}

    // MARK: - Schema

    /// Defines a table, or migrates it to a changed schema: checks names
    /// (``TableSchema/validate()``) and that every stored record fits the new declared field
    /// types, then calls `commit` with a change set holding the definition, then makes it
    /// visible. Defining a table exactly as it is already defined changes nothing and does not
    /// call `commit`.
    ///
    /// Throws ``SyncError/Code/invalidName``, ``SyncError/Code/schemaMismatch``, or what
    /// `commit` throws; on any error nothing changes.
    public func define(_ schema: TableSchema, commit: (ChangeSet) throws -> Void) throws {
        try schema.validate()
        writeLock.lock()
        defer { writeLock.unlock() }
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
        stateLock.lock()
        defer { stateLock.unlock() }
        tables[key, default: Table(schema: schema)].schema = schema
    }

    /// Every defined table's schema, ordered by name (UTF-8 byte order).
    public var schemas: [TableSchema] {
        stateLock.lock()
        defer { stateLock.unlock() }
        return tables.values.map(\.schema).sorted { Value.utf8Less($0.name, $1.name) }
    }

    // MARK: - Transactions

    /// Runs `body` in a read transaction that sees one consistent state. The transaction is
    /// lent to `body` and throws ``SyncError/Code/storeClosed`` if used after it returned.
    public func read<T>(_ body: (any LocalReadTransaction) throws -> T) rethrows -> T {
        stateLock.lock()
        defer { stateLock.unlock() }
        let transaction = Transaction(engine: self, writable: false)
        defer { transaction.isOpen = false }
        return try body(transaction)
    }

    /// Runs `body` in a write transaction. Its changes are kept aside while it runs (it reads
    /// its own writes); when it returns, `commit` receives them as one ``ChangeSet`` and, once
    /// `commit` returns, they become visible at once. If `body` or `commit` throws, nothing
    /// changes and the error is rethrown. `commit` is not called when the transaction changed
    /// nothing.
    public func write<T>(_ body: (any LocalWriteTransaction) throws -> T,
                         commit: (ChangeSet) throws -> Void) throws -> T {
        writeLock.lock()
        defer { writeLock.unlock() }
        let transaction = Transaction(engine: self, writable: true)
        defer { transaction.isOpen = false }
        let result = try body(transaction)
        transaction.isOpen = false
        let changes = transaction.changeSet()
        if changes.isEmpty { return result }
        try commit(changes)
        stateLock.lock()
        defer { stateLock.unlock() }
        for (table, rows) in transaction.pending {
            for (id, record) in rows {
                if let record { tables[table]!.rows[id] = record } else { tables[table]!.rows.removeValue(forKey: id) }
            }
        }
        return result
    }

    /// Applies a change set produced by ``write(_:commit:)`` or ``define(_:commit:)`` (when an
    /// adapter replays its log): definitions first, then upserts and deletes, without running
    /// the checks again. Throws ``SyncError/Code/tableNotDefined`` (changing nothing) if it
    /// changes records of a table that is neither defined nor defined by the change set.
    public func apply(_ changes: ChangeSet) throws {
        writeLock.lock()
        defer { writeLock.unlock() }
        let defined = Set(changes.definitions.map { ExactString($0.name) })
        for table in changes.tables where tables[ExactString(table.table)] == nil && !defined.contains(ExactString(table.table)) {
            throw SyncError(.tableNotDefined, "a change set changes records of table '\(table.table)', which is not defined")
        }
        stateLock.lock()
        defer { stateLock.unlock() }
        for schema in changes.definitions {
            tables[ExactString(schema.name), default: Table(schema: schema)].schema = schema
        }
        for table in changes.tables {
            let key = ExactString(table.table)
            for record in table.upserts { tables[key]!.rows[ExactString(record.id)] = record }
            for id in table.deletes { tables[key]!.rows.removeValue(forKey: ExactString(id)) }
        }
    }

    /// Describes the whole current state as a sequence of change sets which, applied in order
    /// to an empty engine, rebuild it: first one with every table definition, then the records
    /// in chunks of roughly `maxChunkBytes` of encoded records each (so a compacting adapter
    /// never holds a second copy of everything). Runs as a writer: writes wait, readers don't.
    /// Rethrows what `emit` throws.
    public func snapshot(maxChunkBytes: Int = 1 << 20, _ emit: (ChangeSet) throws -> Void) throws {
        writeLock.lock()
        defer { writeLock.unlock() }
        let ordered = tables.sorted { Value.utf8Less($0.key.value, $1.key.value) }
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

    /// A transaction over the engine. Read-only ones are used while `stateLock` is held; the
    /// writable one while `writeLock` is held, its changes kept in `pending` until commit.
    private final class Transaction: LocalWriteTransaction {
        unowned let engine: MemoryTables
        let writable: Bool
        var isOpen = true
        /// Per table, per id: the new record, or `nil` for a delete.
        var pending: [ExactString: [ExactString: Record?]] = [:]

        init(engine: MemoryTables, writable: Bool) {
            self.engine = engine
            self.writable = writable
        }

        private func table(_ name: String) throws -> Table {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            guard let table = engine.tables[ExactString(name)] else {
                throw SyncError(.tableNotDefined, "table '\(name)' is not defined")
            }
            return table
        }

        /// The table's current records, this transaction's changes included.
        private func rows(of name: String, _ table: Table) -> [Record] {
            guard let changes = pending[ExactString(name)], !changes.isEmpty else { return Array(table.rows.values) }
            var rows: [Record] = []
            rows.reserveCapacity(table.rows.count + changes.count)
            for (id, record) in table.rows where changes[id] == nil { rows.append(record) }
            for case let record? in changes.values { rows.append(record) }
            return rows
        }

        func schema(of table: String) throws -> TableSchema { try self.table(table).schema }

        func tables() throws -> [TableSchema] {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            return engine.tables.values.map(\.schema).sorted { Value.utf8Less($0.name, $1.name) }
        }

        func record(in table: String, id: String) throws -> Record? {
            let stored = try self.table(table)
            let key = ExactString(id)
            if let change = pending[ExactString(table)]?[key] { return change }
            return stored.rows[key]
        }

        func records(in table: String, matching query: Query) throws -> [Record] {
            let stored = try self.table(table)
            try query.validate(against: stored.schema)
            if pending[ExactString(table)] == nil { return QueryEvaluator.apply(query, to: stored.rows.values) }
            return QueryEvaluator.apply(query, to: rows(of: table, stored))
        }

        func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
            let stored = try self.table(table)
            try Query(predicate).validate(against: stored.schema)
            if pending[ExactString(table)] == nil { return QueryEvaluator.count(predicate, in: stored.rows.values) }
            return QueryEvaluator.count(predicate, in: rows(of: table, stored))
        }

        func upsert(_ record: Record, in table: String) throws {
            let stored = try self.table(table)
            guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
            try stored.schema.validate(record)
            pending[ExactString(table), default: [:]].updateValue(record, forKey: ExactString(record.id))
        }

        func delete(id: String, in table: String) throws -> Bool {
            let stored = try self.table(table)
            guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
            let tableKey = ExactString(table), key = ExactString(id)
            let inStore = stored.rows[key] != nil
            let existed: Bool
            if let change = pending[tableKey]?[key] { existed = change != nil } else { existed = inStore }
            guard existed else { return false }
            if inStore {
                pending[tableKey, default: [:]].updateValue(nil, forKey: key)
            } else {
                pending[tableKey]!.removeValue(forKey: key)
            }
            return true
        }

        func changeSet() -> ChangeSet {
            var changes = ChangeSet()
            for (table, rows) in pending.sorted(by: { Value.utf8Less($0.key.value, $1.key.value) }) where !rows.isEmpty {
                var entry = ChangeSet.TableChanges(table: table.value)
                for (id, record) in rows {
                    if let record { entry.upserts.append(record) } else { entry.deletes.append(id.value) }
                }
                changes.tables.append(entry)
            }
            return changes
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
