import OfflineSync
/// How a SQL adapter evaluates a comparison between a typed numeric column and a literal of
/// the other numeric kind exactly as `QueryEvaluator` does: either a comparison with a
/// literal of the column's own kind, or a constant outcome (unknown when the column is null).
public enum NumericComparisonPlan<Literal: Sendable & Hashable>: Sendable, Hashable {
    /// `column <op> literal`, with the literal converted to the column's kind.
    case compare(ComparisonOperator, Literal)
    /// The outcome for every non-null value of the column (null still gives unknown).
    case constant(Bool)
}

extension QueryEvaluator {
    /// `intColumn <op> d` for every integer column value, without rounding large integers:
    /// rewritten as a comparison with an integer, or a constant when `d` lies outside `Int64`
    /// or between two integers and `op` is an equality.
    public static func planIntColumn(_ op: ComparisonOperator, _ d: Double) -> NumericComparisonPlan<Int64> {
        if d >= 9_223_372_036_854_775_808.0 { return constant(op, order: -1) }
        if d < -9_223_372_036_854_775_808.0 { return constant(op, order: 1) }
        let whole = d.rounded(.down)
        let t = Int64(whole)
        if whole == d { return .compare(op, t) }
        // t < d < t + 1: i < d ⟺ i <= t, i > d ⟺ i > t, never equal.
        switch op {
        case .equal: return .constant(false)
        case .notEqual: return .constant(true)
        case .less, .lessOrEqual: return .compare(.lessOrEqual, t)
        case .greater, .greaterOrEqual: return .compare(.greater, t)
        }
    }

    /// `doubleColumn <op> i`: a comparison with the double equal to `i` when there is one,
    /// otherwise with the one of the two doubles bracketing `i` that keeps the outcome.
    public static func planDoubleColumn(_ op: ComparisonOperator, _ i: Int64) -> NumericComparisonPlan<Double> {
        let d = Double(i)
        let c = compareIntDouble(i, d)
        if c == 0 { return .compare(op, d) }
        // lo < i < hi with lo, hi adjacent doubles: x < i ⟺ x <= lo, x > i ⟺ x >= hi.
        let lo = c < 0 ? d.nextDown : d
        let hi = c < 0 ? d : d.nextUp
        switch op {
        case .equal: return .constant(false)
        case .notEqual: return .constant(true)
        case .less, .lessOrEqual: return .compare(.lessOrEqual, lo)
        case .greater, .greaterOrEqual: return .compare(.greaterOrEqual, hi)
        }
    }

    /// The integer equal to `d`, if there is one (for `intColumn IN (…doubles…)`).
    public static func exactInt(_ d: Double) -> Int64? {
        guard d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0, d.rounded(.down) == d else { return nil }
        return Int64(d)
    }

    /// The double equal to `i`, if there is one (for `doubleColumn IN (…integers…)`).
    public static func exactDouble(_ i: Int64) -> Double? {
        let d = Double(i)
        return compareIntDouble(i, d) == 0 ? d : nil
    }

    /// The constant outcome of `value <op> literal` when every value compares as `order`
    /// (-1: less than the literal, 1: greater, never equal).
    private static func constant<L>(_ op: ComparisonOperator, order: Int) -> NumericComparisonPlan<L> {
        switch op {
        case .equal: return .constant(false)
        case .notEqual: return .constant(true)
        case .less, .lessOrEqual: return .constant(order < 0)
        case .greater, .greaterOrEqual: return .constant(order > 0)
        }
    }
}
