import Foundation
import OfflineSync

/// An in-memory table engine that key/value-style adapters build on: tables of records keyed
/// by exact id, schema definition and migration with the checks every store makes, read and
/// write transactions, and queries through `QueryEvaluator`.
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
/// nothing). Results are always exactly what `QueryEvaluator` returns on all the records.
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
    /// The tables by exact name; touched only with `lock` held (by this type and its
    /// ``Transaction``, in MemoryTables+Transaction.swift).
    var tables: [ExactString: Table] = [:]

    /// Creates an engine with no tables.
    public init() {}

    // MARK: - Schema

    /// Defines a table, or migrates it to a changed schema: checks names
    /// (`TableSchema/validate()`) and that every stored record fits the new declared field
    /// types, then calls `commit` with a change set holding the definition, then applies it.
    /// Defining a table exactly as it is already defined changes nothing and does not call
    /// `commit`.
    ///
    /// Throws `SyncError/Code/invalidName`, `SyncError/Code/schemaMismatch`, or what
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
    /// lent to `body` and throws `SyncError/Code/storeClosed` if used after it returned.
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
    /// the checks again. Throws `SyncError/Code/tableNotDefined` (changing nothing) if it
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
            for record in table.upserts { _ = tables[key]!.set(RowID(record.id), record) }
            for id in table.deletes { _ = tables[key]!.set(RowID(id), nil) }
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
}
