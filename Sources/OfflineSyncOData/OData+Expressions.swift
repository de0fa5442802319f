import OfflineSync

// Computed values in `$filter`: the functions the Datasync clients' LINQ translation writes
// (`tolower(title) eq 'milk'`, `year(updatedAt) eq 2024`, `(n add 1) gt 5`,
// `title in ('a','b')`), lowered to `QueryPredicate.compareExpressions` with OData's
// two-valued comparisons.

extension ODataFilterParser {
    /// Whether the node is a value: a field, a literal, arithmetic or a value function.
    static func isValue(_ node: Node) -> Bool {
        switch node {
        case .member, .literal, .arithmetic: return true
        case .call(let name, _, _): return valueFunctions[name] != nil
        default: return false
        }
    }

    /// A field with a literal, or two literals: the comparisons the plain path handles.
    static func isPlainPair(_ left: Node, _ right: Node) -> Bool {
        switch (left, right) {
        case (.member, .literal), (.literal, .member), (.literal, .literal): return true
        default: return false
        }
    }

    /// The node as a ``QueryExpression``.
    func expression(_ node: Node) throws -> QueryExpression {
        switch node {
        case let .member(name, at):
            return .field(try field(name, at))
        case .literal(let value, _):
            return .literal(value)
        case let .arithmetic(left, function, right, _):
            return .call(function, [try expression(left), try expression(right)])
        case let .call(name, arguments, position):
            guard let function = Self.valueFunctions[name] else {
                if Self.functions.contains(name) { throw error("'\(name)' is a condition, not a value", at: position) }
                if Self.unsupportedFunctions.contains(name) { throw error("the function '\(name)' is not supported", at: position) }
                throw error("unknown function '\(ODataSyntax.clip(name))'", at: position)
            }
            guard function.arity.contains(arguments.count) else {
                let arity = function.arity
                let count = arity.lowerBound == arity.upperBound ? "\(arity.lowerBound)" : "\(arity.lowerBound) or \(arity.upperBound)"
                throw error("\(name) takes \(count) argument\(arity.upperBound == 1 ? "" : "s"), not \(arguments.count)", at: position)
            }
            return .call(function, try arguments.map(expression))
        default:
            throw error("expected a value, found a condition", at: node.position)
        }
    }

    /// `left op right` of values, true exactly where OData's two-valued comparison is true
    /// (`positive`) or false. OData compares null with `eq` and `ne` as a value (null eq null
    /// is true, null ne 'a' is true) and makes every ordered comparison with a null false.
    static func expressionComparison(_ left: QueryExpression, _ op: ComparisonOperator, _ right: QueryExpression,
                                     positive: Bool) -> QueryPredicate {
        // The common case, a computed value against a literal, in its plain form: unknown
        // (no match) when the value is null is what OData's false means where no `not` stands.
        if positive, case .literal(let value) = right, !value.isNull, case .call = left {
            return op == .notEqual ? .or([.isNullExpression(left), .compareExpressions(left, op, right)])
                : .compareExpressions(left, op, right)
        }
        let truth = expressionTruth(left, op, right)
        return positive ? truth : .not(truth)
    }

    /// True where OData's comparison holds, false elsewhere — never unknown.
    static func expressionTruth(_ left: QueryExpression, _ op: ComparisonOperator,
                                        _ right: QueryExpression) -> QueryPredicate {
        let leftNull = nullness(left), rightNull = nullness(right)
        let bothSet = QueryPredicate.and([leftNull.notNull, rightNull.notNull, .compareExpressions(left, op == .notEqual ? .equal : op, right)])
        switch op {
        case .equal, .notEqual:
            let equal = QueryPredicate.or([.and([leftNull.isNull, rightNull.isNull]), bothSet])
            return op == .equal ? equal : .not(equal)
        default:
            return bothSet
        }
    }

    /// Whether an expression may be null, as two never-unknown predicates.
    private static func nullness(_ expression: QueryExpression) -> (isNull: QueryPredicate, notNull: QueryPredicate) {
        switch expression {
        case .literal(let value): return value.isNull ? (.all, .or([])) : (.or([]), .all)
        case .field(let name): return (.isNull(name), .not(.isNull(name)))
        case .call: return (.isNullExpression(expression), .not(.isNullExpression(expression)))
        }
    }

    /// `left in (values)`: OData's `list.Contains(left)`, where a null in the list matches a null.
    func membership(_ left: Node, _ values: [Value], positive: Bool) throws -> QueryPredicate {
        if case .member(let name, let at) = left {
            let field = try self.field(name, at)
            let present = values.filter { !$0.isNull }
            var truth: QueryPredicate = .and([.not(.isNull(field)), .isIn(field, present)])
            if present.count != values.count { truth = .or([.isNull(field), truth]) }
            return positive ? truth : .not(truth)
        }
        guard Self.isValue(left) else { throw error("'in' needs a value on its left", at: left.position) }
        let value = try expression(left)
        let truth = QueryPredicate.or(values.map { Self.expressionTruth(value, .equal, .literal($0)) })
        return positive ? truth : .not(truth)
    }
}
