import Foundation

/// A typed record: a `Codable` struct stored in its own table, the typed path through the
/// API (``TypedSyncTable``, typed transactions, typed conflict resolvers, observations of
/// models). The untyped ``Record`` path stays for tables known only at run time.
///
/// ``RecordEncoder`` and ``RecordDecoder`` map the model to a record by its coding keys:
///
/// - `id` is the record id: a `String`, a `UUID`, an integer, or any type that declares
///   ``RecordIdentifier`` (one line for a `LosslessStringConvertible` type); it must encode
///   as the string ``RecordIdentifier/recordId`` gives (an integer encodes as its digits);
/// - `version` (`String?`), `updatedAt` (`Date?` or `Timestamp?`) and `deleted` (`Bool`),
///   when the model declares them, are the record's system properties: the remote assigns
///   them, encoding copies them into the record and decoding reads them back;
/// - every other key is a field of the record.
///
/// ```swift
/// struct Todo: SyncModel {
///     static let tableName = "todos"
///     static let indexes = [IndexDefinition(Columns.done), IndexDefinition(Columns.listId, Columns.due)]
///
///     var id: String
///     var listId: String
///     var title: String
///     var done: Bool
///     var due: Date?
///     var version: String?   // optional: the server-assigned version
///
///     enum Columns {
///         static let listId = Column(\Todo.listId, CodingKeys.listId)
///         static let done = Column(\Todo.done, CodingKeys.done)
///         static let due = Column(\Todo.due, CodingKeys.due)
///     }
/// }
/// ```
///
/// The table's ``SyncModel/schema`` is derived from the coding keys and their types (see
/// ``SyncModel/derivedSchema()``); declare `schema` yourself to choose field types or the
/// undeclared-field policy. Dates are kept to the millisecond. See ``RecordEncoder`` for the
/// full value mapping.
/// Models are `Identifiable` by their record id, so SwiftUI lists take them as they are.
public protocol SyncModel: Codable, Sendable, Identifiable where ID: RecordIdentifier {
    /// The record id, unique in its table.
    var id: ID { get }

    /// The name of the model's table (see ``Names``).
    static var tableName: String { get }

    /// The table's schema. The default is ``SyncModel/derivedSchema()``.
    static var schema: TableSchema { get throws }

    /// The indexes of the derived schema: an index of one column indexes that field; one of
    /// several is a composite index. Empty by default.
    static var indexes: [IndexDefinition] { get }
}

extension SyncModel {
    public static var indexes: [IndexDefinition] { [] }

    public static var schema: TableSchema { get throws { try derivedSchema() } }

    /// The schema the model's `Decodable` conformance implies: one declared field per coding
    /// key other than the system properties, typed by the Swift type decoded for it (see
    /// ``RecordEncoder`` for the mapping; a nested struct or dictionary is an `object`, an
    /// array or set an `array`, ``Value`` is `any`), with ``SyncModel/indexes``. Undeclared
    /// fields are kept (``UndeclaredFieldPolicy/store``), so a newer app's fields survive an
    /// older one.
    ///
    /// It runs the model's `init(from:)` against a probe decoder that answers every key with
    /// a placeholder. A raw-value enum field must be `CaseIterable` (its first case is the
    /// placeholder) or optional; an `init(from:)` that rejects placeholders makes this throw
    /// ``SyncError/Code/invalidConfiguration``: declare ``SyncModel/schema`` yourself then.
    public static func derivedSchema() throws -> TableSchema {
        let fields = try SchemaProbe.fields(of: Self.self)
        var definitions = fields.map { FieldDefinition($0.name, $0.type) }
        var composite: [IndexDefinition] = []
        for index in indexes {
            for name in index.fields where !fields.contains(where: { $0.name == name }) {
                throw SyncError(.invalidConfiguration, "\(Self.self): index on '\(name)', which is not one of its fields")
            }
            if index.fields.count == 1, let i = definitions.firstIndex(where: { $0.name == index.fields[0] }) {
                definitions[i].indexed = true
            } else if !index.fields.isEmpty {
                composite.append(index)
            }
        }
        return TableSchema(tableName, fields: definitions, indexes: composite)
    }
}

/// The type of a model's id: how it is written as a record id. `String`, `UUID` and the
/// standard integers conform; any `LosslessStringConvertible` type conforms by declaring it
/// (`extension OrderNumber: RecordIdentifier {}`), its `description` being the record id.
public protocol RecordIdentifier: Hashable, Sendable {
    /// The id as the record stores it.
    var recordId: String { get }
}

extension RecordIdentifier where Self: LosslessStringConvertible {
    public var recordId: String { description }
}

extension String: RecordIdentifier {
    public var recordId: String { self }
}

extension UUID: RecordIdentifier {
    /// The upper-case form, which is how `UUID` encodes.
    public var recordId: String { uuidString }
}

extension Int: RecordIdentifier {}
extension Int64: RecordIdentifier {}
extension Int32: RecordIdentifier {}
extension UInt64: RecordIdentifier {}
