import OfflineSync

// Computed values in predicates: `{"op": "compareExpressions", "left", "cmp", "right"}`,
// `{"op": "isNullExpression", "of"}`, and each expression as `{"field": name}`,
// `{"literal": value}` or `{"call": function, "args": [expression, …]}`.

extension Wire {
    /// The JSON of a ``QueryExpression``.
    public static func json(_ expression: QueryExpression) -> JSON {
        switch expression {
        case .field(let name): return .object([("field", .string(name))])
        case .literal(let value): return .object([("literal", json(value))])
        case let .call(function, arguments):
            return .object([("call", .string(function.rawValue)), ("args", .array(arguments.map(json)))])
        }
    }

    /// The expression a JSON object encodes; nesting is bounded by the JSON parser's depth limit.
    public static func expression(_ json: JSON, path: String) throws -> QueryExpression {
        guard case .object(let members) = json, let first = members.first else { throw invalid(path, "must be an object") }
        switch first.key {
        case "field":
            return .field(try ObjectReader(json, path: path, allowed: ["field"]).string("field"))
        case "literal":
            let reader = try ObjectReader(json, path: path, allowed: ["literal"])
            return .literal(try value(try reader.required("literal"), path: "\(path).literal"))
        case "call":
            let reader = try ObjectReader(json, path: path, allowed: ["call", "args"])
            let name = try reader.string("call")
            guard let function = QueryFunction(rawValue: name) else { throw invalid(path, "unknown function '\(name)'") }
            guard case .array(let items) = try reader.required("args") else { throw invalid(path, "'args' must be an array") }
            return .call(function, try items.enumerated().map { try expression($1, path: "\(path).args[\($0)]") })
        default:
            throw invalid(path, "needs 'field', 'literal' or 'call'")
        }
    }

    static func expressionPredicateJSON(_ predicate: QueryPredicate) -> JSON? {
        switch predicate {
        case let .compareExpressions(left, op, right):
            return .object([("op", .string("compareExpressions")), ("left", json(left)), ("cmp", .string(op.rawValue)),
                            ("right", json(right))])
        case .isNullExpression(let inner):
            return .object([("op", .string("isNullExpression")), ("of", json(inner))])
        default:
            return nil
        }
    }

    static func expressionPredicate(_ op: String, _ json: JSON, path: String) throws -> QueryPredicate? {
        switch op {
        case "compareExpressions":
            let reader = try ObjectReader(json, path: path, allowed: ["op", "left", "cmp", "right"])
            let name = try reader.string("cmp")
            guard let comparison = ComparisonOperator(rawValue: name) else { throw invalid(path, "unknown comparison '\(name)'") }
            return .compareExpressions(try expression(try reader.required("left"), path: "\(path).left"), comparison,
                                       try expression(try reader.required("right"), path: "\(path).right"))
        case "isNullExpression":
            let reader = try ObjectReader(json, path: path, allowed: ["op", "of"])
            return .isNullExpression(try expression(try reader.required("of"), path: "\(path).of"))
        default:
            return nil
        }
    }
}
