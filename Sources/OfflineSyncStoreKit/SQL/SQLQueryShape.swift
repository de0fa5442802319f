import OfflineSync

/// A query whose SQL does not depend on its literal values, keyed by everything its SQL does
/// depend on, so a SQL adapter translates each such shape once per connection and later
/// queries of the same shape only bind their values. The queue's lookups are this kind — "the
/// newest operation on this item" runs on every local write — and translating one (building
/// the SQL text, then hashing it to find the prepared statement) was 7% of
/// local-writes-sqlite in `perf`.
///
/// The shapes are conjunctions of comparisons of a string or integer column with a literal
/// of the same kind (``SQLPredicateTranslator`` writes `(column op placeholder)` for those,
/// whatever the value: the integer/double and null cases, which plan by value, are
/// excluded), ordered by scalar columns, with or without a limit and an offset. Anything else
/// is translated per query.
///
/// A shape names its table mapping by identity: an adapter keeps one mapping object per
/// table layout (a changed schema is a new object), and ``SQLQueryShapes`` holds the object
/// so its identity is not reused while the shape is remembered.
public struct SQLQueryShape: Hashable, Sendable {
    @usableFromInline let table: ObjectIdentifier
    /// Field names byte for byte (canonically equal names may be different columns) and the
    /// operator of each comparison, in the predicate's order.
    @usableFromInline let terms: [Term]
    @usableFromInline let order: [Order]
    /// Whether the query has a limit, and a nonzero offset (an adapter may write those
    /// clauses only when present).
    @usableFromInline let limited: Bool
    @usableFromInline let offset: Bool

    @usableFromInline
    struct Term: Hashable, Sendable {
        @usableFromInline let field: ExactString
        @usableFromInline let op: ComparisonOperator
        @usableFromInline init(field: ExactString, op: ComparisonOperator) { self.field = field; self.op = op }
    }

    @usableFromInline
    struct Order: Hashable, Sendable {
        @usableFromInline let field: ExactString
        @usableFromInline let ascending: Bool
        @usableFromInline init(field: ExactString, ascending: Bool) { self.field = field; self.ascending = ascending }
    }

    @usableFromInline
    init(table: ObjectIdentifier, terms: [Term], order: [Order], limited: Bool, offset: Bool) {
        self.table = table
        self.terms = terms
        self.order = order
        self.limited = limited
        self.offset = offset
    }

    /// The shape of `query` over the mapping `table`, whose columns `column` names, and the
    /// literals its comparisons bind (strings and integers) as `parameter` binds them, in
    /// placeholder order; `nil` when the query is not of a cacheable shape.
    ///
    /// Inlinable so an adapter gets it specialised for its own parameter type: called
    /// generically across the module boundary, it spent more time on generic metadata and
    /// boxed array appends than on the shape (`perf`, local-writes-sqlite).
    @inlinable
    public static func of<Parameter>(_ query: Query, table: AnyObject, column: (String) -> SQLColumn?,
                                     parameter: (Value) -> Parameter?) -> (shape: SQLQueryShape, parameters: [Parameter])? {
        // Room for the usual few comparisons at once (appending one by one reallocated twice).
        var terms: [Term] = []
        terms.reserveCapacity(4)
        var parameters: [Parameter] = []
        parameters.reserveCapacity(4)
        // The conjuncts in order, nested `and`s walked in place (collecting them into an
        // array first, as ``QueryPredicate/conjuncts`` does, allocated per nesting level).
        func add(_ predicate: QueryPredicate) -> Bool {
            switch predicate {
            case .all:
                return true
            case .and(let parts):
                return parts.allSatisfy(add)
            case let .compare(field, op, literal):
                guard let type = column(field)?.type else { return false }
                switch (type, literal) {
                case (.string, .string), (.int, .int):
                    guard let bound = parameter(literal) else { return false }
                    parameters.append(bound)
                default:
                    return false
                }
                terms.append(Term(field: ExactString(field), op: op))
                return true
            default:
                return false
            }
        }
        guard add(query.predicate) else { return nil }
        var order: [Order] = []
        order.reserveCapacity(query.order.count)
        for key in query.order {
            guard let type = column(key.field)?.type, type.isScalar else { return nil }
            order.append(Order(field: ExactString(key.field), ascending: key.ascending))
        }
        let shape = SQLQueryShape(table: ObjectIdentifier(table), terms: terms, order: order,
                                  limited: query.limit != nil, offset: query.offset > 0)
        return (shape, parameters)
    }

