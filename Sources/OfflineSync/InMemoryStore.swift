import Foundation

/// The reference ``LocalStore``: everything in memory, evaluated by ``QueryEvaluator``.
///
/// It is what the conformance suite compares other adapters against, and a fast store for
/// tests and previews. Nothing survives the process. Writes are serialized by a lock;
/// a failed transaction is undone from an undo log.
public final class InMemoryStore: LocalStore, @unchecked Sendable {
    // @unchecked Sendable: every access to `state` holds `lock`.
    private let lock = NSLock()
    private var state = State()

    struct State {
        var tables: [ExactString: Table] = [:]
        var closed = false
    }

    struct Table {
        var schema: TableSchema
        var rows: [ExactString: Record] = [:]
    }

    /// Creates an empty store.
    public init() {}

    /// See ``LocalStore/defineTable(_:)``.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try withLock {
            try checkOpen()
            let key = ExactString(schema.name)
            if var table = state.tables[key] {
                for record in table.rows.values {
                    for field in schema.fields where !field.type.accepts(record[field.name]) {
                        throw SyncError(.schemaMismatch, "table '\(schema.name)': record '\(record.id)' has a \(record[field.name].kind.rawValue) in field '\(field.name)', which the new schema declares \(field.type.rawValue)")
                    }
                }
                table.schema = schema
                state.tables[key] = table
            } else {
                state.tables[key] = Table(schema: schema)
            }
        }
    }

    /// See ``LocalStore/read(_:)``.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try withLock {
            try checkOpen()
            let transaction = Transaction(store: self)
            defer { transaction.isOpen = false }
            return try body(transaction)
        }
    }

    /// See ``LocalStore/write(_:)``.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try withLock {
            try checkOpen()
            let transaction = Transaction(store: self)
            defer { transaction.isOpen = false }
            do {
                return try body(transaction)
            } catch {
                transaction.rollback()
                throw error
            }
        }
    }

    /// See ``LocalStore/close()``.
    public func close() async throws {
        withLock { state.closed = true }
    }

    private func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    private func checkOpen() throws {
        if state.closed { throw SyncError(.storeClosed, "the in-memory store is closed") }
    }

    /// A transaction over the locked state; only used while the lock is held.
    private final class Transaction: LocalWriteTransaction {
        unowned let store: InMemoryStore
        var isOpen = true
        var undo: [(table: ExactString, id: ExactString, previous: Record?)] = []

        init(store: InMemoryStore) { self.store = store }

        private func table(_ name: String) throws -> Table {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            guard let table = store.state.tables[ExactString(name)] else {
                throw SyncError(.tableNotDefined, "table '\(name)' is not defined")
            }
            return table
        }

        func schema(of table: String) throws -> TableSchema { try self.table(table).schema }

        func tables() throws -> [TableSchema] {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            return store.state.tables.values.map(\.schema).sorted { Value.utf8Less($0.name, $1.name) }
        }

        func record(in table: String, id: String) throws -> Record? {
            try self.table(table).rows[ExactString(id)]
        }

        func records(in table: String, matching query: Query) throws -> [Record] {
            let table = try self.table(table)
            try query.validate(against: table.schema)
            return QueryEvaluator.apply(query, to: table.rows.values)
        }

        func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
            let table = try self.table(table)
            try Query(predicate).validate(against: table.schema)
            return QueryEvaluator.count(predicate, in: table.rows.values)
        }

        func upsert(_ record: Record, in table: String) throws {
            let schema = try self.table(table).schema
            try schema.validate(record)
            let tableKey = ExactString(table), idKey = ExactString(record.id)
            let previous = store.state.tables[tableKey]!.rows.updateValue(record, forKey: idKey)
            undo.append((tableKey, idKey, previous))
        }

        func delete(id: String, in table: String) throws -> Bool {
            _ = try self.table(table)
            let tableKey = ExactString(table), idKey = ExactString(id)
            guard let previous = store.state.tables[tableKey]!.rows.removeValue(forKey: idKey) else { return false }
            undo.append((tableKey, idKey, previous))
            return true
        }

        func rollback() {
            for entry in undo.reversed() {
                store.state.tables[entry.table]!.rows[entry.id] = entry.previous
            }
            undo.removeAll()
        }
    }
}

/// A string key compared by its exact UTF-8 bytes.
///
/// Swift's `String` equality is Unicode canonical equivalence, so `"é"` and `"e\u{301}"` are
/// the same dictionary key — but they are different ids, names and SQL texts to every store.
/// Stores key their dictionaries with this instead. Hashing and comparison work on the
/// contiguous UTF-8 buffer in bulk.
public struct ExactString: Hashable, Sendable, CustomStringConvertible {
    /// The string.
    public let value: String
    /// Wraps a string.
    public init(_ value: String) {
        var value = value
        value.makeContiguousUTF8()
        self.value = value
    }

    /// Byte-for-byte equality.
    public static func == (lhs: ExactString, rhs: ExactString) -> Bool {
        let a = lhs.value.utf8, b = rhs.value.utf8
        guard a.count == b.count else { return false }
        let fast: Bool?? = a.withContiguousStorageIfAvailable { x in
            b.withContiguousStorageIfAvailable { y in
                x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0
            }
        }
        if let fast = fast ?? nil { return fast }
        return a.elementsEqual(b)
    }

    /// Hashes the UTF-8 bytes in one call.
    public func hash(into hasher: inout Hasher) {
        let done: Void? = value.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil { for byte in value.utf8 { hasher.combine(byte) } }
        hasher.combine(value.utf8.count)
    }

    /// The string itself.
    public var description: String { value }
}
