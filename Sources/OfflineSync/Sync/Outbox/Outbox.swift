import Foundation

/// The outbox: the one owner of `__operations` and `__operation_errors`. Everything that
/// selects, queues, marks, settles or fails an operation goes through it, inside the local
/// transaction that changes the item, so a record and its queue entry always commit together.
enum Outbox {
    // MARK: Reading

    /// The newest queued operation on an item, if any, amended as ``itemAndLatest(_:table:itemId:)`` amends it.
    static func latest(_ txn: any LocalReadTransaction, table: String, itemId: String) throws -> QueuedOperation? {
        guard let latest = try txn.records(in: OperationRow.table, matching: latestQuery(table: table, itemId: itemId)).first
            .map(QueuedOperation.init(row:)) else { return nil }
        return latest.state == .pending ? try InFlight.read(txn).effective(latest) : latest
    }

    /// An item's record and its newest queued operation (its state as the in-flight marker
    /// amends it), in one ``LocalReadTransaction/read(_:)`` (one round trip on a
    /// server-backed store): what every local write reads first. The marker is read only when
    /// the operation's row says pending (an attempted or failed one is never rewritten
    /// anyway; its attempt count may then lag the marker's by one, which no writer reads).
    static func itemAndLatest(_ txn: any LocalReadTransaction, table: String,
                              itemId: String) throws -> (item: Record?, latest: QueuedOperation?) {
        let answers = try txn.read([.record(table: table, id: itemId),
                                    .records(table: OperationRow.table, query: latestQuery(table: table, itemId: itemId))])
        guard let latest = try answers[1].first.map(QueuedOperation.init(row:)) else { return (answers[0].first, nil) }
        return (answers[0].first, latest.state == .pending ? try InFlight.read(txn).effective(latest) : latest)
    }

    /// Every queued operation on an item, oldest first, as `inFlight` amends them.
    static func all(_ txn: any LocalReadTransaction, table: String, itemId: String, inFlight: InFlight) throws -> [QueuedOperation] {
        let query = Query(onItem(table: table, itemId: itemId), order: [OperationRow.sorted(.sequence)])
        return try txn.records(in: OperationRow.table, matching: query).map { inFlight.effective(try QueuedOperation(row: $0)) }
    }

    /// Every queued operation, in queue order, as the in-flight marker amends them.
    static func all(_ txn: any LocalReadTransaction) throws -> [QueuedOperation] {
        let inFlight = try InFlight.read(txn)
        return try txn.records(in: OperationRow.table, matching: Query(order: [OperationRow.sorted(.sequence)]))
            .map { inFlight.effective(try QueuedOperation(row: $0)) }
    }

    /// The operation with local id `id`, if it is still queued, as the in-flight marker amends it.
    static func operation(_ txn: any LocalReadTransaction, id: String) throws -> QueuedOperation? {
        guard let operation = try txn.record(in: OperationRow.table, id: id).map(QueuedOperation.init(row:)) else { return nil }
        return try InFlight.read(txn).effective(operation)
    }

    /// Whether nothing is queued (failed operations count as queued).
    static func isEmpty(_ txn: any LocalReadTransaction) throws -> Bool {
        try txn.first(in: OperationRow.table, matching: .all) == nil
    }

    /// How many operations are queued, failed ones included, optionally on one table.
    static func count(_ txn: any LocalReadTransaction, table: String? = nil) throws -> Int {
        try txn.count(in: OperationRow.table, matching: table.map { OperationRow.field(.table) == .string($0) } ?? .all)
    }

    /// How many queued operations may still be sent (not failed).
    static func sendableCount(_ txn: any LocalReadTransaction) throws -> Int {
        try txn.count(in: OperationRow.table, matching: OperationRow.sendable)
    }

    /// The highest sequence queued (0 for an empty queue): one step down the sequence index.
    static func lastSequence(_ txn: any LocalReadTransaction) throws -> Int64 {
        try txn.first(in: OperationRow.table, matching: Query(order: newestFirst))?[
            OperationRow.name(.sequence)].intValue ?? 0
    }

    /// How many sendable operations were queued after `sequence`, and the highest sequence
    /// now: a range of the sequence index, so a push learns of writes made during it without
    /// counting the whole queue per batch.
    static func sendableQueued(after sequence: Int64, _ txn: any LocalReadTransaction) throws -> (count: Int, last: Int64) {
        let count = try txn.count(in: OperationRow.table, matching: OperationRow.sendable && OperationRow.field(.sequence) > .int(sequence))
        return (count, count == 0 ? sequence : try lastSequence(txn))
    }

