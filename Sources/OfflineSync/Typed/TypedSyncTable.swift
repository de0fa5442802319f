/// A typed handle on an app table: ``SyncModel`` values in and out, mapped with
/// ``RecordEncoder`` and ``RecordDecoder``. Writes are queued exactly as with ``SyncTable``.
public struct TypedSyncTable<Model: SyncModel>: Sendable {
    /// The untyped table underneath.
    public let table: SyncTable

    /// The model with this id, or `nil`. Throws ``SyncError/Code/typeMismatch`` (naming the
    /// field) if the stored record does not fit `Model`.
    public func get(_ id: Model.ID) async throws -> Model? {
        try await table.get(id.recordId).map { try ModelCoding.decode(Model.self, from: $0) }
    }

    /// The models the request selects, in its order.
    public func query(_ request: ModelQuery<Model> = ModelQuery()) async throws -> [Model] {
        let decoder = RecordDecoder()
        return try await table.query(request.query).map { try ModelCoding.decode(Model.self, from: $0, decoder: decoder) }
    }

    /// The number of models matching the predicate.
    public func count(_ predicate: ModelPredicate<Model> = .all) async throws -> Int { try await table.count(predicate.predicate) }

    /// Inserts a model and queues the insert. Throws ``SyncError/Code/duplicateId``, or
    /// ``SyncError/Code/invalidValue`` (naming the field) for a model that does not encode.
    public func insert(_ model: Model) async throws {
        try await table.insert(try ModelCoding.encode(model))
    }

    /// Replaces a model's fields and queues the update. Throws ``SyncError/Code/notFound``.
    public func update(_ model: Model) async throws {
        try await table.update(try ModelCoding.encode(model))
    }

    /// Inserts or updates.
    public func save(_ model: Model) async throws {
        try await table.save(try ModelCoding.encode(model))
    }

    /// Deletes a model by id and queues the delete. Throws ``SyncError/Code/notFound``.
    public func delete(id: Model.ID) async throws { try await table.delete(id: id.recordId) }

    /// Deletes a model (the spelling before `delete(id:)`).
    @available(*, deprecated, renamed: "delete(id:)")
    public func delete(_ id: Model.ID) async throws { try await delete(id: id) }

    /// Brings the remote's changes into the table (see ``SyncContext/pull(_:query:queryId:)``);
    /// `request` narrows what is pulled.
    @discardableResult
    public func pull(_ request: ModelQuery<Model> = ModelQuery(), queryId: String? = nil) async throws -> PullSummary {
        try await table.pull(request.query, queryId: queryId)
    }

    /// Removes local models the request selects (see ``SyncContext/purge(_:query:force:)``).
    public func purge(_ request: ModelQuery<Model> = ModelQuery(), force: Bool = false) async throws {
        try await table.purge(request.query, force: force)
    }

    /// The models matching `query`, now and after every commit that changes them (see
    /// ``ObservedValue``). Results are compared as records, so `Model` need not be
    /// `Equatable`; a stored record that does not fit `Model` throws ``SyncError/Code/typeMismatch``
    /// from `next()`.
    public func observe(_ request: ModelQuery<Model> = ModelQuery()) -> ObservedValue<[Model]> {
        table.observation(request.query) { records in
            let decoder = RecordDecoder()
            return try records.map { try ModelCoding.decode(Model.self, from: $0, decoder: decoder) }
        }
    }

    /// The model with this id (`nil` while there is none), now and after every commit that
    /// writes or deletes it.
    public func observe(id: Model.ID) -> ObservedValue<Model?> {
        table.observation(id: id.recordId) { record in try record.map { try ModelCoding.decode(Model.self, from: $0) } }
    }

    /// The table's sync state (see ``SyncTable/observeSyncStatus()``).
    public func observeSyncStatus() -> ObservedValue<TableSyncStatus> { table.observeSyncStatus() }
}

extension SyncContext {
    /// The typed handle on the model's table, ``SyncModel/tableName``.
    public func table<Model: SyncModel>(_ model: Model.Type) -> TypedSyncTable<Model> {
        TypedSyncTable(table: table(Model.tableName))
    }

    /// A typed handle on a table named otherwise than the model's ``SyncModel/tableName``.
    public func table<Model: SyncModel>(_ name: String, as model: Model.Type) -> TypedSyncTable<Model> {
        TypedSyncTable(table: table(name))
    }

    /// ``start(tables:network:queryId:)`` for the models' tables: keeps them in sync in the
    /// background while `network` says the remote is reachable.
    public func start(models: [any SyncModel.Type], network: any NetworkMonitor, queryId: String = "default") async {
        await start(tables: models.map { $0.tableName }, network: network, queryId: queryId)
    }

    /// ``sync(_:queryId:)`` for the models' tables: pull each, then push the queue.
    public func sync(models: [any SyncModel.Type], queryId: String = "default") async throws {
        try await sync(models.map { $0.tableName }, queryId: queryId)
    }

    /// Defines (or migrates) the model's table with its ``SyncModel/schema``.
    public func defineTable<Model: SyncModel>(_ model: Model.Type) async throws {
        try await defineTable(try Model.schema)
    }
}
