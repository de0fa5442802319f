import OfflineSync
import OfflineSyncStoreKit

/// PostgreSQL's side of the core's ``SQLPredicateTranslator``: `$n` placeholders, `boolean`
/// expressions (PostgreSQL's AND / OR / NOT follow the evaluator's Kleene logic), strings
/// and ids as `bytea` so comparisons, `position()` and `substring()` are byte-exact and
/// ordering is by UTF-8 bytes, and explicit null ordering (first ascending, last
/// descending), which the table's `NULLS FIRST` indexes serve.
struct PGDialect: SQLDialect {
    let table: PGTable
    /// Whether the database stores text as UTF-8, so the string functions count and index
    /// Unicode scalars as the evaluator does (`length`, `strpos` and `substr` count bytes in
    /// a `SQL_ASCII` database); without it they are left to the evaluator.
    let textFunctions: Bool

    func column(_ field: String) -> SQLColumn? { table.column(field) }
    func parameter(_ literal: Value) -> PGParameter? { literal.isNull ? nil : PGTable.parameter(literal) }
    func placeholder(_ position: Int) -> String { "$\(position)" }
    var trueSQL: String { "TRUE" }
    var falseSQL: String { "FALSE" }
    var unknownSQL: String { "NULL::boolean" }

    func contains(_ column: SQLColumn, _ needle: String, bind: (PGParameter) -> String) -> String {
        // position() over bytea: byte-exact and case-sensitive; an empty needle is at 1.
        "(position(\(bind(.bytes(Array(needle.utf8)))) in \(column.sql)) > 0)"
    }

    func hasPrefix(_ column: SQLColumn, _ prefix: String, bind: (PGParameter) -> String) -> String {
        // A shorter string yields a shorter substring, so it is false, not unknown.
        let p = bind(.bytes(Array(prefix.utf8)))
        return "(substring(\(column.sql) from 1 for octet_length(\(p))) = \(p))"
    }

    func hasSuffix(_ column: SQLColumn, _ suffix: String, bind: (PGParameter) -> String) -> String? {
        // The bytes from octet_length(column) - octet_length(suffix) + 1 to the end. A start
        // below 1 (a shorter string) yields the whole, shorter value: false, not unknown. A
        // start past the end (the empty suffix) yields empty bytes, equal to the empty suffix.
        let s = bind(.bytes(Array(suffix.utf8)))
        return "(substring(\(column.sql) from octet_length(\(column.sql)) - octet_length(\(s)) + 1) = \(s))"
    }

    func orderTerm(_ column: SQLColumn, ascending: Bool) -> String {
        "\(column.sql) \(ascending ? "ASC NULLS FIRST" : "DESC NULLS LAST")"
    }
}

extension SQLPredicateTranslator where Dialect == PGDialect {
    /// A translator for `table`, within PostgreSQL's 65,535 parameters per statement;
    /// `textFunctions` when the server's encoding is UTF-8 (``PGConnection/serverUsesUTF8``).
    init(table: PGTable, textFunctions: Bool) {
        self.init(dialect: PGDialect(table: table, textFunctions: textFunctions), maxParameters: 30_000)
    }
}
