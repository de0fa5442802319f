import OfflineSync
import OfflineSyncStoreKit

/// SQLite's side of the core's ``SQLPredicateTranslator``: `?NNN` placeholders, 1/0/NULL as
/// booleans (SQLite's AND / OR / NOT follow the evaluator's Kleene logic), byte-exact
/// substring, prefix and suffix tests over blobs, and SQLite's own null ordering (first
/// ascending, last descending, as the evaluator orders).
struct SQLiteDialect: SQLiteFamilyDialect {
    let table: SQLiteTable

    func column(_ field: String) -> SQLColumn? { table.column(field) }
}

/// What every dialect over SQLite shares — the SQLite adapter's own tables and an app's GRDB
/// tables: ``SQLiteValue`` parameters, `?NNN` placeholders, 1/0/NULL as booleans, byte-exact
/// substring, prefix and suffix tests over blobs, and SQLite's null ordering. A conforming
/// dialect says only which columns SQL may see.
package protocol SQLiteFamilyDialect: SQLDialect where Parameter == SQLiteValue {}

extension SQLiteFamilyDialect {
    /// A scalar literal as stored in a column of its own type.
    package func parameter(_ literal: Value) -> SQLiteValue? {
        switch literal {
        case .bool(let b): return .int(b ? 1 : 0)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .text(s)
        case .bytes(let b): return .blob(b)
        case .date(let t): return .int(t.millisecondsSince1970)
        case .null, .array, .object: return nil
        }
    }

    /// Numbered (`?NNN`), so SQL that repeats a computed argument binds it once.
    package func placeholder(_ position: Int) -> String { "?\(position)" }
    package var trueSQL: String { "1" }
    package var falseSQL: String { "0" }
    package var unknownSQL: String { "NULL" }

    package func contains(_ column: SQLColumn, _ needle: String, bind: (SQLiteValue) -> String) -> String {
        // instr over blobs: byte-exact and case-sensitive (LIKE would fold ASCII case).
        // An empty needle is found in every string (instr returns 1), as in the evaluator.
        "(instr(CAST(\(column.sql) AS BLOB), \(bind(.blob(Array(needle.utf8))))) > 0)"
    }

    package func hasPrefix(_ column: SQLColumn, _ prefix: String, bind: (SQLiteValue) -> String) -> String {
        // Over blobs, length() and substr() count bytes, so the prefix compares byte for
        // byte. substr() of a zero-length blob is NULL, hence the explicit length test
        // (a shorter string is false, not unknown) and the empty prefix as a constant.
        let bytes = Array(prefix.utf8)
        if bytes.isEmpty { return "(CASE WHEN \(column.sql) IS NULL THEN NULL ELSE 1 END)" }
        let blob = "CAST(\(column.sql) AS BLOB)"
        let length = bind(.int(Int64(bytes.count))), count = bind(.int(Int64(bytes.count))), value = bind(.blob(bytes))
        return "(CASE WHEN \(column.sql) IS NULL THEN NULL WHEN length(\(blob)) < \(length) THEN 0 ELSE substr(\(blob), 1, \(count)) = \(value) END)"
    }

    package func hasSuffix(_ column: SQLColumn, _ suffix: String, bind: (SQLiteValue) -> String) -> String? {
        // As hasPrefix, counting from the end: substr() with a negative start takes that
        // many bytes from the right of a blob. A shorter string would yield the whole blob,
        // which cannot equal the longer suffix, but the length test keeps that explicit; the
        // empty suffix is a constant (it ends every string).
        let bytes = Array(suffix.utf8)
        if bytes.isEmpty { return "(CASE WHEN \(column.sql) IS NULL THEN NULL ELSE 1 END)" }
        let blob = "CAST(\(column.sql) AS BLOB)"
        let length = bind(.int(Int64(bytes.count))), start = bind(.int(-Int64(bytes.count))), value = bind(.blob(bytes))
        return "(CASE WHEN \(column.sql) IS NULL THEN NULL WHEN length(\(blob)) < \(length) THEN 0 ELSE substr(\(blob), \(start)) = \(value) END)"
    }

    /// SQLite orders nulls first ascending and last descending, as the evaluator does.
    package func orderTerm(_ column: SQLColumn, ascending: Bool) -> String {
        "\(column.sql) \(ascending ? "ASC" : "DESC")"
    }
}
