/// An app table of a ``SyncContext``: local reads and queued writes, untyped.
public struct SyncTable: Sendable {
    /// The context.
    public let context: SyncContext
    /// The table name.
    public let name: String

    /// The local record with this id, or `nil`.
    public func get(_ id: String) async throws -> Record? {
        let name = name
        try Names.validateAppTable(name)
        return try await context.store.read { try $0.record(in: name, id: id) }
    }

    /// The local records matching the query.
    public func query(_ query: Query = .all) async throws -> [Record] {
        let name = name
        try Names.validateAppTable(name)
        return try await context.store.read { try $0.records(in: name, matching: query) }
    }

    /// The number of local records matching the predicate.
    public func count(_ predicate: QueryPredicate = .all) async throws -> Int {
        let name = name
        try Names.validateAppTable(name)
        return try await context.store.read { try $0.count(in: name, matching: predicate) }
    }

    /// Inserts a record and queues the insert. Throws ``SyncError/Code/duplicateId``.
    @discardableResult
    public func insert(_ record: Record) async throws -> Record {
        let name = name
        return try await context.transaction { try $0.insert(record, into: name) }
    }

    /// Replaces a record's fields and queues the update. Throws ``SyncError/Code/notFound``.
    @discardableResult
    public func update(_ record: Record) async throws -> Record {
        let name = name
        return try await context.transaction { try $0.update(record, in: name) }
    }

    /// Inserts or updates.
    @discardableResult
    public func save(_ record: Record) async throws -> Record {
        let name = name
        return try await context.transaction { try $0.save(record, in: name) }
    }

    /// Deletes a record and queues the delete. Throws ``SyncError/Code/notFound``.
    public func delete(id: String) async throws {
        let name = name
        try await context.transaction { try $0.delete(id: id, from: name) }
    }

    /// Deletes a record (the spelling before `delete(id:)`, which every table and
    /// transaction shares).
    @available(*, deprecated, renamed: "delete(id:)")
    public func delete(_ id: String) async throws { try await delete(id: id) }

    /// Pulls this table (see ``SyncContext/pull(_:query:queryId:)``).
    @discardableResult
    public func pull(_ query: Query = .all, queryId: String? = nil) async throws -> PullSummary {
        try await context.pull(name, query: query, queryId: queryId)
    }

    /// Purges this table (see ``SyncContext/purge(_:query:force:)``).
    public func purge(_ query: Query = .all, force: Bool = false) async throws {
        try await context.purge(name, query: query, force: force)
    }
}
