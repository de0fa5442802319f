import OfflineSync
import OfflineSyncWire

/// The `$filter` parser: tokens to a syntax tree (precedence `not` > comparison > `and` >
/// `or`), then the tree to a ``QueryPredicate`` with OData's null semantics (see
/// ``ODataQuery/parseFilter(_:)``).
struct ODataFilterParser {
    /// The syntax tree, with positions for error messages.
    indirect enum Node {
        case literal(Value, Int)
        case member(String, Int)
        case call(String, [Node], Int)
        case not(Node, Int)
        case and([Node])
        case or([Node])
        case compare(Node, ComparisonOperator, Node, Int)
        /// `left add|sub|mul|div|mod right`.
        case arithmetic(Node, QueryFunction, Node, Int)
        /// `left in (literal, …)`.
        case isIn(Node, [Node], Int)

        var position: Int {
            switch self {
            case .literal(_, let p), .member(_, let p), .call(_, _, let p), .not(_, let p), .compare(_, _, _, let p),
                 .arithmetic(_, _, _, let p), .isIn(_, _, let p): return p
            case .and(let parts), .or(let parts): return parts.first?.position ?? 0
            }
        }
    }

    static let context = "$filter"
    static let operators: [String: ComparisonOperator] = [
        "eq": .equal, "ne": .notEqual, "lt": .less, "le": .lessOrEqual, "gt": .greater, "ge": .greaterOrEqual,
    ]
    /// Supported functions, mapped to the predicate they make.
    static let functions: Set<String> = ["startswith", "endswith", "contains", "substringof"]
    /// Functions that compute a value, and the ``QueryFunction`` each one is.
    static let valueFunctions: [String: QueryFunction] = [
        "tolower": .lowercased, "toupper": .uppercased, "trim": .trimmed, "length": .length, "indexof": .indexOf,
        "substring": .substring, "concat": .concat, "year": .year, "month": .month, "day": .day, "hour": .hour,
        "minute": .minute, "second": .second, "floor": .floor, "ceiling": .ceiling, "round": .round,
    ]
    /// The arithmetic operators, tightest first.
    static let multiplicative: [String: QueryFunction] = ["mul": .multiply, "div": .divide, "mod": .modulo]
    static let additive: [String: QueryFunction] = ["add": .add, "sub": .subtract]
    /// OData functions that are refused by name.
    static let unsupportedFunctions: Set<String> = [
        "fractionalseconds", "date", "time", "now", "isof", "any", "all",
        "matchesPattern", "totaloffsetminutes", "totalseconds", "maxdatetime", "mindatetime", "geo.distance",
        "geo.intersects", "geo.length", "replace",
    ]

    let tokens: [ODataToken]
    var index = 0
    var depth = 0

    init(_ text: String) throws {
        tokens = try ODataSyntax.tokens(text, context: Self.context)
    }

    func error(_ reason: String, at position: Int) -> SyncError { ODataSyntax.error(Self.context, reason, at: position) }

    var current: ODataToken { tokens[index] }

    mutating func advance() {
        if index < tokens.count - 1 { index += 1 }
    }

    func unexpected(_ token: ODataToken, expecting: String) -> SyncError {
        error("expected \(expecting), found \(token.described)\(token.word.map(ODataSyntax.caseHint) ?? "")", at: token.position)
    }

    mutating func parse() throws -> QueryPredicate {
        if case .end = current.kind { throw error("the filter is empty", at: current.position) }
        let tree = try parseOr()
        guard case .end = current.kind else { throw unexpected(current, expecting: "an operator or the end") }
        return try lower(tree, positive: true)
    }

    // MARK: Syntax

    mutating func enter(_ position: Int) throws {
        depth += 1
        if depth > ODataQuery.maxDepth { throw error("nesting deeper than \(ODataQuery.maxDepth)", at: position) }
    }

    mutating func parseOr() throws -> Node {
        var parts = [try parseAnd()]
        while current.word == "or" {
            advance()
            parts.append(try parseAnd())
        }
        return parts.count == 1 ? parts[0] : .or(parts)
    }