    /// Whether `query` has the structure of `sample` — a query that was validated and found
    /// to be of a cacheable shape over the same table mapping — and differs from it at most in
    /// its literals and in its limit's and offset's values. When it does, the literals, as
    /// `parameter` binds them, are appended to `parameters` in placeholder order, and `query`
    /// has the sample's shape and validates as the sample did: validation depends only on the
    /// field names, the literals' kinds (a string or an integer is always a valid literal) and
    /// the limit and offset being non-negative, all of which are compared here.
    ///
    /// This walk compares names byte for byte and allocates nothing but the parameters; it
    /// stands in for validating the query and computing its shape (walking it, looking up each
    /// column, building the terms), which were most of the cost of the queue's look-up on
    /// every local write beyond SQLite's own step (`perf`, local-writes-sqlite).
    @inlinable
    public static func sameStructure<Parameter>(_ query: Query, as sample: Query, parameter: (Value) -> Parameter?,
                                                parameters: inout [Parameter]) -> Bool {
        guard (query.limit != nil) == (sample.limit != nil), (query.limit ?? 0) >= 0,
              (query.offset > 0) == (sample.offset > 0), query.offset >= 0,
              query.order.count == sample.order.count else { return false }
        for (key, known) in zip(query.order, sample.order) {
            guard key.ascending == known.ascending, ExactString(key.field) == ExactString(known.field) else { return false }
        }
        func same(_ predicate: QueryPredicate, _ known: QueryPredicate) -> Bool {
            switch (predicate, known) {
            case (.all, .all):
                return true
            case let (.and(parts), .and(knownParts)):
                guard parts.count == knownParts.count else { return false }
                for (part, knownPart) in zip(parts, knownParts) where !same(part, knownPart) { return false }
                return true
            case let (.compare(field, op, literal), .compare(knownField, knownOp, knownLiteral)):
                switch (literal, knownLiteral) {
                case (.string, .string), (.int, .int): break
                default: return false
                }
                guard op == knownOp, ExactString(field) == ExactString(knownField),
                      let bound = parameter(literal) else { return false }
                parameters.append(bound)
                return true
            default:
                return false
            }
        }
        return same(query.predicate, sample.predicate)
    }

    /// Whether a translation bound exactly the shape's `parameters`, in order and nothing
    /// else: only then is its SQL the shape's. `same` compares two parameters byte for byte
    /// (strings by their UTF-8 bytes, not by canonical equivalence).
    @inlinable
    public static func bound<Parameter>(_ parameters: [Parameter], as translated: [Parameter],
                                        same: (Parameter, Parameter) -> Bool) -> Bool {
        parameters.count == translated.count && zip(parameters, translated).allSatisfy(same)
    }
}

/// The SQL each query shape was translated to on one connection, with the table mapping it
/// was written for. Not thread-safe: it lives with its connection, on the connection's queue.
public struct SQLQueryShapes<Table: AnyObject, SQL> {
    /// A recent shape, with the last query of that shape seen (``sql(reusing:table:parameter:)``
    /// compares a new query with it), when the caller gave one.
    @usableFromInline typealias Entry = (shape: SQLQueryShape, table: Table, sql: SQL, sample: Query?)
    @usableFromInline var known: [SQLQueryShape: (table: Table, sql: SQL)] = [:]
    /// The shapes found or kept last, compared before `known` is searched: a local write
    /// looks up the same two or three shapes every time (the item's newest operation, the
    /// next sequence number), and comparing a shape's few names costs less than hashing
    /// them all (finding a shape in `known` was 2.7% of a local insert in `perf`).
    ///
    /// A box, so ``sql(for:table:)`` notes what it found without becoming `mutating` (an
    /// adapter may hold the memo in a `let`). Copies of the memo share it, which is harmless:
    /// an entry maps a shape over one table object to the SQL that shape translates to,
    /// whichever copy noted it.
    @usableFromInline let recent = Recent()
    @usableFromInline static var recentCount: Int { 4 }