    /// The items (``itemKey(_:)``) of `batch` that have queued operations besides the batch's
    /// own — one query per table, however long the batch — and any item the batch holds more
    /// than one operation on (``nextBatch(_:limit:excluding:)`` never makes such a batch).
    static func itemsQueuedBesides(_ batch: [QueuedOperation], _ txn: any LocalReadTransaction,
                                   maxRuns: Int = maxExcludedRuns) throws -> Set<ExactString> {
        var result = Set<ExactString>()
        var seen = Set<ExactString>()
        for operation in batch where !seen.insert(itemKey(operation)).inserted { result.insert(itemKey(operation)) }
        for (table, operations) in Dictionary(grouping: batch, by: \.table) {
            let rows = try txn.records(in: OperationRow.table, matching: Query(
                OperationRow.field(.table) == .string(table)
                    && OperationRow.field(.itemId).isIn(operations.map { .string($0.itemId) })
                    && leavingOut(operations, maxRuns: maxRuns)))
            for row in rows { result.insert(itemKey(try QueuedOperation(row: row))) }
        }
        return result
    }

    /// An operation's item, as one key across tables, compared by bytes: two ids that differ
    /// only in Unicode normalisation are two records, so a failed write on one never holds
    /// back the other.
    static func itemKey(_ operation: QueuedOperation) -> ExactString {
        ExactString(CompositeKey.slashed(operation.table, last: operation.itemId))
    }

    /// Whether any operation on `table` is queued, failed ones included: one step into the
    /// queue's index on (table, item, sequence).
    static func hasOperations(_ txn: any LocalReadTransaction, table: String) throws -> Bool {
        try txn.first(in: OperationRow.table, matching: Query(OperationRow.field(.table) == .string(table))) != nil
    }

    /// The ids of the items of `table`, among `itemIds`, that have queued operations, by
    /// their exact bytes (as the store tells ids apart).
    static func itemsWithOperations(_ txn: any LocalReadTransaction, table: String, among itemIds: [String]) throws -> Set<ExactString> {
        guard !itemIds.isEmpty else { return [] }
        let rows = try txn.records(in: OperationRow.table, matching: Query(
            OperationRow.field(.table) == .string(table) && OperationRow.field(.itemId).isIn(itemIds.map(Value.string))))
        return Set(rows.compactMap { $0[OperationRow.name(.itemId)].stringValue.map(ExactString.init) })
    }

    /// The recorded failures, oldest first.
    static func errors(_ txn: any LocalReadTransaction) throws -> [OperationError] {
        try txn.records(in: OperationErrorRow.table, matching: Query(order: [OperationErrorRow.sorted(.createdAt)]))
            .map(OperationError.init(row:))
    }

    /// Newest operation first. The id breaks no tie (sequences are unique); as the last key
    /// it lets a SQL store read the order straight off an index ending with the id.
    static let newestFirst = [OperationRow.sorted(.sequence, ascending: false), OperationRow.sorted(.id, ascending: false)]

    private static func latestQuery(table: String, itemId: String) -> Query {
        Query(onItem(table: table, itemId: itemId), order: newestFirst, limit: 1)
    }

    private static func onItem(table: String, itemId: String) -> QueryPredicate {
        OperationRow.field(.itemId) == .string(itemId) && OperationRow.field(.table) == .string(table)
    }

    /// The next free sequence number.
    static func nextSequence(_ txn: any LocalReadTransaction) throws -> Int64 {
        let last = try txn.first(in: OperationRow.table, matching: Query(order: newestFirst))
        return (last?[OperationRow.name(.sequence)].intValue ?? 0) + 1
    }

    // MARK: Writing

    /// Stores `operation` (new or changed).
    static func save(_ operation: QueuedOperation, _ txn: any LocalWriteTransaction) throws {
        try txn.upsert(operation.record(), in: OperationRow.table)
    }

    /// Takes the operations with these ids off the queue, several to a statement where the
    /// store can.
    static func remove(ids: [String], _ txn: any LocalWriteTransaction) throws {
        try txn.delete(ids: ids, in: OperationRow.table)
    }

    /// Takes `operation` off the queue.
    static func remove(_ operation: QueuedOperation, _ txn: any LocalWriteTransaction) throws {
        try txn.delete(id: operation.id, in: OperationRow.table)
    }