    mutating func parseAnd() throws -> Node {
        var parts = [try parseComparison()]
        while current.word == "and" {
            advance()
            parts.append(try parseComparison())
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    mutating func parseComparison() throws -> Node {
        let left = try parseArithmetic(Self.additive)
        if current.word == "in" { return try parseList(left) }
        guard let word = current.word, let op = Self.operators[word] else { return left }
        let position = current.position
        advance()
        let right = try parseArithmetic(Self.additive)
        return .compare(left, op, right, position)
    }

    /// `a add b sub c` (left-associative), each operand a `mul`/`div`/`mod` chain of unaries.
    mutating func parseArithmetic(_ operators: [String: QueryFunction]) throws -> Node {
        let tighter = operators == Self.additive
        var left = tighter ? try parseArithmetic(Self.multiplicative) : try parseUnary()
        while let word = current.word, let function = operators[word] {
            let position = current.position
            try enter(position)
            defer { depth -= 1 }
            advance()
            let right = tighter ? try parseArithmetic(Self.multiplicative) : try parseUnary()
            left = .arithmetic(left, function, right, position)
        }
        return left
    }

    /// `left in (literal, literal, …)`.
    mutating func parseList(_ left: Node) throws -> Node {
        let position = current.position
        advance()
        guard case .open = current.kind else { throw unexpected(current, expecting: "'(' after 'in'") }
        advance()
        var items: [Node] = []
        while true {
            guard case .literal(let value) = current.kind else { throw unexpected(current, expecting: "a literal in the 'in' list") }
            items.append(.literal(value, current.position))
            advance()
            switch current.kind {
            case .comma: advance()
            case .close:
                advance()
                return .isIn(left, items, position)
            default: throw unexpected(current, expecting: "',' or ')' in the 'in' list")
            }
        }
    }

    mutating func parseUnary() throws -> Node {
        guard current.word == "not" else { return try parsePrimary() }
        let position = current.position
        try enter(position)
        defer { depth -= 1 }
        advance()
        return .not(try parseUnary(), position)
    }

    mutating func parsePrimary() throws -> Node {
        let token = current
        switch token.kind {
        case .open:
            try enter(token.position)
            defer { depth -= 1 }
            advance()
            let inner = try parseOr()
            guard case .close = current.kind else { throw unexpected(current, expecting: "')' to close the '(' at position \(token.position)") }
            advance()
            return inner
        case .literal(let value):
            advance()
            return .literal(value, token.position)
        case .word(let name):
            if ODataSyntax.keywords.contains(name) { throw unexpected(token, expecting: "an operand") }
            advance()
            guard case .open = current.kind else { return .member(name, token.position) }
            try enter(current.position)
            defer { depth -= 1 }
            advance()
            var arguments: [Node] = []
            if case .close = current.kind {
                advance()
                return .call(name, arguments, token.position)
            }
            while true {
                arguments.append(try parseOr())
                switch current.kind {
                case .comma: advance()
                case .close:
                    advance()
                    return name == "cast" ? try cast(arguments, token.position) : .call(name, arguments, token.position)
                default: throw unexpected(current, expecting: "',' or ')' in the arguments of '\(ODataSyntax.clip(name))'")
                }
            }
        case .close, .comma, .end:
            throw unexpected(token, expecting: "an operand")
        }
    }

    /// `cast(literal, Edm.Type)` as the literal it makes. The Datasync clients write their
    /// delta filter's date this way: `(updatedAt gt cast(2024-08-23T20:22:54.291Z,Edm.DateTimeOffset))`
    /// (CommunityToolkit/Datasync, `PullOperationManager_Tests.PrepareQueryDescription_NQ_S`).
    /// A date-time may be bare or quoted; `Edm.DateTime` is the older protocol's name for the
    /// same type. Other target types, and a field as the first argument, are refused.
    func cast(_ arguments: [Node], _ position: Int) throws -> Node {
        guard arguments.count == 2, case .member(let type, _) = arguments[1] else {
            throw error("cast takes a literal and a type: cast(2024-01-01T00:00:00Z,Edm.DateTimeOffset)", at: position)
        }
        guard type == "Edm.DateTimeOffset" || type == "Edm.DateTime" else {
            throw error("cast to '\(ODataSyntax.clip(type))' is not supported (only Edm.DateTimeOffset and Edm.DateTime)", at: position)
        }
        switch arguments[0] {
        case .literal(.date(let stamp), let at):
            return .literal(.date(stamp), at)
        case .literal(.string(let text), let at):
            let scalars = Array(text.unicodeScalars)
            var reader = WireDate.Reader(s: scalars, i: 0)
            guard let stamp = reader.read(requireZone: false), reader.i == scalars.count else {
                throw error("'\(ODataSyntax.clip(text))' is not a date-time to cast to \(type)", at: at)
            }
            return .literal(.date(stamp), at)
        default:
            throw error("cast to \(type) takes a date-time literal", at: arguments[0].position)
        }
    }

    // MARK: Meaning

    /// The predicate that matches exactly the records for which the node is true (`positive`)
    /// or false (not `positive`, the node standing under an odd number of `not`s) in OData.
    func lower(_ node: Node, positive: Bool) throws -> QueryPredicate {
        switch node {
        case .and(let parts):
            let lowered = try parts.map { try lower($0, positive: positive) }
            return positive ? .and(lowered) : .or(lowered)
        case .or(let parts):
            let lowered = try parts.map { try lower($0, positive: positive) }
            return positive ? .or(lowered) : .and(lowered)
        case .not(let inner, _):
            return try lower(inner, positive: !positive)
        case .literal(.bool(let b), _):
            return b == positive ? .all : .or([])
        case .literal(let value, let position):
            let token = ODataToken(kind: .literal(value), position: position)
            throw error("expected a condition, found \(token.described), a literal that is not true or false", at: position)
        case .member(let name, let at):
            // A boolean field alone: true when true, false when false, null (unknown) when null.
            return .compare(try field(name, at), .equal, .bool(positive))
        case .call:
            let (predicate, _) = try function(node)
            return positive ? predicate : .not(predicate)
        case .arithmetic(_, _, _, let position):
            throw error("expected a condition, found arithmetic; compare it with something", at: position)
        case let .isIn(left, items, _):
            let values = items.compactMap { if case .literal(let value, _) = $0 { return value } else { return nil } }
            return try membership(left, values, positive: positive)
        case let .compare(left, op, right, position):
            for case let .call(name, _, at) in [left, right] where Self.valueFunctions[name] == nil && !Self.functions.contains(name) {
                if Self.unsupportedFunctions.contains(name) { throw error("the function '\(name)' is not supported", at: at) }
                throw error("unknown function '\(ODataSyntax.clip(name))'", at: at)
            }
            if Self.isValue(left), Self.isValue(right), !Self.isPlainPair(left, right) {
                return Self.expressionComparison(try expression(left), op, try expression(right), positive: positive)
            }
            switch (left, right) {
            case (.literal, .literal):
                throw error("comparisons need a field and a literal, but '\(Self.name(op))' compares two literals", at: position)
            case (.literal(let value, _), _):
                return try comparison(right, Self.flipped(op), value, position, positive: positive)
            case (_, .literal(let value, _)):
                return try comparison(left, op, value, position, positive: positive)
            default:
                throw error("comparisons need a field and a literal, but '\(Self.name(op))' has no literal", at: position)
            }
        }
    }

    /// `a op b` written as `b op' a`.
    static func flipped(_ op: ComparisonOperator) -> ComparisonOperator {
        switch op {
        case .equal, .notEqual: return op
        case .less: return .greater
        case .lessOrEqual: return .greaterOrEqual
        case .greater: return .less
        case .greaterOrEqual: return .lessOrEqual
        }
    }

    /// `side op literal`, where `side` should be a field or a function call (maybe under `not`s).
    func comparison(_ side: Node, _ op: ComparisonOperator, _ literal: Value, _ position: Int, positive: Bool) throws -> QueryPredicate {
        var side = side, negations = 0
        while case .not(let inner, _) = side {
            negations += 1
            side = inner
        }
        switch side {
        case .member(let name, let at) where negations == 0:
            return Self.fieldComparison(try field(name, at), op, literal, positive: positive)
        case .member, .call:
            // An unsupported function is named before anything else is said about the comparison.
            var call: (QueryPredicate, QueryPredicate)?
            if case .call = side { call = try function(side) }
            guard op == .equal || op == .notEqual, case .bool(let b) = literal else {
                if negations > 0 {
                    throw error("'not' binds tighter than '\(Self.name(op))'; write not (… \(Self.name(op)) …)", at: position)
                }
                throw error("a function result can only be compared with true or false using eq or ne, not '\(Self.name(op))'", at: position)
            }
            // `not x eq b` is `(not x) eq b`, which is `x eq (not b)`: both are false when x is null.
            let want = negations % 2 == 0 ? b : !b
            guard let (predicate, nullTest) = call else {
                guard case .member(let name, let at) = side else { throw error("expected a field", at: position) }
                return Self.fieldComparison(try field(name, at), op, .bool(want), positive: positive)
            }
            let holds = want ? predicate : .not(predicate)
            let failsOrNull: QueryPredicate = .or([nullTest, want ? .not(predicate) : predicate])
            return (op == .equal) == positive ? holds : failsOrNull
        default:
            throw error("comparisons need a field and a literal, but '\(Self.name(op))' has no field", at: position)
        }
    }

    /// `name` as a field: a type's qualified name (`Edm.String`) is not one.
    func field(_ name: String, _ position: Int) throws -> String {
        guard !name.contains(".") else {
            throw error("'\(ODataSyntax.clip(name))' is a type name, not a field; types appear only in cast(…, \(ODataSyntax.clip(name)))",
                        at: position)
        }
        return name
    }

    static func name(_ op: ComparisonOperator) -> String {
        operators.first { $0.value == op }?.key ?? "eq"
    }

    /// `field op literal` with OData's two-valued comparisons: false (or, for `ne`, true) when
    /// the field is null.
    static func fieldComparison(_ field: String, _ op: ComparisonOperator, _ literal: Value, positive: Bool) -> QueryPredicate {
        if literal.isNull {
            switch op {
            case .equal: return positive ? .isNull(field) : .not(.isNull(field))
            case .notEqual: return positive ? .not(.isNull(field)) : .isNull(field)
            default: return positive ? .or([]) : .all
            }
        }
        switch (op, positive) {
        case (.notEqual, true), (.equal, false): return .or([.isNull(field), .compare(field, .notEqual, literal)])
        case (.notEqual, false): return .compare(field, .equal, literal)
        case (_, true): return .compare(field, op, literal)
        case (_, false): return .or([.isNull(field), .not(.compare(field, op, literal))])
        }
    }

    /// A supported function call: its predicate, and the test for its subject being null.
    func function(_ node: Node) throws -> (QueryPredicate, QueryPredicate) {
        guard case let .call(name, arguments, position) = node else {
            throw error("expected a function call", at: node.position)
        }
        guard Self.functions.contains(name) else {
            if Self.unsupportedFunctions.contains(name) || Self.unsupportedFunctions.contains(name.lowercased()) {
                throw error("the function '\(name)' is not supported", at: position)
            }
            throw error("unknown function '\(ODataSyntax.clip(name))'", at: position)
        }
        for case let .call(inner, _, innerPosition) in arguments where Self.functions.contains(inner) {
            throw error("'\(ODataSyntax.clip(inner))' is a condition, not a string", at: innerPosition)
        }
        let needleFirst = name == "substringof"
        let usage = needleFirst ? "substringof('text', field)" : "\(name)(field, 'text')"
        guard arguments.count == 2, case .literal(.string(let text), _) = arguments[needleFirst ? 0 : 1] else {
            throw error("\(name) takes a string and a string literal: \(usage)", at: position)
        }
        let subject = arguments[needleFirst ? 1 : 0]
        if case .member(let field, let at) = subject {
            _ = try self.field(field, at)
            switch name {
            case "startswith": return (.hasPrefix(field, text), .isNull(field))
            case "endswith": return (.hasSuffix(field, text), .isNull(field))
            default: return (.contains(field, text), .isNull(field))
            }
        }
        // A computed subject (`startswith(tolower(title),'a')`): the same test in functions.
        let value = try expression(subject)
        let length = QueryExpression.literal(.int(Int64(text.unicodeScalars.count)))
        let predicate: QueryPredicate
        switch name {
        case "startswith":
            predicate = .compareExpressions(.call(.substring, [value, .literal(.int(0)), length]), .equal, .literal(.string(text)))
        case "endswith":
            let start = QueryExpression.call(.subtract, [.call(.length, [value]), length])
            predicate = .compareExpressions(.call(.substring, [value, start]), .equal, .literal(.string(text)))
        default:
            predicate = .compareExpressions(.call(.indexOf, [value, .literal(.string(text))]), .greaterOrEqual, .literal(.int(0)))
        }
        return (predicate, .isNullExpression(value))
    }
}
