import Foundation
import OfflineSync
import OfflineSyncStoreKit


/// A defined table as PostgreSQL sees it: its schema, its quoted names and the statements
/// that read and write its rows. Built from a catalog row; immutable. A class, so a query
/// shape memo (``PGConnection/shapes``) can key on the identity of one layout.
///
/// Layout of `"<schema>"."osync_t<n>"` (`n` is the catalog number, renewed by every migration that
/// changes the columns):
/// - `id bytea PRIMARY KEY`, `version bytea`, `updatedAt bigint` (ms), `deleted boolean`,
///   `extra bytea` (the undeclared fields as one ``ValueCodec`` object, NULL when none);
/// - per declared field at position `i`, column `c<i>`: `boolean`, `bigint`,
///   `double precision`, `bytea` (strings as their exact UTF-8 bytes, so ordering is by bytes
///   and a NUL survives), `bytea`, `bigint` (dates in ms); arrays, objects and `any` as a
///   ``ValueCodec`` `bytea` (exact) plus `j<i> jsonb`, a read-only JSON mirror for SQL tools
///   and GIN indexes, never read back.
final class PGTable {
    let number: Int64
    let schema: TableSchema
    /// The quoted, schema-qualified table name.
    let sqlName: String
    let selectList: String
    let selectByID: String
    /// ``selectByID`` holding the row it reads (`FOR SHARE`): ``PGTransaction/heldRecord(in:id:exclusive:)``.
    let selectByIDHeld: String
    /// ``selectByID`` holding the row against other holders too (`FOR NO KEY UPDATE`).
    let selectByIDLocked: String
    let upsert: String
    /// The upsert of ``rowsPerStatement`` rows, spelled once: most rows of a big write go
    /// through it.
    private let fullUpsert: String
    let deleteByID: String
    /// The columns an upsert writes, in parameter order.
    private let written: [String]
    /// Rows per multi-row upsert: as many as fit PostgreSQL's 65,535 parameters, at most 500.
    let rowsPerStatement: Int
    /// Where each field lives.
    let layout: SQLTableLayout
    /// Whether each declared field has a JSON mirror column.
    private let mirrored: [Bool]


    init(number: Int64, schema: TableSchema, quotedSchema: String) {
        self.number = number
        self.schema = schema
        sqlName = "\(quotedSchema).\"\(Self.tableName(number))\""
        layout = SQLTableLayout(schema)
        mirrored = schema.fields.map { !$0.type.isScalar }
        let fieldColumns = schema.fields.indices.map(Self.fieldColumn)
        selectList = (SQLTableLayout.systemColumns + fieldColumns).joined(separator: ", ")
        var written = SQLTableLayout.systemColumns + fieldColumns
        for (position, mirror) in mirrored.enumerated() where mirror { written.append(Self.jsonColumn(position)) }
        self.written = written
        rowsPerStatement = max(1, min(500, 65_535 / written.count))
        upsert = Self.upsertSQL(into: sqlName, columns: written, rows: 1)
        fullUpsert = Self.upsertSQL(into: sqlName, columns: written, rows: rowsPerStatement)
        selectByID = "SELECT \(selectList) FROM \(sqlName) WHERE \"id\" = $1"
        selectByIDHeld = selectByID + " FOR SHARE"
        selectByIDLocked = selectByID + " FOR NO KEY UPDATE"
        deleteByID = "DELETE FROM \(sqlName) WHERE \"id\" = $1"
    }