    /// Marks `operation` failed and records why; later operations on its item wait behind it.
    /// When `compensated`, the operation is removed instead, and the record says why it went.
    static func fail(_ operation: QueuedOperation, status: Int?, message: String, code: SyncError.Code? = nil, server: Record?,
                     now: Timestamp, compensated: Bool = false, _ txn: any LocalWriteTransaction) throws -> OperationError {
        var failed = operation
        failed.state = .failed
        if compensated { try remove(operation, txn) } else { try save(failed, txn) }
        let error = OperationError(operation: failed, status: status, message: message, code: code, serverRecord: server, now: now,
                                   compensated: compensated)
        try OperationErrorRow(error).save(txn)
        return error
    }

    /// Forgets the recorded failures of an operation (it is being resolved).
    static func removeErrors(of operationId: String, _ txn: any LocalWriteTransaction) throws {
        let column = OperationErrorRow.field(.operationId)
        for stale in try txn.records(in: OperationErrorRow.table, matching: Query(column == .string(operationId))) {
            try txn.delete(id: stale.id, in: OperationErrorRow.table)
        }
    }

    /// Drops every queued operation of `table` and their recorded failures.
    static func removeAll(of table: String, _ txn: any LocalWriteTransaction) throws {
        for (name, column) in [(OperationRow.table, OperationRow.field(.table)), (OperationErrorRow.table, OperationErrorRow.field(.table))] {
            for row in try txn.records(in: name, matching: Query(column == .string(table))) {
                try txn.delete(id: row.id, in: name)
            }
        }
    }

    // MARK: Batches

    /// The next batch: the longest run of sendable operations in queue order with at most
    /// one operation per item (a second one waits for the first's outcome, so it is sent on
    /// the new version), skipping items blocked by a failed operation, cut at `limit` unless
    /// that would split a local transaction. Operations of `inFlight` (a batch sent and not
    /// yet answered) are skipped, and the batch ends before the first operation on one of
    /// their items.
    ///
    /// `maxRuns` bounds the runs of sequence numbers the batch in flight is stepped over by
    /// (``leavingOut(_:maxRuns:)``); tests set it to compare with leaving it out by id.
    static func nextBatch(_ txn: any LocalReadTransaction, limit: Int, excluding inFlight: [QueuedOperation] = [],
                          maxRuns: Int = maxExcludedRuns) throws -> [QueuedOperation] {
        let blocked = Set(try txn.records(in: OperationRow.table, matching: Query(OperationRow.failed))
            .map { itemKey(try QueuedOperation(row: $0)) })
        let busyItems = Set(inFlight.map(itemKey))
        var batch: [QueuedOperation] = []
        var items = Set<ExactString>()
        // One row past the limit: the row that ends a full batch is read in the same page.
        let pageSize = max(limit, 100) + 1
        // The batch in flight is left out by the store, so its rows are neither read nor
        // decoded: stepped over by sequence where it lies in a few runs (the usual case), by
        // id otherwise (an id list costs the store a temporary index per query).
        let runs = sequenceRuns(inFlight)
        let skipped: [ClosedRange<Int64>] = runs.count <= maxRuns ? runs : []
        let wanted: QueryPredicate = inFlight.isEmpty || !skipped.isEmpty
            ? OperationRow.sendable
            : OperationRow.sendable && .not(.isIn(SystemField.id, inFlight.map { .string($0.id) }))
        // Paged by sequence (keyset), not by offset: each page starts at the indexed
        // sequence where the last one ended, so a long run of skipped operations costs one
        // pass, not a quadratic one.
        var after: Int64?
        var nextSkipped = 0
        scan: while true {
            var page = after.map { wanted && OperationRow.field(.sequence) > .int($0) } ?? wanted
            let below = nextSkipped < skipped.count ? skipped[nextSkipped].lowerBound : nil
            if let below { page = page && OperationRow.field(.sequence) < .int(below) }
            let rows = try txn.records(in: OperationRow.table, matching: Query(
                page, order: [OperationRow.sorted(.sequence)], limit: pageSize))
            for row in rows {
                let operation = try QueuedOperation(row: row)
                let item = itemKey(operation)
                if blocked.contains(item) { continue }
                if items.contains(item) || busyItems.contains(item) { break scan }
                if let last = batch.last, batch.count >= limit,
                   last.transaction != operation.transaction || batch.count >= limit * 10 { break scan }
                batch.append(operation)
                items.insert(item)
            }
            if rows.count == pageSize {
                after = rows.last?[OperationRow.name(.sequence)].intValue
            } else if below != nil {
                // This stretch is read: step over the run in flight.
                after = skipped[nextSkipped].upperBound
                nextSkipped += 1
            } else {
                break
            }
        }
        return batch
    }

