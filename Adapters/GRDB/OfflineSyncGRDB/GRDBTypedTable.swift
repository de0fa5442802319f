import Foundation
import Synchronization
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit

/// One of the app's synced tables as the adapter sees it: the app's own SQLite table, with a
/// text `id` column (its primary key) and one typed column per declared field, named as the
/// field (``GRDBColumnCodec``); and beside it the adapter's side table
/// `__osync_meta_<number>`, one row per record the sync engine knows, holding what the app's
/// table has no column for: the version, the remote's change time, the tombstone flag, the
/// undeclared fields (``UndeclaredFieldPolicy/store``) and the exact value of a declared field
/// its column cannot hold (``GRDBColumnCodec/isExact(_:as:)``).
///
/// A row of the app's table without a side row is one the engine has not queued yet: the
/// capture triggers (``GRDBCapture``) note it and the next transaction queues it as an insert.
/// Columns of the app's table that the schema does not declare are the app's alone: never
/// read, and kept as they are when the engine writes the row.
final class GRDBTypedTable: @unchecked Sendable {
    // @unchecked Sendable: immutable after `init` but for the lazily built multi-row
    // statements, which are read and made under their lock.

    /// The catalog number: names the side table, the triggers and the indexes.
    let number: Int64
    let schema: TableSchema
    let schemaBytes: [UInt8]
    let layout: SQLTableLayout
    /// The quoted table name.
    let sqlName: String
    /// The quoted side table name.
    let metaName: String
    /// The quoted column of each declared field, in schema order.
    let columns: [String]

    let selectList: String
    let selectFrom: String
    let upsertSQL: String
    let insertSQL: String
    let metaUpsertSQL: String

    /// The statement columns after the id and the fields: version, updatedAt, deleted, extra, exact.
    static let metaColumnCount = 5

    init(number: Int64, schema: TableSchema, schemaBytes: [UInt8]) {
        self.number = number
        self.schema = schema
        self.schemaBytes = schemaBytes
        layout = SQLTableLayout(schema)
        sqlName = GRDBName.quote(schema.name)
        metaName = GRDBName.quote("\(GRDBName.prefix)meta_\(number)")
        columns = schema.fields.map { GRDBName.quote($0.name) }
        let fieldList = columns.map { "t.\($0)" }
        selectList = (["t.\"id\""] + fieldList + ["m.\"version\"", "m.\"updatedAt\"", "m.\"deleted\"", "m.\"extra\"", "m.\"exact\""])
            .joined(separator: ", ")
        selectFrom = "SELECT \(selectList) FROM \(sqlName) AS t LEFT JOIN \(metaName) AS m ON m.\"id\" = t.\"id\""
        let names = (["\"id\""] + columns).joined(separator: ", ")
        let placeholders = (1...(columns.count + 1)).map { "?\($0)" }.joined(separator: ", ")
        let updates = columns.map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        insertSQL = "INSERT INTO \(sqlName) (\(names)) VALUES (\(placeholders)) ON CONFLICT(\"id\") DO NOTHING"
        upsertSQL = columns.isEmpty ? insertSQL
            : "INSERT INTO \(sqlName) (\(names)) VALUES (\(placeholders)) ON CONFLICT(\"id\") DO UPDATE SET \(updates)"
        metaUpsertSQL = """
            INSERT INTO \(metaName) ("id", "version", "updatedAt", "deleted", "extra", "exact") VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
            ON CONFLICT("id") DO UPDATE SET "version" = excluded."version", "updatedAt" = excluded."updatedAt", \
            "deleted" = excluded."deleted", "extra" = excluded."extra", "exact" = excluded."exact"
            """
    }

    /// The most rows one multi-row statement writes or reads by id.
    static let rowsPerStatement = 100

    /// ``upsertSQL`` and ``metaUpsertSQL`` for ``rowsPerStatement`` rows, made once: building
    /// them per page was a seventh of pull-1m-grdb in `perf`.
    private lazy var fullUpserts = (multiRow(upsertSQL, columns: columns.count + 1, rows: Self.rowsPerStatement),
                                    multiRow(metaUpsertSQL, columns: 6, rows: Self.rowsPerStatement))
    private let fullUpsertsLock = Mutex(())

