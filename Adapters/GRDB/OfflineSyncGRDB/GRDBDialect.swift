import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit

/// The SQL side of a query on one of the app's tables (``SQLPredicateTranslator``): only the
/// columns whose SQL comparisons and ordering give, on every row the adapter reads, exactly
/// what the evaluator gives for the value it reads. Every other field is left to the
/// evaluator.
///
/// The app's table is the app's, so SQL cannot take its columns at their word:
/// - a column may have any collation (`COLLATE NOCASE`): text columns are compared
///   `COLLATE BINARY`, byte for byte as the evaluator compares strings (in a UTF-8 database;
///   in a UTF-16 one nothing is translated);
/// - a column's declared type gives it an affinity, which converts a bound text to a number
///   before comparing: a text field is translated only in a TEXT or BLOB (no) affinity
///   column, an integer field only in a numeric or BLOB affinity column;
/// - a column may hold what its field's type does not read (that row is not read: see
///   ``GRDBQuery``), or several storage forms of one value: booleans (any non-zero integer),
///   dates (text, or seconds) and doubles (NaN and -0 kept beside the row) are left to the
///   evaluator, as are arrays, objects and `any`. An integer field may hold REALs that are
///   whole numbers, which SQLite compares with integers exactly, as the evaluator does.
///
/// The system properties live in the adapter's side table, `m`, which the adapter alone
/// writes: `version` (text), `updatedAt` (milliseconds), `deleted` (0 or 1; a row without a
/// side row is not deleted).
struct GRDBDialect: SQLiteFamilyDialect {
    /// The id column, or `nil` when SQL cannot compare it.
    let id: SQLColumn?
    /// Each declared field's column in schema order, `nil` for one left to the evaluator.
    let fields: [SQLColumn?]
    let layout: SQLTableLayout
    /// Whether the side table's columns may be compared (the database is UTF-8).
    let system: Bool

    /// The dialect for `table` as the database holds it now: its text encoding and each
    /// column's declared type (an app migration may rebuild the table with other types).
    static func probe(_ table: GRDBTypedTable, _ sql: SQLiteEmbeddedTables) throws -> GRDBDialect {
        guard case .text(let encoding)? = try sql.scalar("PRAGMA encoding"), encoding == "UTF-8" else {
            return GRDBDialect(id: nil, fields: table.schema.fields.map { _ in nil }, layout: table.layout, system: false)
        }
        var affinities: [[UInt8]: ColumnAffinity] = [:]
        try sql.rows("SELECT \"name\", \"type\" FROM pragma_table_info(?1)", [.text(table.schema.name)]) { row in
            guard case .text(let name) = row[0] else { return }
            var declared = ""
            if case .text(let type) = row[1] { declared = type }
            affinities[GRDBName.folded(name)] = ColumnAffinity(declaredType: declared)
        }
        func textColumn(_ quoted: String, _ name: String) -> SQLColumn? {
            switch affinities[GRDBName.folded(name)] {
            case .text?, .blob?: return SQLColumn(sql: "t.\(quoted) COLLATE BINARY", type: .string)
            default: return nil
            }
        }
        let fields = table.schema.fields.indices.map { position -> SQLColumn? in
            let field = table.schema.fields[position], quoted = table.columns[position]
            switch field.type {
            case .string:
                return textColumn(quoted, field.name)
            case .int:
                switch affinities[GRDBName.folded(field.name)] {
                case .integer?, .real?, .numeric?, .blob?: return SQLColumn(sql: "t.\(quoted)", type: .int)
                default: return nil
                }
            case .bytes:
                return affinities[GRDBName.folded(field.name)] == nil ? nil : SQLColumn(sql: "t.\(quoted)", type: .bytes)
            case .bool, .double, .date, .array, .object, .any:
                return nil
            }
        }
        return GRDBDialect(id: textColumn("\"id\"", "id"), fields: fields, layout: table.layout, system: true)
    }

    func column(_ field: String) -> SQLColumn? {
        switch field {
        case SystemField.id: return id
        case SystemField.version: return system ? SQLColumn(sql: "m.\"version\"", type: .string) : nil
        case SystemField.updatedAt: return system ? SQLColumn(sql: "m.\"updatedAt\"", type: .date) : nil
        case SystemField.deleted: return system ? SQLColumn(sql: "coalesce(m.\"deleted\", 0)", type: .bool) : nil
        default:
            guard let position = layout.position(of: field) else { return nil }
            return fields[position]
        }
    }
}

/// A column's type affinity, from its declared type by SQLite's rules (§3.1 of "Datatypes In
/// SQLite"): it decides what a comparison converts.
enum ColumnAffinity: Equatable {
    case integer, text, blob, real, numeric

    init(declaredType: String) {
        let type = String(decoding: GRDBName.folded(declaredType), as: UTF8.self)
        if type.contains("int") {
            self = .integer
        } else if type.contains("char") || type.contains("clob") || type.contains("text") {
            self = .text
        } else if type.contains("blob") || type.isEmpty {
            self = .blob
        } else if type.contains("real") || type.contains("floa") || type.contains("doub") {
            self = .real
        } else {
            self = .numeric
        }
    }
}