    /// The most runs of sequence numbers a batch in flight is left out by; past them, by id.
    static let maxExcludedRuns = 16

    /// The sequence numbers of `operations` as runs: maximal ranges of consecutive numbers,
    /// each one of theirs, in order. Sequences are unique in the queue, so while these
    /// operations are queued, an operation whose sequence lies in a run is one of them.
    static func sequenceRuns(_ operations: [QueuedOperation]) -> [ClosedRange<Int64>] {
        var runs: [ClosedRange<Int64>] = []
        for sequence in operations.map(\.sequence).sorted() {
            if let last = runs.last, sequence <= last.upperBound + 1 {
                runs[runs.count - 1] = last.lowerBound...max(last.upperBound, sequence)
            } else {
                runs.append(sequence...sequence)
            }
        }
        return runs
    }

    /// Leaves out exactly `operations`, which must be queued (their rows not removed, so no
    /// other operation holds their sequence numbers): by their sequence runs when there are
    /// at most `maxRuns`, by their ids otherwise.
    static func leavingOut(_ operations: [QueuedOperation], maxRuns: Int = maxExcludedRuns) -> QueryPredicate {
        let runs = sequenceRuns(operations)
        guard runs.count <= maxRuns, !runs.isEmpty else { return .not(.isIn(SystemField.id, operations.map { .string($0.id) })) }
        let sequence = OperationRow.field(.sequence)
        return .and(runs.map { run in .not(sequence >= .int(run.lowerBound) && sequence <= .int(run.upperBound)) })
    }

    // MARK: Queuing

    /// What queuing a change did.
    enum Effect {
        /// A new operation joined the queue.
        case appended(QueuedOperation)
        /// The change was folded into the item's pending operation.
        case collapsed(QueuedOperation)
        /// An insert and a delete cancelled out: nothing will be sent.
        case cancelled
    }

    /// Queues a change, collapsing it into the item's newest operation when that one is still
    /// pending (never sent). Pairs (first, second):
    /// insert+update → insert with the new item; insert+delete → both vanish;
    /// update+update → update with the new item; update+delete → delete;
    /// delete+insert → update with the new item; any other pair → `invalidOperationSequence`.
    /// An operation that was sent (attempted) or failed is never rewritten: the change queues behind it.
    ///
    /// `latest` is the item's newest queued operation, read before the change (``itemAndLatest(_:table:itemId:)``).
    @discardableResult
    static func enqueue(_ txn: any LocalWriteTransaction, table: String, itemId: String, kind: OperationKind,
                        item: Record?, baseVersion: String?, changedFields: [String], transaction: String,
                        latest: QueuedOperation?, sequence: () throws -> Int64, now: Timestamp) throws -> Effect {
        if var previous = latest, previous.state == .pending {
            let merged = Set(previous.changedFields).union(changedFields).sorted(by: Value.utf8Less)
            switch (previous.kind, kind) {
            case (.insert, .update):
                previous.item = item
                previous.changedFields = merged
            case (.insert, .delete):
                try remove(previous, txn)
                return .cancelled
            case (.update, .update):
                previous.item = item
                previous.changedFields = merged
            case (.update, .delete):
                previous.kind = .delete
                previous.item = item
            case (.delete, .insert):
                // Every field of the deleted item and of the new one may differ from the base.
                let oldFields = previous.item.map { Array($0.fields.keys) } ?? []
                previous.kind = .update
                previous.item = item
                previous.changedFields = Set(changedFields).union(oldFields).sorted(by: Value.utf8Less)
            default:
                throw SyncError(.invalidOperationSequence,
                                "cannot queue \(kind.rawValue) after a pending \(previous.kind.rawValue) of item '\(itemId)' in table '\(table)'")
            }
            previous.changedAt = now
            previous.transaction = transaction
            try save(previous, txn)
            return .collapsed(previous)
        }
        let operation = QueuedOperation(id: UUID.randomString(), sequence: try sequence(), table: table, itemId: itemId,
                                        kind: kind, item: item, baseVersion: baseVersion, transaction: transaction,
                                        changedFields: changedFields, now: now)
        try save(operation, txn)
        return .appended(operation)
    }
}
