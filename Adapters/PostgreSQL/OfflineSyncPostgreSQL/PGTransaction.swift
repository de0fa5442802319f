import Dispatch
import OfflineSync

/// A transaction lent to a ``PostgreSQLStore`` closure. It runs on its connection's queue;
/// once the closure returns (or from any other thread) every call throws
/// ``SyncError/Code/storeClosed``.
final class PGTransaction: LocalWriteTransaction {
    private var connection: PGConnection?
    private let queueKey: DispatchSpecificKey<Bool>
    private let schema: String
    private let writable: Bool
    private var tableMemo: [ExactString: (number: Int64, schema: TableSchema)] = [:]

    init(connection: PGConnection, queueKey: DispatchSpecificKey<Bool>, schema: String, writable: Bool) {
        self.connection = connection
        self.queueKey = queueKey
        self.schema = schema
        self.writable = writable
    }

    /// Ends the transaction: later calls throw ``SyncError/Code/storeClosed``.
    func end() {
        connection = nil
        tableMemo = [:]
    }

    /// The connection, while the transaction is open and the caller is on its queue.
    func live() throws -> PGConnection {
        guard DispatchQueue.getSpecific(key: queueKey) == true, let connection else {
            throw SyncError(.storeClosed, "the transaction has ended (it was used outside its closure)")
        }
        return connection
    }

    private func table(_ name: String) throws -> (number: Int64, schema: TableSchema) {
        let connection = try live()
        let key = ExactString(name)
        if let info = tableMemo[key] { return info }
        let rows = try connection.execute("SELECT \"num\", \"schema\" FROM \(schema).\"__osync_catalog\" WHERE \"name\" = $1",
                                          [.bytes(Array(name.utf8))]).rows
        guard let row = rows.first else { throw SyncError(.tableNotDefined, "table '\(name)' is not defined") }
        let info = (number: PGRows.int64(row[0]), schema: try ValueCodec.decodeSchema(row[1] ?? []))
        tableMemo[key] = info
        return info
    }

    private func sqlTable(_ number: Int64) -> String { "\(schema).\"t\(number)\"" }

    /// Every record of the table numbered `number`.
    func allRecords(number: Int64) throws -> [Record] {
        let rows = try live().execute("SELECT \"data\" FROM \(sqlTable(number))").rows
        return try rows.map { try ValueCodec.decodeRecord($0[0] ?? []) }
    }

    func schema(of table: String) throws -> TableSchema { try self.table(table).schema }

    func tables() throws -> [TableSchema] {
        let rows = try live().execute("SELECT \"schema\" FROM \(schema).\"__osync_catalog\"").rows
        return try rows.map { try ValueCodec.decodeSchema($0[0] ?? []) }.sorted { Value.utf8Less($0.name, $1.name) }
    }

    func record(in table: String, id: String) throws -> Record? {
        let info = try self.table(table)
        let rows = try live().execute("SELECT \"data\" FROM \(sqlTable(info.number)) WHERE \"id\" = $1",
                                      [.bytes(Array(id.utf8))]).rows
        guard let row = rows.first else { return nil }
        return try ValueCodec.decodeRecord(row[0] ?? [])
    }

    func records(in table: String, matching query: Query) throws -> [Record] {
        let info = try self.table(table)
        try query.validate(against: info.schema)
        return QueryEvaluator.apply(query, to: try candidates(number: info.number, query.predicate))
    }

    func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
        let info = try self.table(table)
        try Query(predicate).validate(against: info.schema)
        return QueryEvaluator.count(predicate, in: try candidates(number: info.number, predicate))
    }

    /// The rows that may match: those with the ids the predicate pins (looked up by primary
    /// key), else every row. ``QueryEvaluator`` then decides, so the result is the same.
    private func candidates(number: Int64, _ predicate: QueryPredicate) throws -> [Record] {
        guard let ids = PGTransaction.pinnedIDs(predicate), ids.count <= 256 else { return try allRecords(number: number) }
        var seen = Set<ExactString>()
        var records: [Record] = []
        for id in ids where seen.insert(ExactString(id)).inserted {
            let rows = try live().execute("SELECT \"data\" FROM \(sqlTable(number)) WHERE \"id\" = $1",
                                          [.bytes(Array(id.utf8))]).rows
            if let row = rows.first { records.append(try ValueCodec.decodeRecord(row[0] ?? [])) }
        }
        return records
    }

    /// The ids outside which no record can match `predicate` (`id == s`, `id in [...]`, or a
    /// conjunction holding one of them), or `nil` when the predicate pins none.
    static func pinnedIDs(_ predicate: QueryPredicate) -> [String]? {
        switch predicate {
        case .compare(let field, .equal, let literal) where field == SystemField.id:
            if case .string(let id) = literal { return [id] }
            return []
        case .isIn(let field, let literals) where field == SystemField.id:
            return literals.compactMap { literal in
                if case .string(let id) = literal { return id }
                return nil
            }
        case .and(let parts):
            for part in parts { if let ids = pinnedIDs(part) { return ids } }
            return nil
        default:
            return nil
        }
    }

    func upsert(_ record: Record, in table: String) throws {
        let info = try self.table(table)
        guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
        try info.schema.validate(record)
        try live().execute("""
            INSERT INTO \(sqlTable(info.number)) ("id", "data") VALUES ($1, $2)
            ON CONFLICT ("id") DO UPDATE SET "data" = EXCLUDED."data"
            """, [.bytes(Array(record.id.utf8)), .bytes(ValueCodec.encode(record))])
    }

    @discardableResult
    func delete(id: String, in table: String) throws -> Bool {
        let info = try self.table(table)
        guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
        let rows = try live().execute("DELETE FROM \(sqlTable(info.number)) WHERE \"id\" = $1 RETURNING 1",
                                      [.bytes(Array(id.utf8))]).rows
        return !rows.isEmpty
    }
}
