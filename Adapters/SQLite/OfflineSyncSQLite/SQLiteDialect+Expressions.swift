import COfflineSyncSQLite3
import OfflineSync
import OfflineSyncStoreKit

/// Whether the linked SQLite has its math functions (`floor`, `ceil`, `mod`; built by
/// default since 3.35, but a build may leave them out). Without them, `floor`, `ceiling`,
/// `round` and `mod` of doubles are left to the evaluator.
private let sqliteHasMathFunctions = sqlite3_compileoption_used("ENABLE_MATH_FUNCTIONS") != 0

// Computed values (`QueryExpression`) in SQLite, with the evaluator's results: `lower`,
// `upper` and `trim` are ASCII- and space-only as the evaluator's; `length`, `instr` and
// `substr` count characters (Unicode scalars); integer arithmetic checks SQLite's
// switch to REAL on overflow; dates are integer milliseconds, split in UTC by `strftime`.
extension SQLiteDialect {
    func value(of column: SQLColumn, bind: (SQLiteValue) -> String) -> SQLValue? {
        SQLValue.Kind(column.type).map { SQLValue(sql: column.sql, kind: $0) }
    }

    func value(of literal: Value, bind: (SQLiteValue) -> String) -> SQLValue? {
        switch literal {
        case .string(let s): return SQLValue(sql: bind(.text(s)), kind: .string)
        case .int(let i): return SQLValue(sql: bind(.int(i)), kind: .int)
        case .double(let d): return SQLValue(sql: bind(.double(d)), kind: .double)
        case .date(let t): return SQLValue(sql: bind(.int(t.millisecondsSince1970)), kind: .date)
        default: return nil
        }
    }

    func call(_ function: QueryFunction, _ arguments: [SQLValue], bind: (SQLiteValue) -> String) -> SQLValue? {
        guard SQLFunctions.accepts(function, arguments) else { return nil }
        let x = arguments[0].sql
        switch function {
        case .lowercased: return SQLValue(sql: "lower(\(x))", kind: .string)
        case .uppercased: return SQLValue(sql: "upper(\(x))", kind: .string)
        case .trimmed: return SQLValue(sql: "trim(\(x), ' ')", kind: .string)
        case .length:
            // length() stops at the first U+0000; such rows go to the evaluator.
            return SQLValue(sql: "length(\(x))", kind: .int, doubtful: [holdsNUL(x)])
        case .indexOf:
            return SQLValue(sql: "(instr(\(x), \(arguments[1].sql)) - 1)", kind: .int)
        case .substring:
            // The start and length clamped as the evaluator clamps them (and below 2³¹, so
            // substr's own arithmetic cannot overflow); substr() too stops at U+0000.
            var sql = "substr(\(x), min(max(\(arguments[1].sql), 0), 2147483647) + 1"
            if arguments.count > 2 { sql += ", min(max(\(arguments[2].sql), 0), 2147483647)" }
            return SQLValue(sql: sql + ")", kind: .string, doubtful: [holdsNUL(x)])
        case .concat:
            return SQLValue(sql: "(\(x) || \(arguments[1].sql))", kind: .string)
        case .year, .month, .day, .hour, .minute, .second:
            return SQLValue(sql: calendar(function, x), kind: .int)
        case .add, .subtract, .multiply, .divide, .modulo:
            return arithmetic(function, arguments[0], arguments[1])
        case .floor, .ceiling, .round:
            if arguments[0].kind == .int { return arguments[0] }
            guard sqliteHasMathFunctions else { return nil }
            let sql = function == .floor ? "floor(\(x))" : function == .ceiling ? "ceil(\(x))"
                : SQLFunctions.roundHalfAwayFromZero(x)
            return SQLValue(sql: sql, kind: .double)
        }
    }

    func compare(_ lhs: SQLValue, _ op: ComparisonOperator, _ rhs: SQLValue) -> String? {
        // Text compares with the BINARY collation (UTF-8 bytes, as the evaluator); an
        // integer with a double compares exactly (sqlite3IntFloatCompare).
        guard lhs.kind == rhs.kind || (lhs.isNumber && rhs.isNumber) else { return nil }
        return "(\(lhs.sql) \(SQLFunctions.sqlOperator(op)) \(rhs.sql))"
    }

    /// True when the text holds U+0000 (instr compares bytes, NUL included).
    private func holdsNUL(_ text: String) -> String { "(instr(\(text), char(0)) > 0)" }

    private func calendar(_ function: QueryFunction, _ ms: String) -> String {
        let format: String
        switch function {
        case .year: format = "%Y"
        case .month: format = "%m"
        case .day: format = "%d"
        case .hour: format = "%H"
        case .minute: format = "%M"
        default: format = "%S"
        }
        return "(CASE WHEN \(ms) >= \(SQLFunctions.firstCalendarMillisecond) AND \(ms) < \(SQLFunctions.pastCalendarMillisecond)"
            + " THEN CAST(strftime('\(format)', \(SQLFunctions.floorSeconds(ms)), 'unixepoch') AS INTEGER) END)"
    }

    private func arithmetic(_ function: QueryFunction, _ a: SQLValue, _ b: SQLValue) -> SQLValue? {
        let op: String
        switch function {
        case .add: op = "+"
        case .subtract: op = "-"
        case .multiply: op = "*"
        case .divide: op = "/"
        default: op = "%"
        }
        if a.kind == .int && b.kind == .int {
            // SQLite gives NULL for a zero divisor and 0 for Int64.min % -1, as the evaluator.
            if function == .modulo { return SQLValue(sql: "(\(a.sql) % \(b.sql))", kind: .int) }
            // An overflowing integer operation (Int64.min / -1 included) yields a REAL: null.
            let v = "(\(a.sql) \(op) \(b.sql))"
            return SQLValue(sql: "(CASE WHEN typeof(\(v)) = 'integer' THEN \(v) END)", kind: .int)
        }
        // Doubles: `%` would truncate them to integers, so fmod through mod(); a zero divisor
        // gives NULL (SQLite) or NaN, stored as NULL; an infinite result is null.
        if function == .modulo && !sqliteHasMathFunctions { return nil }
        let v = function == .modulo ? "mod(\(a.sql), \(b.sql))" : "(\(a.sql) \(op) \(b.sql))"
        return SQLValue(sql: "(CASE WHEN abs(\(v)) <= 1.7976931348623157e308 THEN \(v) END)", kind: .double)
    }
}
