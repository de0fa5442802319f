import Foundation

/// A Swift type a typed ``Column`` compares with: it converts to the ``Value`` that
/// ``RecordEncoder`` stores for it, so a query literal always matches what a model wrote.
///
/// The standard scalars conform; so does `Optional` of any of them (`nil` is null). An enum
/// with a raw value conforms by declaring it — `extension Status: QueryValue {}` — and
/// compares as its raw value, as it encodes.
public protocol QueryValue: Sendable {
    /// The value as a record stores it.
    var queryValue: Value { get }
}

extension QueryValue where Self: RawRepresentable, RawValue: QueryValue {
    /// The raw value, as a raw-value enum encodes.
    public var queryValue: Value { rawValue.queryValue }
}

extension Value: QueryValue { public var queryValue: Value { self } }
extension Bool: QueryValue { public var queryValue: Value { .bool(self) } }
extension String: QueryValue { public var queryValue: Value { .string(self) } }
extension Int: QueryValue { public var queryValue: Value { .int(Int64(self)) } }
extension Int8: QueryValue { public var queryValue: Value { .int(Int64(self)) } }
extension Int16: QueryValue { public var queryValue: Value { .int(Int64(self)) } }
extension Int32: QueryValue { public var queryValue: Value { .int(Int64(self)) } }
extension Int64: QueryValue { public var queryValue: Value { .int(self) } }
extension UInt8: QueryValue { public var queryValue: Value { .int(Int64(self)) } }
extension UInt16: QueryValue { public var queryValue: Value { .int(Int64(self)) } }
extension UInt32: QueryValue { public var queryValue: Value { .int(Int64(self)) } }
// A NaN literal is refused by `Query.validate` (``SyncError/Code/invalidQuery``), as the encoder refuses it.
extension Double: QueryValue { public var queryValue: Value { .double(self) } }
extension Float: QueryValue { public var queryValue: Value { .double(Double(self)) } }
extension Date: QueryValue { public var queryValue: Value { .date(Timestamp(self)) } }
extension Timestamp: QueryValue { public var queryValue: Value { .date(self) } }
extension Data: QueryValue { public var queryValue: Value { .bytes([UInt8](self)) } }
extension UUID: QueryValue { public var queryValue: Value { .string(uuidString) } }
extension URL: QueryValue { public var queryValue: Value { .string(absoluteString) } }
extension Optional: QueryValue where Wrapped: QueryValue {
    public var queryValue: Value { self?.queryValue ?? .null }
}

/// A field of a model's table, by name: what a ``ColumnReference`` names in an index.
public protocol ColumnReference: Sendable {
    /// The field name (the model's coding key).
    var name: String { get }
}

/// A typed field of a ``SyncModel``, for requests the compiler checks: the key path ties the
/// column to its model and to the property's type, the coding key gives the field's name.
///
/// ```swift
/// extension Todo {
///     enum Columns {
///         static let title = Column(\Todo.title, CodingKeys.title)
///         static let done = Column(\Todo.done, CodingKeys.done)
///         static let due = Column(\Todo.due, CodingKeys.due)
///     }
/// }
/// let open = Todo.filter(Todo.Columns.done == false && Todo.Columns.due != nil)
///     .order(Todo.Columns.due.ascending)
/// ```
///
/// Its operators build a ``ModelPredicate`` of the same model, so a `TodoList` column in a
/// `Todo` request does not compile, and comparing with a value of another type does not
/// either. Literals are converted as the model encodes them. Comparing with `nil` tests for
/// null (`== nil` is ``QueryPredicate/isNull(_:)``), where SQL's `= NULL` would match nothing.
public struct Column<Model: SyncModel, Wrapped: QueryValue>: ColumnReference, Hashable {
    /// The field name.
    public let name: String

    /// The column of the property at `keyPath`, stored under `key` (its `stringValue`).
    public init(_ keyPath: KeyPath<Model, Wrapped>, _ key: some CodingKey) { name = key.stringValue }

    /// The column of the property at `keyPath`, stored under the field `name` (a model whose
    /// coding keys are not reachable, or a snake_case field the coding keys rename).
    public init(_ keyPath: KeyPath<Model, Wrapped>, name: String) { self.name = name }

    /// Ascending order on this column.
    public var ascending: ModelOrdering<Model> { ModelOrdering(SortKey(name, ascending: true)) }
    /// Descending order on this column.
    public var descending: ModelOrdering<Model> { ModelOrdering(SortKey(name, ascending: false)) }

    /// Whether the field is null or absent.
    public var isNull: ModelPredicate<Model> { ModelPredicate(.isNull(name)) }

    /// The field equals one of the values.
    public func isIn(_ values: [Wrapped]) -> ModelPredicate<Model> { ModelPredicate(.isIn(name, values.map(\.queryValue))) }

    /// Equal (`== nil`: the field is null).
    public static func == (lhs: Column, rhs: Wrapped) -> ModelPredicate<Model> {
        let value = rhs.queryValue
        return ModelPredicate(value.isNull ? .isNull(lhs.name) : .compare(lhs.name, .equal, value))
    }

    /// Not equal (`!= nil`: the field is not null). Like SQL, a null field is not "not equal"
    /// to a value: `done != true` leaves out rows whose `done` is null.
    public static func != (lhs: Column, rhs: Wrapped) -> ModelPredicate<Model> {
        let value = rhs.queryValue
        return ModelPredicate(value.isNull ? .not(.isNull(lhs.name)) : .compare(lhs.name, .notEqual, value))
    }

    /// Less than.
    public static func < (lhs: Column, rhs: Wrapped) -> ModelPredicate<Model> { ModelPredicate(.compare(lhs.name, .less, rhs.queryValue)) }
    /// Less than or equal.
    public static func <= (lhs: Column, rhs: Wrapped) -> ModelPredicate<Model> { ModelPredicate(.compare(lhs.name, .lessOrEqual, rhs.queryValue)) }
    /// Greater than.
    public static func > (lhs: Column, rhs: Wrapped) -> ModelPredicate<Model> { ModelPredicate(.compare(lhs.name, .greater, rhs.queryValue)) }
    /// Greater than or equal.
    public static func >= (lhs: Column, rhs: Wrapped) -> ModelPredicate<Model> { ModelPredicate(.compare(lhs.name, .greaterOrEqual, rhs.queryValue)) }
}

/// The string tests, on `String` and `String?` columns.
public protocol StringQueryValue: QueryValue {}
extension String: StringQueryValue {}
extension Optional: StringQueryValue where Wrapped == String {}

extension Column where Wrapped: StringQueryValue {
    /// The string contains `substring` (exact bytes, case-sensitive).
    public func contains(_ substring: String) -> ModelPredicate<Model> { ModelPredicate(.contains(name, substring)) }
    /// The string starts with `prefix`.
    public func hasPrefix(_ prefix: String) -> ModelPredicate<Model> { ModelPredicate(.hasPrefix(name, prefix)) }
    /// The string ends with `suffix`.
    public func hasSuffix(_ suffix: String) -> ModelPredicate<Model> { ModelPredicate(.hasSuffix(name, suffix)) }
}

extension IndexDefinition {
    /// A composite index over these columns, most significant first.
    public init(_ columns: any ColumnReference...) { self.init(columns.map(\.name)) }
}