    /// `INSERT … VALUES (…), (…) ON CONFLICT ("id") DO UPDATE` for `rows` rows.
    private static func upsertSQL(into table: String, columns: [String], rows: Int) -> String {
        var values: [String] = []
        values.reserveCapacity(rows)
        for row in 0..<rows {
            let base = row * columns.count
            values.append("(" + columns.indices.map { "$\(base + $0 + 1)" }.joined(separator: ", ") + ")")
        }
        let updates = columns.dropFirst().map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
        return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES \(values.joined(separator: ", ")) ON CONFLICT (\"id\") DO UPDATE SET \(updates)"
    }

    /// The multi-row upserts of ``rowsPerStatement`` rows that write `records` (distinct
    /// ids); the full-size statement and the single-row one are prepared once per connection.
    func upsertStatements<C: Collection>(_ records: C) -> [PGStatement] where C.Element == Record {
        upsertStatements(records.lazy.map(PendingRow.record))
    }

    /// ``upsertStatements(_:)-(Collection<Record>)`` of buffered rows (distinct ids).
    func upsertStatements<C: Collection>(_ records: C) -> [PGStatement] where C.Element == PendingRow {
        var statements: [PGStatement] = []
        var chunk: [PGParameter] = []
        chunk.reserveCapacity(min(records.count, rowsPerStatement) * written.count)
        var rows = 0
        func seal() {
            let sql = rows == 1 ? upsert : rows == rowsPerStatement ? fullUpsert : Self.upsertSQL(into: sqlName, columns: written, rows: rows)
            statements.append(PGStatement(sql, chunk, prepare: rows == 1 || rows == rowsPerStatement))
            chunk.removeAll(keepingCapacity: true)
            rows = 0
        }
        for record in records {
            chunk += parameters(for: record)
            rows += 1
            if rows == rowsPerStatement { seal() }
        }
        if rows > 0 { seal() }
        return statements
    }

    /// Writes records (distinct ids) in one round trip.
    func upsert<C: Collection>(_ records: C, on connection: PGConnection) throws where C.Element == Record {
        let statements = upsertStatements(records)
        if !statements.isEmpty { try connection.execute(statements) }
    }

    /// The SQL name of the table numbered `number` (unquoted): prefixed, so a store can share
    /// a schema with an application's own tables.
    static func tableName(_ number: Int64) -> String { "osync_t\(number)" }
    /// The SQL name of index `position` of the table numbered `number` (unquoted).
    static func indexName(_ number: Int64, _ position: Int) -> String { "osync_t\(number)_i\(position)" }

    static func fieldColumn(_ position: Int) -> String { "\"c\(position)\"" }
    static func jsonColumn(_ position: Int) -> String { "\"j\(position)\"" }

    static func sqlType(_ type: FieldType) -> String {
        switch type {
        case .bool: return "boolean"
        case .int, .date: return "bigint"
        case .double: return "double precision"
        case .string, .bytes, .array, .object, .any: return "bytea"
        }
    }

    /// `CREATE TABLE` for this layout.
    var createTableSQL: String {
        var columns = ["\"id\" bytea PRIMARY KEY", "\"version\" bytea", "\"updatedAt\" bigint",
                       "\"deleted\" boolean NOT NULL", "\"extra\" bytea"]
        for (position, field) in schema.fields.enumerated() {
            columns.append("\(Self.fieldColumn(position)) \(Self.sqlType(field.type))")
            if mirrored[position] { columns.append("\(Self.jsonColumn(position)) jsonb") }
        }
        return "CREATE TABLE \(sqlName) (\(columns.joined(separator: ", ")))"
    }

    /// `CREATE INDEX` statements: one per `indexed` field (GIN over the JSON mirror for
    /// nested fields), then one per composite index. B-tree keys are ascending with nulls
    /// first (the order queries ask for; scanned backwards for descending) and end with the
    /// id, so an equality prefix plus an ordered key reads rows in query order.
    func createIndexSQL(quotedSchema: String) -> [String] {
        var statements: [String] = []
        var position = 0
        func name() -> String {
            defer { position += 1 }
            return "\"\(Self.indexName(number, position))\""
        }
        for (fieldPosition, field) in schema.fields.enumerated() where field.indexed {
            if mirrored[fieldPosition] {
                statements.append("CREATE INDEX \(name()) ON \(sqlName) USING gin (\(Self.jsonColumn(fieldPosition)) jsonb_path_ops)")
            } else {
                statements.append("CREATE INDEX \(name()) ON \(sqlName) (\(Self.fieldColumn(fieldPosition)) NULLS FIRST, \"id\")")
            }
        }
        for index in schema.indexes {
            // The id ends every index (the order's tie-break), once: an index that names it
            // already ends with it.
            let fields = index.fields.last.map { $0.utf8.elementsEqual(SystemField.id.utf8) } == true
                ? index.fields.dropLast() : index.fields[...]
            let keys = fields.compactMap { column($0).map { "\($0.sql) NULLS FIRST" } } + ["\"id\""]
            statements.append("CREATE INDEX \(name()) ON \(sqlName) (\(keys.joined(separator: ", ")))")
        }
        return statements
    }

    /// The column behind a system property or declared field; `nil` for an undeclared field
    /// (kept in `extra`, so SQL cannot see it).
    func column(_ field: String) -> SQLColumn? {
        layout.column(field, fieldColumn: Self.fieldColumn)
    }

    // MARK: Rows

    /// The parameters of ``upsert`` for a record: system columns, the undeclared fields as
    /// one encoded object, each declared field's column, then the JSON mirrors.
    func parameters(for row: PendingRow) -> [PGParameter] {
        switch row {
        case .record(let record):
            let (declared, extra) = layout.split(record.fields)
            return parameters(id: record.id, version: record.version, updatedAt: record.updatedAt, deleted: record.deleted,
                              declared: declared[...], extra: extra)
        case .checked(let row):
            // Checked against this layout: each value is already at its column's position.
            return parameters(id: row.id, version: row.version, updatedAt: row.updatedAt, deleted: row.deleted,
                              declared: row.declared,
                              extra: row.undeclared.isEmpty ? nil : ValueCodec.encodeObject(distinct: row.undeclared))
        }
    }

    private func parameters(id: String, version: String?, updatedAt: Timestamp?, deleted: Bool,
                            declared: ArraySlice<Value>, extra: [UInt8]?) -> [PGParameter] {
        var values: [PGParameter] = [
            .bytes(Array(id.utf8)),
            version.map { .bytes(Array($0.utf8)) } ?? .null,
            updatedAt.map { .int64($0.millisecondsSince1970) } ?? .null,
            .bool(deleted),
        ]
        values.reserveCapacity(SQLTableLayout.firstFieldColumn + 2 * schema.fields.count)
        values.append(extra.map(PGParameter.bytes) ?? .null)
        for (position, value) in zip(mirrored.indices, declared) {
            values.append(mirrored[position] ? (value.isNull ? .null : .bytes(ValueCodec.encode(value))) : Self.parameter(value))
        }
        for (position, value) in zip(mirrored.indices, declared) where mirrored[position] {
            values.append(value.isNull ? .null : .text(PGJSON.render(value)))
        }
        return values
    }

    /// How a scalar field's value is stored in its column (nested fields are ``ValueCodec`` bytes).
    static func parameter(_ value: Value) -> PGParameter {
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int64(i)
        case .double(let d): return .double(d)
        case .string(let s): return .bytes(Array(s.utf8))
        case .bytes(let b): return .bytes(b)
        case .date(let t): return .int64(t.millisecondsSince1970)
        case .array, .object: return .bytes(ValueCodec.encode(value))
        }
    }

