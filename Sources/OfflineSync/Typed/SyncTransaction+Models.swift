/// Typed access inside a ``SyncContext/transaction(_:)``: models of several tables written
/// and queued in one atomic transaction, pushed in one batch.
///
/// ```swift
/// try await context.transaction { txn in
///     try txn.insert(TodoList(id: listId, name: "Groceries"))
///     try txn.insert(Todo(id: todoId, listId: listId, title: "Milk", done: false))
/// }
/// ```
extension SyncTransaction {
    /// The model with this id in its table, or `nil`.
    public func get<Model: SyncModel>(_ model: Model.Type, id: Model.ID) throws -> Model? {
        try record(in: Model.tableName, id: id.recordId).map { try ModelCoding.decode(Model.self, from: $0) }
    }

    /// The models the request selects, in its order.
    public func query<Model: SyncModel>(_ request: ModelQuery<Model>) throws -> [Model] {
        let decoder = RecordDecoder()
        return try records(in: Model.tableName, matching: request.query).map { try ModelCoding.decode(Model.self, from: $0, decoder: decoder) }
    }

    /// Every model of the table, in id order.
    public func query<Model: SyncModel>(_ model: Model.Type) throws -> [Model] {
        try query(ModelQuery<Model>())
    }

    /// Inserts a model into its table and queues the insert. Throws
    /// ``SyncError/Code/duplicateId`` if the id exists locally.
    public func insert<Model: SyncModel>(_ model: Model) throws {
        try insert(try ModelCoding.encode(model), into: Model.tableName)
    }

    /// Replaces a model's fields and queues the update. Throws ``SyncError/Code/notFound``.
    public func update<Model: SyncModel>(_ model: Model) throws {
        try update(try ModelCoding.encode(model), in: Model.tableName)
    }

    /// Inserts or updates a model.
    public func save<Model: SyncModel>(_ model: Model) throws {
        try save(try ModelCoding.encode(model), in: Model.tableName)
    }

    /// Deletes the model with this id from its table and queues the delete, spelled as the
    /// untyped `delete(id:from:)`. Throws ``SyncError/Code/notFound``.
    public func delete<Model: SyncModel>(id: Model.ID, from model: Model.Type) throws {
        try delete(id: id.recordId, from: Model.tableName)
    }

    /// Deletes a model (the spelling before `delete(id:from:)`).
    @available(*, deprecated, renamed: "delete(id:from:)")
    public func delete<Model: SyncModel>(_ model: Model.Type, id: Model.ID) throws {
        try delete(id: id, from: model)
    }
}
