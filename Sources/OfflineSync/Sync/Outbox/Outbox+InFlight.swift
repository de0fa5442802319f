/// The push's in-flight marker: the ids of the operations a push has chosen and not yet
/// settled, kept in one `__config` row.
///
/// An operation the push chose is *attempted* from then on — the remote may apply it, so it
/// is never rewritten and later writes queue behind it — and has one more attempt. Writing
/// that into each operation's row cost a third of the client's side of a push (1,000 row
/// rewrites per batch, each re-encoding the item); the marker says it for the whole batch in
/// one row. The rows keep what they held when chosen, so an operation's state is its row's
/// state *as the marker amends it* (``effective(_:)``): every reader that looks at a state
/// or an attempt count goes through ``Outbox`` and applies it.
///
/// The marker lives exactly as long as the batches are in flight: settling a batch writes
/// what the remote answered and takes the batch's ids out, in the settle's transaction; a
/// push that fails, and a context that opens on a store a killed push left marked, write
/// every marked operation as attempted (``Outbox/writeInFlight(_:)``) and remove the marker —
/// the rows then hold what rewriting them at choosing time would have written.
struct InFlight: Sendable {
    /// The marker's row: in `__config`, under the outbox's own table name (no app table can
    /// have it, so a purge of an app table never touches it).
    static let table = OperationRow.table
    static let key = "inFlight"

    /// The marked ids (stored one per line).
    private(set) var ids: Set<String>

    var isEmpty: Bool { ids.isEmpty }

    /// No marker (a store without `__config` has none).
    static let none = InFlight(ids: [])

    /// The marker in the store (empty when there is none).
    static func read(_ txn: any LocalReadTransaction) throws -> InFlight {
        guard let value = try ConfigRow.value(txn, table: table, key: key) else { return .none }
        // Split on the byte, not the Character: `String.split` segments graphemes, which made
        // reading a 2,000-id marker 7% of a push's client thread.
        var ids = Set<String>()
        for line in value.utf8.split(separator: 10) { ids.insert(String(Substring(line))) }
        return InFlight(ids: ids)
    }

    /// Whether an id can be marked: the marker separates ids by line feeds. The core's ids are
    /// UUIDs; an id with a line feed (a row from elsewhere) is rewritten as attempted instead.
    static func canMark(_ id: String) -> Bool { !id.isEmpty && !id.utf8.contains(10) }

    /// Whether `id` is marked.
    func contains(_ id: String) -> Bool { ids.contains(id) }

    /// `operation` as the marker amends its row: attempted with one more attempt when marked.
    func effective(_ operation: QueuedOperation) -> QueuedOperation {
        guard contains(operation.id) else { return operation }
        return operation.chosenForPush()
    }

    mutating func add(_ id: String) { ids.insert(id) }

    /// Takes `removed` out.
    mutating func remove(_ removed: some Sequence<String>) { ids.subtract(removed) }

    /// Stores the marker, or removes its row when it is empty.
    func write(_ txn: any LocalWriteTransaction) throws {
        try ConfigRow.setValue(txn, table: Self.table, key: Self.key, keyType: ConfigRow.KeyType.inFlight.rawValue,
                               value: ids.isEmpty ? nil : ids.joined(separator: "\n"))
    }
}

extension QueuedOperation {
    /// The operation as a push's choosing makes it: attempted, with one more attempt.
    func chosenForPush() -> QueuedOperation {
        var chosen = self
        chosen.state = .attempted
        chosen.attempts += 1
        return chosen
    }
}

extension Outbox {
    /// Marks `batch` attempted and returns it so: each operation in memory, and its id in the
    /// in-flight marker (an id the marker cannot hold is written to its row instead).
    static func markAttempted(_ batch: [QueuedOperation], _ txn: any LocalWriteTransaction) throws -> [QueuedOperation] {
        guard !batch.isEmpty else { return batch }
        var inFlight = try InFlight.read(txn)
        let chosen = try markAttempted(batch, into: &inFlight, txn)
        try inFlight.write(txn)
        return chosen
    }

    /// ``markAttempted(_:_:)`` on a marker the caller read in this transaction and writes
    /// before it ends: a push's transaction that settles one batch and chooses the next reads
    /// and writes the marker once, not once per step (each read parses, and each write joins,
    /// two batches' ids: 17% of that transaction, `perf`, push-10k).
    static func markAttempted(_ batch: [QueuedOperation], into inFlight: inout InFlight,
                              _ txn: any LocalWriteTransaction) throws -> [QueuedOperation] {
        let chosen = batch.map { $0.chosenForPush() }
        for operation in chosen {
            if InFlight.canMark(operation.id) { inFlight.add(operation.id) } else { try save(operation, txn) }
        }
        return chosen
    }

    /// Ends `batch`'s time in flight after it was settled: an operation the remote did not
    /// answer (still queued, its row untouched by the settle) is written as attempted, and the
    /// batch's ids leave `inFlight` — the marker as read in this transaction, which the caller
    /// writes (a settle does not otherwise change it).
    static func endInFlight(_ batch: [QueuedOperation], answered: (QueuedOperation) -> Bool, inFlight: inout InFlight,
                            _ txn: any LocalWriteTransaction) throws {
        for operation in batch where !answered(operation) && inFlight.contains(operation.id) {
            try save(operation, txn)
        }
        inFlight.remove(batch.map(\.id))
    }

    /// Writes every marked operation still queued as attempted with one more attempt, and
    /// removes the marker: after a push that failed, and when a context opens on a store a
    /// killed push left marked. Returns how many rows it rewrote.
    @discardableResult
    static func writeInFlight(_ txn: any LocalWriteTransaction) throws -> Int {
        let inFlight = try InFlight.read(txn)
        guard !inFlight.isEmpty else { return 0 }
        let rows = try txn.read(inFlight.ids.sorted().map { .record(table: OperationRow.table, id: $0) })
        var written = 0
        for row in rows.compactMap(\.first) {
            try save(try QueuedOperation(row: row).chosenForPush(), txn)
            written += 1
        }
        try InFlight.none.write(txn)
        return written
    }
}
