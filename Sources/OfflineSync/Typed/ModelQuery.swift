/// A condition on the rows of one model's table, built from its ``Column``s: the compiler
/// refuses a condition on another model's columns where this one's are expected.
public struct ModelPredicate<Model: SyncModel>: Sendable, Hashable {
    /// The untyped predicate underneath.
    public let predicate: QueryPredicate

    /// A condition from an untyped predicate (a field with no column declared, say): the
    /// store checks its fields against the table's schema when it runs.
    public init(_ predicate: QueryPredicate) { self.predicate = predicate }

    /// Every row.
    public static var all: ModelPredicate { ModelPredicate(.all) }

    /// Both conditions.
    public static func && (lhs: ModelPredicate, rhs: ModelPredicate) -> ModelPredicate { ModelPredicate(lhs.predicate && rhs.predicate) }
    /// Either condition.
    public static func || (lhs: ModelPredicate, rhs: ModelPredicate) -> ModelPredicate { ModelPredicate(lhs.predicate || rhs.predicate) }
    /// Not the condition.
    public static prefix func ! (operand: ModelPredicate) -> ModelPredicate { ModelPredicate(!operand.predicate) }
}

/// An ordering on one of a model's columns (``Column/ascending``, ``Column/descending``).
public struct ModelOrdering<Model: SyncModel>: Sendable, Hashable {
    /// The untyped sort key underneath.
    public let key: SortKey

    /// An ordering from an untyped sort key.
    public init(_ key: SortKey) { self.key = key }
}

/// A request for one model's rows: a condition, an order, a limit — GRDB's
/// `QueryInterfaceRequest<Record>`. Built from the model (`Todo.filter(…)`, `Todo.order(…)`)
/// and refined by chaining; ``TypedSyncTable``, typed transactions, ``SyncReader`` and
/// observations take it, and accept only their own model's.
///
/// ```swift
/// let firstOpen = Todo.filter(Todo.Columns.done == false).order(Todo.Columns.due.ascending).limit(20)
/// let rows = try await context.table(Todo.self).query(firstOpen)
/// ```
///
/// Results are ordered by the keys given and then by id, as every ``Query`` is.
public struct ModelQuery<Model: SyncModel>: Sendable, Hashable {
    /// The untyped query underneath.
    public private(set) var query: Query

    /// Every row of the model's table, in id order.
    public init() { query = .all }

    /// The rows matching `predicate`, in the order given (then by id), cut by offset and limit.
    public init(_ predicate: ModelPredicate<Model>, order: [ModelOrdering<Model>] = [], limit: Int? = nil, offset: Int = 0) {
        query = Query(predicate.predicate, order: order.map(\.key), limit: limit, offset: offset)
    }

    /// Also requires `predicate` (the conditions are joined with `&&`).
    public func filter(_ predicate: ModelPredicate<Model>) -> ModelQuery {
        var request = self
        request.query.predicate = query.predicate == .all ? predicate.predicate : query.predicate && predicate.predicate
        return request
    }

    /// Orders by these keys, most significant first, replacing any order given before.
    public func order(_ keys: ModelOrdering<Model>...) -> ModelQuery {
        var request = self
        request.query.order = keys.map(\.key)
        return request
    }

    /// At most `limit` rows, after skipping `offset`.
    public func limit(_ limit: Int, offset: Int = 0) -> ModelQuery {
        var request = self
        request.query.limit = limit
        request.query.offset = offset
        return request
    }
}

extension SyncModel {
    /// A request for the rows of this model's table matching `predicate`.
    public static func filter(_ predicate: ModelPredicate<Self>) -> ModelQuery<Self> { ModelQuery(predicate) }

    /// A request for every row of this model's table, in this order.
    public static func order(_ keys: ModelOrdering<Self>...) -> ModelQuery<Self> {
        ModelQuery(.all, order: keys)
    }
}
