/// A typed handle on an app table: ``SyncModel`` values in and out, mapped with
/// ``RecordEncoder`` and ``RecordDecoder``. Writes are queued exactly as with ``SyncTable``.
public struct TypedSyncTable<Model: SyncModel>: Sendable {
    /// The untyped table underneath.
    public let table: SyncTable

    /// The model with this id, or `nil`. Throws `DecodingError` if the stored record does not fit `Model`.
    public func get(_ id: String) async throws -> Model? {
        try await table.get(id).map { try RecordDecoder().decode(Model.self, from: $0) }
    }

    /// The models matching the query, in its order.
    public func query(_ query: Query = .all) async throws -> [Model] {
        let decoder = RecordDecoder()
        return try await table.query(query).map { try decoder.decode(Model.self, from: $0) }
    }

    /// The number of models matching the predicate.
    public func count(_ predicate: QueryPredicate = .all) async throws -> Int { try await table.count(predicate) }

    /// Inserts a model and queues the insert. Throws ``SyncError/Code/duplicateId`` or `EncodingError`.
    public func insert(_ model: Model) async throws {
        try await table.insert(try RecordEncoder().encode(model))
    }

    /// Replaces a model's fields and queues the update. Throws ``SyncError/Code/notFound``.
    public func update(_ model: Model) async throws {
        try await table.update(try RecordEncoder().encode(model))
    }

    /// Inserts or updates.
    public func save(_ model: Model) async throws {
        try await table.save(try RecordEncoder().encode(model))
    }

    /// Deletes a model by id and queues the delete. Throws ``SyncError/Code/notFound``.
    public func delete(_ id: String) async throws { try await table.delete(id) }
}

extension SyncContext {
    /// A typed handle on an app table.
    public func table<Model: SyncModel>(_ name: String, as model: Model.Type) -> TypedSyncTable<Model> {
        TypedSyncTable(table: table(name))
    }
}
