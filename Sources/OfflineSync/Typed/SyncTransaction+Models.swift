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
    public func get<Model: SyncModel>(_ model: Model.Type, id: String) throws -> Model? {
        try record(in: Model.tableName, id: id).map { try ModelCoding.decode(Model.self, from: $0) }
    }

    /// The models of the table matching the query, in its order.
    public func query<Model: SyncModel>(_ model: Model.Type, _ query: Query = .all) throws -> [Model] {
        let decoder = RecordDecoder()
        return try records(in: Model.tableName, matching: query).map { try ModelCoding.decode(Model.self, from: $0, decoder: decoder) }
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

    /// Deletes the model with this id and queues the delete. Throws ``SyncError/Code/notFound``.
    public func delete<Model: SyncModel>(_ model: Model.Type, id: String) throws {
        try delete(id: id, from: Model.tableName)
    }
}
