/// What one committed write transaction changed in one table, as observations see it.
public struct TableChange: Sendable, Equatable {
    /// The table.
    public let table: String
    /// The ids of the records written or deleted; `nil` when not known (a commit made
    /// outside this process's ``StoreObserver``, reported by the adapter), which makes every
    /// observation of the table look again.
    public var ids: Set<String>?

    /// A change to the records with these ids, or to unknown records (`nil`).
    public init(table: String, ids: Set<String>?) {
        self.table = table
        self.ids = ids
    }
}

/// A write transaction that forwards to the store's and records which rows it touched, so
/// the ``StoreObserver`` can tell observations after the commit. Lent to one closure.
final class TrackedWriteTransaction: LocalWriteTransaction {
    let base: any LocalWriteTransaction
    private(set) var touched: [String: Set<String>] = [:]

    init(_ base: any LocalWriteTransaction) { self.base = base }

    var changes: [TableChange] { touched.map { TableChange(table: $0.key, ids: $0.value) } }

    func schema(of table: String) throws -> TableSchema { try base.schema(of: table) }
    func tables() throws -> [TableSchema] { try base.tables() }
    func record(in table: String, id: String) throws -> Record? { try base.record(in: table, id: id) }
    func records(in table: String, matching query: Query) throws -> [Record] { try base.records(in: table, matching: query) }
    func count(in table: String, matching predicate: QueryPredicate) throws -> Int { try base.count(in: table, matching: predicate) }

    func upsert(_ record: Record, in table: String) throws {
        try base.upsert(record, in: table)
        touched[table, default: []].insert(record.id)
    }

    @discardableResult
    func delete(id: String, in table: String) throws -> Bool {
        let existed = try base.delete(id: id, in: table)
        if existed { touched[table, default: []].insert(id) }
        return existed
    }
}