    /// ``upsertSQL`` for `rows` rows (bindings row after row).
    func upsertSQL(rows: Int) -> String {
        if rows == Self.rowsPerStatement { return fullUpsertsLock.withLock { _ in fullUpserts.0 } }
        return rows == 1 ? upsertSQL : multiRow(upsertSQL, columns: columns.count + 1, rows: rows)
    }

    /// ``metaUpsertSQL`` for `rows` rows.
    func metaUpsertSQL(rows: Int) -> String {
        if rows == Self.rowsPerStatement { return fullUpsertsLock.withLock { _ in fullUpserts.1 } }
        return rows == 1 ? metaUpsertSQL : multiRow(metaUpsertSQL, columns: 6, rows: rows)
    }

    /// `statement`, whose one `VALUES (?1, …, ?columns)` row is replaced by `rows` rows
    /// numbered on.
    private func multiRow(_ statement: String, columns: Int, rows: Int) -> String {
        let one = "(" + (1...columns).map { "?\($0)" }.joined(separator: ", ") + ")"
        let many = (0..<rows).map { row in
            "(" + (1...columns).map { "?\(row * columns + $0)" }.joined(separator: ", ") + ")"
        }.joined(separator: ", ")
        return statement.replacingOccurrences(of: "VALUES " + one, with: "VALUES " + many)
    }

    /// The side table's definition.
    var createMetaSQL: String {
        """
        CREATE TABLE IF NOT EXISTS \(metaName) ("id" TEXT NOT NULL PRIMARY KEY, "version" TEXT, "updatedAt" INTEGER, \
        "deleted" INTEGER NOT NULL DEFAULT 0, "extra" BLOB, "exact" BLOB) WITHOUT ROWID
        """
    }

    /// The app table's definition, for a table the app has not created.
    var createTableSQL: String {
        let fields = zip(columns, schema.fields).map { "\($0) \(GRDBColumnCodec.sqlType($1.type))" }
        return "CREATE TABLE \(sqlName) (" + (["\"id\" TEXT NOT NULL PRIMARY KEY"] + fields).joined(separator: ", ") + ")"
    }

    /// The adapter's indexes on the app table: `(name, SQL)` for each declared index whose
    /// fields are all columns of the app's table (the id or declared fields). An index on a
    /// system property (kept in the side table) is not made: indexes only speed queries up.
    var indexes: [(name: String, sql: String)] {
        var definitions = schema.indexes.map(\.fields)
        for field in schema.fields where field.indexed { definitions.append([field.name]) }
        return definitions.enumerated().compactMap { position, fields in
            guard fields.allSatisfy({ $0 == SystemField.id || layout.position(of: $0) != nil }) else { return nil }
            let name = "\(GRDBName.prefix)idx_\(number)_\(position)"
            let list = fields.map(GRDBName.quote).joined(separator: ", ")
            return (name, "CREATE INDEX IF NOT EXISTS \(GRDBName.quote(name)) ON \(sqlName) (\(list))")
        }
    }

    /// The names of every index ``indexes`` may have made (for dropping them).
    var indexNames: [String] {
        (0..<(schema.indexes.count + schema.fields.count)).map { "\(GRDBName.prefix)idx_\(number)_\($0)" }
    }

    // MARK: Rows

    /// The record of a row of ``selectFrom``. A column holding what its field's type cannot
    /// read (``GRDBColumnCodec/decode(_:as:table:id:field:)``) throws its
    /// ``SyncError/Code/schemaMismatch``.
    func decode(_ row: [SQLiteValue]) throws -> Record {
        try decode(row, strict: true) { _, _ in }
    }

    /// The record of a row of ``selectFrom`` without the fields whose columns hold what their
    /// type cannot read: `unreadable` is told each one's position and error. A row without a
    /// text id, or whose side row does not decode, throws.
    func decode(_ row: [SQLiteValue], unreadable: (Int, SyncError) -> Void) throws -> Record {
        try decode(row, strict: false, unreadable)
    }

