/// A typed record: a `Codable` struct that a typed sync table stores as a ``Record``.
///
/// ``RecordEncoder`` and ``RecordDecoder`` map the model to a record by its coding keys:
///
/// - `id` is the record id and must encode as a `String`;
/// - `version` (`String?`), `updatedAt` (`Date?` or `Timestamp?`) and `deleted` (`Bool`),
///   when the model declares them, are the record's system properties: the remote assigns
///   them, encoding copies them into the record and decoding reads them back;
/// - every other key is a field of the record.
///
/// ```swift
/// struct TodoItem: SyncModel {
///     var id: String
///     var title: String
///     var done: Bool
///     var due: Date?
///     var version: String?   // optional: the server-assigned version
/// }
/// ```
///
/// Dates are kept to the millisecond. See ``RecordEncoder`` for the full value mapping.
public protocol SyncModel: Codable, Sendable {
    /// The record id, unique in its table.
    var id: String { get }
}