    @usableFromInline
    final class Recent {
        @usableFromInline var entries: [Entry] = []
        @usableFromInline var next = 0
        @usableFromInline init() {}
    }
    /// The most shapes kept; past it they are all forgotten at once.
    public let limit: Int

    /// An empty memo of at most `limit` shapes.
    public init(limit: Int) { self.limit = limit }

    /// The SQL of `shape`, when a query of that shape over `table` was translated before.
    ///
    /// Inlinable, as ``remember(_:for:table:)`` is, so an adapter gets them specialised for its
    /// own table and SQL types: called generically, a look-up spent a third of its time
    /// fetching tuple metadata (`perf`, local-writes-sqlite).
    @inlinable
    public func sql(for shape: SQLQueryShape, table: Table) -> SQL? {
        sql(for: shape, table: table, query: nil)
    }

    /// ``sql(for:table:)``, noting `query` (validated, of that shape) as the sample a later
    /// ``sql(reusing:table:parameter:)`` compares with.
    @inlinable
    public func sql(for shape: SQLQueryShape, table: Table, query: Query?) -> SQL? {
        for index in recent.entries.indices where recent.entries[index].shape == shape {
            guard recent.entries[index].table === table else { return nil }
            if let query { recent.entries[index].sample = query }
            return recent.entries[index].sql
        }
        guard let entry = known[shape], entry.table === table else { return nil }
        noteRecent((shape, entry.table, entry.sql, query))
        return entry.sql
    }

    /// The SQL of a query with the structure of a recent one over `table` (see
    /// ``SQLQueryShape/sameStructure(_:as:parameter:parameters:)``) and its literals as
    /// `parameter` binds them, in placeholder order; `nil` when no recent query matches.
    /// A hit means `query` validates and has that query's shape, so the caller skips both:
    /// the usual local write asks the same two or three shapes over and over.
    @inlinable
    public func sql<Parameter>(reusing query: Query, table: Table,
                               parameter: (Value) -> Parameter?) -> (sql: SQL, parameters: [Parameter])? {
        var parameters: [Parameter] = []
        parameters.reserveCapacity(4)
        // By index: iterating copied each entry (its shape, table, SQL and sample) per look.
        let entries = recent.entries
        for index in entries.indices where entries[index].table === table {
            guard let sample = entries[index].sample else { continue }
            parameters.removeAll(keepingCapacity: true)
            if SQLQueryShape.sameStructure(query, as: sample, parameter: parameter, parameters: &parameters) {
                return (entries[index].sql, parameters)
            }
        }
        return nil
    }

    /// Keeps the SQL a query of `shape` over `table` translated to.
    @inlinable
    public mutating func remember(_ sql: SQL, for shape: SQLQueryShape, table: Table) {
        remember(sql, for: shape, table: table, query: nil)
    }

    /// ``remember(_:for:table:)``, noting `query` (validated, of that shape) as the sample a
    /// later ``sql(reusing:table:parameter:)`` compares with.
    @inlinable
    public mutating func remember(_ sql: SQL, for shape: SQLQueryShape, table: Table, query: Query?) {
        if known.count >= limit { known = [:] }
        known[shape] = (table, sql)
        // A shape is in `recent` at most once, and always as `known` has it.
        recent.entries.removeAll { $0.shape == shape }
        noteRecent((shape, table, sql, query))
    }

    /// Puts `entry` in `recent`, in place of the oldest once it is full.
    @inlinable
    func noteRecent(_ entry: Entry) {
        if recent.entries.count < Self.recentCount {
            recent.entries.append(entry)
        } else {
            recent.next %= Self.recentCount
            recent.entries[recent.next] = entry
            recent.next += 1
        }
    }

    /// Forgets every shape (a closed connection's statements are gone).
    public mutating func removeAll() {
        known = [:]
        recent.entries = []
        recent.next = 0
    }
}