    private func decode(_ row: [SQLiteValue], strict: Bool, _ unreadable: (Int, SyncError) -> Void) throws -> Record {
        guard case .text(let id) = row[0] else {
            throw SyncError(.schemaMismatch, "table '\(schema.name)': a row's id column holds no text")
        }
        let metaStart = columns.count + 1
        var exact: [String: Value] = [:]
        if case .blob(let bytes) = row[metaStart + 4], case .object(let object) = try ValueCodec.decode(bytes) { exact = object }
        var fields: [String: Value] = [:]
        fields.reserveCapacity(columns.count)
        for (position, field) in schema.fields.enumerated() {
            let stored = row[position + 1]
            if let kept = exact[field.name], GRDBColumnCodec.encode(kept, as: field.type) == stored {
                fields[field.name] = kept
                continue
            }
            let value: Value
            do {
                value = try GRDBColumnCodec.decode(stored, as: field.type, table: schema.name, id: id, field: field.name)
            } catch let error as SyncError where !strict {
                unreadable(position, error)
                continue
            }
            if !value.isNull { fields[field.name] = value }
        }
        if case .blob(let bytes) = row[metaStart + 3], case .object(let extra) = try ValueCodec.decode(bytes) {
            for (name, value) in extra where fields[name] == nil { fields[name] = value }
        }
        var version: String?
        if case .text(let v) = row[metaStart] { version = v }
        var updatedAt: Timestamp?
        if case .int(let ms) = row[metaStart + 1] { updatedAt = Timestamp(millisecondsSince1970: ms) }
        var deleted = false
        if case .int(let d) = row[metaStart + 2] { deleted = d != 0 }
        return Record(id: id, nonNullFields: fields, version: version, updatedAt: updatedAt, deleted: deleted)
    }

    /// The bindings of ``upsertSQL`` and ``metaUpsertSQL`` for `record`, validated against
    /// the schema (throws what `TableSchema.validate(_:)` throws).
    func bindings(for record: Record) throws -> (row: [SQLiteValue], meta: [SQLiteValue]) {
        var row = [SQLiteValue](repeating: .null, count: columns.count + 1)
        row[0] = .text(record.id)
        var exact: [(key: String, value: Value)] = []
        let extra = try layout.validateAndSplit(record) { position, value in
            let type = schema.fields[position].type
            row[position + 1] = GRDBColumnCodec.encode(value, as: type)
            if !GRDBColumnCodec.isExact(value, as: type) { exact.append((schema.fields[position].name, value)) }
        }
        let meta: [SQLiteValue] = [
            .text(record.id), record.version.map(SQLiteValue.text) ?? .null,
            record.updatedAt.map { .int($0.millisecondsSince1970) } ?? .null, .int(record.deleted ? 1 : 0),
            extra.map(SQLiteValue.blob) ?? .null,
            exact.isEmpty ? .null : .blob(ValueCodec.encodeObject(distinct: exact)),
        ]
        return (row, meta)
    }
}

/// Names of the adapter's objects in the app's database.
enum GRDBName {
    /// The prefix of every object the adapter adds for the app's tables (side tables,
    /// triggers, indexes, its catalog); the SQLite adapter's bookkeeping tables use it too.
    static let prefix = "__osync_"
    /// Catalog of the app's synced tables: number, name, schema.
    static let catalog = quote("\(prefix)grdb_tables")
    /// The changed rows the triggers noted and the engine has not queued yet.
    static let captured = quote("\(prefix)captured")
    /// Holds one row while the adapter itself writes: the triggers capture nothing then.
    static let applying = quote("\(prefix)applying")
    /// The rows whose captured write was queued as a failed operation because the engine could
    /// not read them (``GRDBCapture``), with that operation: the row's next write takes it back.
    static let refused = quote("\(prefix)refused")
    /// Counters: captured writes (by the app) and the adapter's own commits.
    static let state = quote("\(prefix)grdb_state")

    /// `name` in double quotes, embedded double quotes doubled (the SQLite adapter's quoting).
    static func quote(_ name: String) -> String { SQLiteName.quote(name) }

    /// ASCII-only lowercasing: how SQLite folds identifier case.
    static func folded(_ s: String) -> [UInt8] { SQLiteName.asciiLowercased(s) }
}
