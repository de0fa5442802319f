import OfflineSync

// Random computed-value predicates (`QueryExpression`) over the query fixtures: every
// function, nested, on declared fields of each kind (`s`, `n`, `x`, `t`, `updatedAt`), on
// undeclared ones (`tag`, and `u`, whose mixed kinds make functions null), and on the
// fixtures' edges (U+0000 in strings, Int64.min/max, ±infinity, dates outside years 1–9999).
extension QueryFixtures {
    /// Random, kind-correct queries whose predicates compute values.
    static func randomExpressionQueries(seed: UInt64, count: Int) -> [Query] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            var predicate = expressionPredicate(&rng)
            // Mixed with a plain conjunct, NOT or OR now and then, as OData filters are.
            switch rng.below(6) {
            case 0: predicate = .and([predicate, .compare("n", .greater, int(&rng))])
            case 1: predicate = .not(predicate)
            case 2: predicate = .or([predicate, expressionPredicate(&rng)])
            default: break
            }
            let order = rng.chance(50) ? [SortKey(rng.pick(["n", "s", "x", "t"]), ascending: rng.chance(50))] : []
            return Query(predicate, order: order, limit: rng.chance(60) ? nil : 1 + rng.below(20))
        }
    }

    private enum Kind: CaseIterable { case string, int, number, date }

    private static func expressionPredicate(_ rng: inout SplitMix64) -> QueryPredicate {
        let kind = rng.pick(Kind.allCases)
        if rng.chance(10) { return .isNullExpression(expression(kind, depth: 3, &rng)) }
        let lhs = expression(kind, depth: 3, &rng)
        let rhs = rng.chance(70) ? expression(kind, depth: 0, &rng) : expression(kind, depth: 2, &rng)
        return .compareExpressions(lhs, rng.pick(ComparisonOperator.allCases), rhs)
    }

    private static func expression(_ kind: Kind, depth: Int, _ rng: inout SplitMix64) -> QueryExpression {
        if depth == 0 || rng.chance(30) { return leaf(kind, &rng) }
        let d = depth - 1
        switch kind {
        case .string:
            switch rng.below(5) {
            case 0: return .call(rng.pick([.lowercased, .uppercased, .trimmed]), [expression(.string, depth: d, &rng)])
            case 1: return .call(.concat, [expression(.string, depth: d, &rng), expression(.string, depth: d, &rng)])
            case 2: return .call(.substring, [expression(.string, depth: d, &rng), smallInt(&rng)])
            case 3: return .call(.substring, [expression(.string, depth: d, &rng), smallInt(&rng), smallInt(&rng)])
            default: return leaf(.string, &rng)
            }
        case .int:
            switch rng.below(5) {
            case 0: return .call(.length, [expression(.string, depth: d, &rng)])
            case 1: return .call(.indexOf, [expression(.string, depth: d, &rng), expression(.string, depth: 0, &rng)])
            case 2: return .call(rng.pick([.year, .month, .day, .hour, .minute, .second]), [expression(.date, depth: d, &rng)])
            case 3: return .call(rng.pick([.add, .subtract, .multiply, .divide, .modulo]),
                                 [expression(.int, depth: d, &rng), expression(.int, depth: d, &rng)])
            default: return .call(rng.pick([.floor, .ceiling, .round]), [expression(.int, depth: d, &rng)])
            }
        case .number:
            let other: Kind = rng.chance(50) ? .int : .number
            switch rng.below(3) {
            case 0: return .call(rng.pick([.add, .subtract, .multiply, .divide, .modulo]),
                                 [expression(.number, depth: d, &rng), expression(other, depth: d, &rng)])
            case 1: return .call(rng.pick([.floor, .ceiling, .round]), [expression(.number, depth: d, &rng)])
            default: return leaf(.number, &rng)
            }
        case .date:
            return leaf(.date, &rng)
        }
    }

    private static func leaf(_ kind: Kind, _ rng: inout SplitMix64) -> QueryExpression {
        // `u` is undeclared and holds every kind: a function of it is null on the wrong ones.
        if rng.chance(8) { return .field("u") }
        switch kind {
        case .string:
            return rng.chance(60) ? .field(rng.pick(["s", "s", "tag"])) : .literal(string(&rng))
        case .int:
            return rng.chance(60) ? .field("n") : .literal(int(&rng))
        case .number:
            return rng.chance(60) ? .field("x") : .literal(rng.chance(70) ? double(&rng) : int(&rng))
        case .date:
            return rng.chance(70) ? .field(rng.pick(["t", "updatedAt"])) : .literal(date(&rng))
        }
    }

    /// A start or length for `substring`: small, negative or huge.
    private static func smallInt(_ rng: inout SplitMix64) -> QueryExpression {
        rng.chance(20) ? .field("n") : .literal(.int(rng.pick([-1, 0, 1, 2, 3, 5, 100, .max, .min])))
    }
}
