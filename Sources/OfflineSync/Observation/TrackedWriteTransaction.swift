/// A write transaction that forwards to the store's and records which rows it touched (and
/// what it wrote), so the ``StoreObserver`` can tell observations after the commit. Lent to
/// one closure. Past ``limit`` rows in a table it stops listing them: the table then counts
/// as changed throughout, which costs each observation of it one read.
final class TrackedWriteTransaction: LocalWriteTransaction {
    /// Rows listed per table before the table counts as wholly changed.
    static let limit = 10_000

    /// What the transaction did to one table.
    private struct Touched {
        var written: [ExactString: Record] = [:]
        var deleted: Set<ExactString> = []
        /// More than ``TrackedWriteTransaction/limit`` rows: no longer listed.
        var many = false
    }

    let base: any LocalWriteTransaction
    private var touched: [String: Touched] = [:]
    /// Whether rows are listed at all: with no observation live when the write began there is
    /// no one to patch a result with them, so only the tables are noted (an observation
    /// that starts meanwhile hears of a whole-table change, and reads).
    private let listsRows: Bool

    init(_ base: any LocalWriteTransaction, listingRows: Bool = true) {
        self.base = base
        self.listsRows = listingRows
    }

    var changes: [TableChange] {
        touched.map { table, touched in
            touched.many ? TableChange(table: table, ids: nil)
                : TableChange(table: table, written: touched.written, deleted: touched.deleted)
        }
    }

    func schema(of table: String) throws -> TableSchema { try base.schema(of: table) }
    func tables() throws -> [TableSchema] { try base.tables() }
    func record(in table: String, id: String) throws -> Record? { try base.record(in: table, id: id) }
    func records(in table: String, matching query: Query) throws -> [Record] { try base.records(in: table, matching: query) }
    func count(in table: String, matching predicate: QueryPredicate) throws -> Int { try base.count(in: table, matching: predicate) }
    func read(_ reads: [LocalRead]) throws -> [[Record]] { try base.read(reads) }

    func upsert(_ record: Record, in table: String) throws {
        try base.upsert(record, in: table)
        noteWritten(CollectionOfOne(record), in: table)
    }

    func upsert(_ records: [Record], in table: String) throws {
        try base.upsert(records, in: table)
        noteWritten(records, in: table)
    }

    /// Notes `records`, written in this order, as the table's rows now.
    private func noteWritten(_ records: some Sequence<Record>, in table: String) {
        note(table) { touched in
            for record in records {
                let id = ExactString(record.id)
                touched.written[id] = record
                touched.deleted.remove(id)
            }
        }
    }

    func upsert(_ rows: ValidatedRows, in table: String) throws {
        try base.upsert(rows, in: table)
        noteWritten(rows.records, in: table)
    }

    func insert(_ record: Record, in table: String) throws -> LocalInsertOutcome {
        let outcome = try base.insert(record, in: table)
        if outcome == .inserted { noteWritten(CollectionOfOne(record), in: table) }
        return outcome
    }

    @discardableResult
    func delete(id: String, in table: String) throws -> Bool {
        let existed = try base.delete(id: id, in: table)
        if existed {
            note(table) { touched in
                let id = ExactString(id)
                touched.written[id] = nil
                touched.deleted.insert(id)
            }
        }
        return existed
    }

    /// Notes every id as deleted, also one that did not exist (the count does not say which):
    /// an observation then finds that id absent, as it was, and yields nothing new for it.
    @discardableResult
    func delete(ids: [String], in table: String) throws -> Int {
        let existed = try base.delete(ids: ids, in: table)
        if existed > 0 {
            note(table) { touched in
                for id in ids.lazy.map(ExactString.init) {
                    touched.written[id] = nil
                    touched.deleted.insert(id)
                }
            }
        }
        return existed
    }

    private func note(_ table: String, _ change: (inout Touched) -> Void) {
        // Mutated in place through the dictionary, so listing n rows costs O(n).
        if touched[table]?.many == true { return }
        guard listsRows else {
            touched[table] = Touched(many: true)
            return
        }
        change(&touched[table, default: Touched()])
        if let t = touched[table], t.written.count + t.deleted.count > Self.limit {
            touched[table] = Touched(many: true)
        }
    }
}
