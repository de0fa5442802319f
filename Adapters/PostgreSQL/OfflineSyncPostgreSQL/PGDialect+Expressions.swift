import OfflineSync
import OfflineSyncStoreKit

// Computed values (`QueryExpression`) in PostgreSQL, with the evaluator's results. Strings
// live in `bytea` columns and become `text` for the string functions, which needs a UTF-8
// database (`textFunctions`) and a string without U+0000 (text cannot hold it: such rows
// are left to the evaluator). Case mapping is `translate` over A–Z (PostgreSQL's `lower` is
// locale-aware); integer arithmetic runs in `numeric` with a range check (bigint overflow
// raises an error, the evaluator gives null); `round` takes halves away from zero
// (`round(float8)` rounds them to even). Double arithmetic is left to the evaluator:
// PostgreSQL raises errors on float overflow and underflow where the evaluator gives null
// or zero.
extension PGDialect {
    func value(of column: SQLColumn, bind: (PGParameter) -> String) -> SQLValue? {
        guard let kind = SQLValue.Kind(column.type) else { return nil }
        guard kind == .string else { return SQLValue(sql: column.sql, kind: kind) }
        guard textFunctions else { return nil }
        let nul = "(position(\(bind(.bytes([0]))) in \(column.sql)) > 0)"
        return SQLValue(sql: "(CASE WHEN \(nul) THEN NULL ELSE convert_from(\(column.sql), 'UTF8') END)",
                        kind: .string, doubtful: [nul])
    }

    func value(of literal: Value, bind: (PGParameter) -> String) -> SQLValue? {
        switch literal {
        case .string(let s):
            guard textFunctions, !s.utf8.contains(0) else { return nil }
            return SQLValue(sql: "convert_from(\(bind(.bytes(Array(s.utf8)))), 'UTF8')", kind: .string)
        case .int(let i): return SQLValue(sql: bind(.int64(i)), kind: .int)
        case .double(let d): return SQLValue(sql: bind(.double(d)), kind: .double)
        case .date(let t): return SQLValue(sql: bind(.int64(t.millisecondsSince1970)), kind: .date)
        default: return nil
        }
    }

    func call(_ function: QueryFunction, _ arguments: [SQLValue], bind: (PGParameter) -> String) -> SQLValue? {
        guard SQLFunctions.accepts(function, arguments) else { return nil }
        let x = arguments[0].sql
        switch function {
        case .lowercased:
            return SQLValue(sql: "translate(\(x), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')", kind: .string)
        case .uppercased:
            return SQLValue(sql: "translate(\(x), 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')", kind: .string)
        case .trimmed: return SQLValue(sql: "btrim(\(x), ' ')", kind: .string)
        case .length: return SQLValue(sql: "length(\(x))::bigint", kind: .int)
        case .indexOf: return SQLValue(sql: "(strpos(\(x), \(arguments[1].sql)) - 1)::bigint", kind: .int)
        case .substring:
            // substr() takes int4 and refuses a negative length: clamp as the evaluator does.
            var sql = "substr(\(x), \(clamp(arguments[1].sql, 2_147_483_646)) + 1"
            if arguments.count > 2 { sql += ", \(clamp(arguments[2].sql, 2_147_483_647))" }
            return SQLValue(sql: sql + ")", kind: .string)
        case .concat: return SQLValue(sql: "(\(x) || \(arguments[1].sql))", kind: .string)
        case .year, .month, .day, .hour, .minute, .second:
            let field = function == .year ? "year" : function == .month ? "month" : function == .day ? "day"
                : function == .hour ? "hour" : function == .minute ? "minute" : "second"
            let sql = "(CASE WHEN \(x) >= \(SQLFunctions.firstCalendarMillisecond) AND \(x) < \(SQLFunctions.pastCalendarMillisecond)"
                + " THEN extract(\(field) FROM to_timestamp(\(SQLFunctions.floorSeconds(x))) AT TIME ZONE 'UTC')::bigint END)"
            return SQLValue(sql: sql, kind: .int)
        case .add, .subtract, .multiply, .divide, .modulo:
            return arithmetic(function, arguments[0], arguments[1])
        case .floor, .ceiling, .round:
            if arguments[0].kind == .int { return arguments[0] }
            let sql = function == .floor ? "floor(\(x))" : function == .ceiling ? "ceil(\(x))"
                : SQLFunctions.roundHalfAwayFromZero(x)
            return SQLValue(sql: sql, kind: .double)
        }
    }

    func compare(_ lhs: SQLValue, _ op: ComparisonOperator, _ rhs: SQLValue) -> String? {
        // bigint against float8 would compare as float8, rounding large integers.
        guard lhs.kind == rhs.kind else { return nil }
        let o = SQLFunctions.sqlOperator(op)
        // The "C" collation compares UTF-8 bytes, as the evaluator.
        if lhs.kind == .string { return "(\(lhs.sql) COLLATE \"C\" \(o) \(rhs.sql) COLLATE \"C\")" }
        return "(\(lhs.sql) \(o) \(rhs.sql))"
    }

    /// A bigint clamped to 0…`high` as an int4 (NULL stays NULL, which GREATEST would drop).
    private func clamp(_ value: String, _ high: Int) -> String {
        "(CASE WHEN \(value) < 0 THEN 0 WHEN \(value) > \(high) THEN \(high) ELSE \(value) END)::int"
    }

    private func arithmetic(_ function: QueryFunction, _ a: SQLValue, _ b: SQLValue) -> SQLValue? {
        guard a.kind == .int && b.kind == .int else { return nil }
        // NULLIF turns a zero divisor into NULL, as the evaluator, instead of an error.
        if function == .modulo { return SQLValue(sql: "mod(\(a.sql), NULLIF(\(b.sql), 0))", kind: .int) }
        let v: String
        switch function {
        case .add: v = "(\(a.sql)::numeric + \(b.sql)::numeric)"
        case .subtract: v = "(\(a.sql)::numeric - \(b.sql)::numeric)"
        case .multiply: v = "(\(a.sql)::numeric * \(b.sql)::numeric)"
        default: v = "div(\(a.sql)::numeric, NULLIF(\(b.sql), 0)::numeric)"
        }
        return SQLValue(sql: "(CASE WHEN \(v) BETWEEN \(Int64.min) AND \(Int64.max) THEN (\(v))::bigint END)", kind: .int)
    }
}