    /// Decodes row `row` of a result that selected ``selectList``.
    func decode(_ result: PGResult, _ row: Int) throws -> Record {
        guard let idBytes = result.bytes(row, 0), let id = idBytes.withUnsafeBytes(UTF8Text.string) else {
            throw corrupted("id")
        }
        var version: String?
        if let bytes = result.bytes(row, 1) {
            guard let text = bytes.withUnsafeBytes(UTF8Text.string) else { throw corrupted("version") }
            version = text
        }
        let updatedAt = result.int64(row, 2).map(Timestamp.init(millisecondsSince1970:))
        guard let deleted = result.bool(row, 3) else { throw corrupted("deleted") }
        var fields: [String: Value] = [:]
        if !result.isNull(row, 4) {
            let decoded = try result.withBytes(row, 4) { try ValueCodec.decodeObject($0, reservingExtra: schema.fields.count) }
            guard let object = decoded else { throw corrupted("extra") }
            fields = object
        }
        let checkClashes = !fields.isEmpty
        for (position, field) in schema.fields.enumerated() {
            let column = SQLTableLayout.firstFieldColumn + position
            if result.isNull(row, column) { continue }
            let value = try decodeField(result, row, column, field)
            if checkClashes, fields.index(forKey: field.name) != nil {
                throw SyncError(.corrupted, "table '\(schema.name)': a row keeps field '\(field.name)' both in its column and among its undeclared fields")
            }
            fields[field.name] = value
        }
        return Record(id: id, fields: fields, version: version, updatedAt: updatedAt, deleted: deleted)
    }

    private func decodeField(_ result: PGResult, _ row: Int, _ column: Int, _ field: FieldDefinition) throws -> Value {
        switch field.type {
        case .bool:
            guard let b = result.bool(row, column) else { throw corrupted(field: field.name) }
            return .bool(b)
        case .int:
            guard let i = result.int64(row, column) else { throw corrupted(field: field.name) }
            return .int(i)
        case .double:
            guard let d = result.double(row, column) else { throw corrupted(field: field.name) }
            return .double(d)
        case .date:
            guard let t = result.int64(row, column) else { throw corrupted(field: field.name) }
            return .date(Timestamp(millisecondsSince1970: t))
        case .string:
            guard let bytes = result.bytes(row, column), let s = bytes.withUnsafeBytes(UTF8Text.string) else {
                throw corrupted(field: field.name)
            }
            return .string(s)
        case .bytes:
            return .bytes(result.bytes(row, column) ?? [])
        case .array, .object, .any:
            let value = try result.withBytes(row, column) { try ValueCodec.decode($0) }
            guard field.type.accepts(value), !value.isNull else { throw corrupted(field: field.name) }
            return value
        }
    }

    private func corrupted(_ column: String) -> SyncError {
        SyncError(.corrupted, "table '\(schema.name)': column '\(column)' holds a value of an unexpected kind")
    }

    private func corrupted(field: String) -> SyncError {
        SyncError(.corrupted, "table '\(schema.name)': the column of field '\(field)' holds a value of an unexpected kind")
    }
}

/// The JSON mirror of nested values: objects, arrays, booleans, numbers and strings as
/// themselves, bytes as base64 strings, dates as milliseconds since 1970. `jsonb` cannot
/// hold U+0000, so a NUL in a string becomes U+FFFD in the mirror (the `bytea` column keeps
/// the exact value).
enum PGJSON {
    static func render(_ value: Value) -> String {
        var out = ""
        write(value, into: &out)
        return out
    }

    private static func write(_ value: Value, into out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += d.isFinite ? "\(d)" : "null"
        case .string(let s): writeString(s, into: &out)
        case .bytes(let b): writeString(Data(b).base64EncodedString(), into: &out)
        case .date(let t): out += String(t.millisecondsSince1970)
        case .array(let items):
            out += "["
            for (position, item) in items.enumerated() {
                if position > 0 { out += "," }
                write(item, into: &out)
            }
            out += "]"
        case .object(let object):
            out += "{"
            for (position, key) in object.keys.sorted(by: Value.utf8Less).enumerated() {
                if position > 0 { out += "," }
                writeString(key, into: &out)
                out += ":"
                write(object[key]!, into: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{0}": out += "\\ufffd"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}
