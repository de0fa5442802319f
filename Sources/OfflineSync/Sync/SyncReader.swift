/// A read of a context's local store in one consistent snapshot, lent to the closure of
/// ``SyncContext/read(_:)`` or ``SyncContext/observe(_:)``; never store it. It notes the
/// tables it reads, which is how an observation of the closure knows what to watch.
///
/// App tables only: system tables (`__` names) throw ``SyncError/Code/invalidName``.
public final class SyncReader {
    let txn: any LocalReadTransaction
    /// The tables read so far.
    private(set) var tables: Set<String> = []
    /// The table the last read named, already checked and noted: a closure that reads one
    /// table many times pays for the check and the set's hashing once.
    private var lastNoted: ExactString?

    init(_ txn: any LocalReadTransaction) { self.txn = txn }

    private func note(_ table: String) throws {
        let name = ExactString(table)
        if name == lastNoted { return }
        try Names.validateAppTable(table)
        tables.insert(table)
        lastNoted = name
    }

    /// The record with this id, or `nil`.
    public func record(in table: String, id: String) throws -> Record? {
        try note(table)
        return try txn.record(in: table, id: id)
    }

    /// The records matching the query, in its order.
    public func records(in table: String, matching query: Query = .all) throws -> [Record] {
        try note(table)
        return try txn.records(in: table, matching: query)
    }

    /// The number of records matching the predicate.
    public func count(in table: String, matching predicate: QueryPredicate = .all) throws -> Int {
        try note(table)
        return try txn.count(in: table, matching: predicate)
    }

    /// The model with this id in its table, or `nil`. Throws ``SyncError/Code/typeMismatch``
    /// for a stored record that does not fit `Model`.
    public func get<Model: SyncModel>(_ model: Model.Type, id: Model.ID) throws -> Model? {
        try record(in: Model.tableName, id: id.recordId).map { try ModelCoding.decode(Model.self, from: $0) }
    }

    /// The models the request selects, in its order.
    public func query<Model: SyncModel>(_ request: ModelQuery<Model>) throws -> [Model] {
        let decoder = RecordDecoder()
        return try records(in: Model.tableName, matching: request.query)
            .map { try ModelCoding.decode(Model.self, from: $0, decoder: decoder) }
    }

    /// Every model of the table, in id order.
    public func query<Model: SyncModel>(_ model: Model.Type) throws -> [Model] {
        try query(ModelQuery<Model>())
    }

    /// The number of models matching the predicate.
    public func count<Model: SyncModel>(_ model: Model.Type, _ predicate: ModelPredicate<Model> = .all) throws -> Int {
        try count(in: Model.tableName, matching: predicate.predicate)
    }
}

extension SyncContext {
    /// Runs `body` on one consistent snapshot of the local store. There is no write
    /// counterpart on purpose: every write goes through the context's tables and
    /// ``transaction(_:)``, so it is queued and observations see it.
    public func read<T: Sendable>(_ body: @escaping @Sendable (SyncReader) throws -> T) async throws -> T {
        try await store.read { txn in try body(SyncReader(txn)) }
    }

    /// The value `read` computes, now and again after every commit to a table it read (a list
    /// with its todo count, a join done in Swift): GRDB's `ValueObservation.tracking`.
    ///
    /// - The tables watched are those the last run of `read` read, so a read that takes
    ///   another branch watches other tables from then on. A commit to any table while `read`
    ///   runs makes it run once more.
    /// - Equal values are skipped: iteration yields a value only when it differs from the
    ///   last one yielded (GRDB's `removeDuplicates()`, here always on).
    /// - `map` and the other `AsyncSequence` operators apply after that, so a mapped value
    ///   can repeat; compute the value you compare inside `read`.
    /// - `read` runs off the caller's task on the store's reader; keep it to reads. It is
    ///   run again after every relevant commit, coalesced when commits come faster than a
    ///   consumer reads, as every ``ObservedValue`` is.
    ///
    /// Errors (a system table, a record that does not fit its model, a closed store) are
    /// thrown by `next()`.
    public func observe<Value: Equatable & Sendable>(_ read: @escaping @Sendable (SyncReader) throws -> Value) -> ObservedValue<Value> {
        ObservedValue(observer: observer, tracking: read)
    }
}
