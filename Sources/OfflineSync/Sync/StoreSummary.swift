/// What a local store holds, for people and scripts: its tables with row counts, the
/// operation queue, the operation errors and the incremental-pull cursors.
///
/// Built by ``summarize(_:operationLimit:)`` inside one read transaction, so the figures are
/// one consistent snapshot. Only counts and the first operations and errors are read, never a
/// whole table. Record contents are not included: operations and errors show the table,
/// item id and kind, not the item.
public struct StoreSummary: Sendable, Hashable, Codable {
    /// One table.
    public struct Table: Sendable, Hashable, Codable {
        /// The table's name.
        public var name: String
        /// Whether it is a system table (`__` prefix).
        public var isSystem: Bool
        /// The number of rows.
        public var rows: Int
        /// The number of declared fields.
        public var declaredFields: Int
    }

    /// One queued operation.
    public struct Operation: Sendable, Hashable, Codable {
        /// Its position in the queue.
        public var sequence: Int64
        /// The table of the item.
        public var table: String
        /// The item's id.
        public var itemId: String
        /// `insert`, `update` or `delete`.
        public var kind: String
        /// `pending`, `attempted` or `failed`.
        public var state: String
        /// How many times it was sent.
        public var attempts: Int
        /// When it was queued (milliseconds since 1970).
        public var createdAt: Int64
    }

    /// One operation error.
    public struct OperationErrorSummary: Sendable, Hashable, Codable {
        /// The table of the item.
        public var table: String
        /// The item's id.
        public var itemId: String
        /// The failed operation's kind.
        public var kind: String
        /// The HTTP-like status, if any (409 for a conflict).
        public var status: Int?
        /// Why it failed.
        public var message: String
        /// When it was recorded (milliseconds since 1970).
        public var createdAt: Int64
    }

    /// One incremental-pull cursor.
    public struct Cursor: Sendable, Hashable, Codable {
        /// The table pulled.
        public var table: String
        /// The query id the cursor belongs to.
        public var queryId: String
        /// The opaque cursor.
        public var cursor: String
    }

    /// Every table, system tables included, by name.
    public var tables: [Table]
    /// Queued operations by state (`pending`, `attempted`, `failed`), states with none omitted.
    public var operationsByState: [String: Int]
    /// The first queued operations, in queue order (at most the limit given).
    public var operations: [Operation]
    /// The number of operation errors.
    public var operationErrorCount: Int
    /// The first operation errors, oldest first (at most the limit given).
    public var operationErrors: [OperationErrorSummary]
    /// Every incremental-pull cursor.
    public var cursors: [Cursor]

    /// The total number of queued operations.
    public var operationCount: Int { operationsByState.values.reduce(0, +) }

    /// Summarizes `store` in one read transaction, listing at most `operationLimit` operations
    /// and errors. A store without the system tables (not used by a ``SyncContext``) shows
    /// its tables and an empty queue. Throws what the store's reads throw.
    public static func summarize(_ store: any LocalStore, operationLimit: Int = 20) async throws -> StoreSummary {
        let limit = max(0, operationLimit)
        return try await store.read { tx in
            let schemas = try tx.tables()
            let names = Set(schemas.map(\.name))
            var tables: [Table] = []
            for schema in schemas {
                tables.append(Table(name: schema.name, isSystem: schema.name.hasPrefix(Names.reservedPrefix),
                                    rows: try tx.count(in: schema.name, matching: .all), declaredFields: schema.fields.count))
            }
            var byState: [String: Int] = [:]
            var operations: [Operation] = []
            if names.contains(SystemTables.operations) {
                for state in [OperationState.pending, .attempted, .failed] {
                    let n = try tx.count(in: SystemTables.operations, matching: OperationRow.field(.state) == .string(state.rawValue))
                    if n > 0 { byState[state.rawValue] = n }
                }
                // Operations a push chose are attempted although their rows still say pending.
                let inFlight = names.contains(SystemTables.config) ? try InFlight.read(tx) : .none
                if !inFlight.isEmpty {
                    let marked = try tx.count(in: SystemTables.operations, matching: OperationRow.field(.state) == .string(OperationState.pending.rawValue)
                        && .isIn(SystemField.id, inFlight.ids.map(Value.string)))
                    byState[OperationState.pending.rawValue] = (byState[OperationState.pending.rawValue] ?? 0) - marked
                    byState[OperationState.attempted.rawValue] = (byState[OperationState.attempted.rawValue] ?? 0) + marked
                    if byState[OperationState.pending.rawValue] == 0 { byState[OperationState.pending.rawValue] = nil }
                }
                let first = try tx.records(in: SystemTables.operations, matching: Query(order: [OperationRow.sorted(.sequence)], limit: limit))
                operations = try first.map { record in
                    let op = inFlight.effective(try QueuedOperation(row: record))
                    return Operation(sequence: op.sequence, table: op.table, itemId: op.itemId, kind: op.kind.rawValue,
                                     state: op.state.rawValue, attempts: op.attempts, createdAt: op.createdAt.millisecondsSince1970)
                }
            }
            var errorCount = 0
            var errors: [OperationErrorSummary] = []
            if names.contains(SystemTables.operationErrors) {
                errorCount = try tx.count(in: SystemTables.operationErrors, matching: .all)
                let first = try tx.records(in: SystemTables.operationErrors, matching: Query(order: [OperationErrorRow.sorted(.createdAt)], limit: limit))
                errors = try first.map { record in
                    let error = try OperationError(row: record)
                    return OperationErrorSummary(table: error.table, itemId: error.itemId, kind: error.kind.rawValue, status: error.status,
                                                 message: error.message, createdAt: error.createdAt.millisecondsSince1970)
                }
            }
            var cursors: [Cursor] = []
            if names.contains(SystemTables.config) {
                let prefix = ConfigRow.cursorKey("")
                let rows = try ConfigRow.all(tx, Query(ConfigRow.field(.keyType) == .string(ConfigRow.KeyType.cursor.rawValue),
                                                       order: [ConfigRow.sorted(.table)]))
                for row in rows {
                    let table = row.table, key = row.key, value = row.value
                    let queryId = key.hasPrefix(prefix) ? String(key.dropFirst(prefix.count)) : key
                    cursors.append(Cursor(table: table, queryId: queryId, cursor: value))
                }
            }
            return StoreSummary(tables: tables, operationsByState: byState, operations: operations,
                                operationErrorCount: errorCount, operationErrors: errors, cursors: cursors)
        }
    }
}
