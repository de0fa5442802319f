/// A conflict resolver that merges models: per model type, a function from the local and
/// the server's version to the one to send, and another resolver for everything else.
///
/// ```swift
/// let resolver = ModelConflictResolver(otherwise: ConflictPolicy.serverWins)
///     .merging(Todo.self) { local, server in
///         var merged = server
///         merged.done = local.done || server.done   // a tick on either side stays
///         return merged
///     }
/// let context = try await SyncContext(store: store, remote: remote,
///                                     options: SyncOptions(conflictResolver: resolver))
/// ```
///
/// The merged model is sent based on the server's current version
/// (``ConflictResolution/merged(_:)``). The fallback decides a conflict on a delete (the
/// local model is gone) or with a record the server deleted, refusals and other tables. A
/// record that does not decode as the model, or a merge that returns another id or does not
/// encode, leaves the operation for the app (``ConflictResolution/leaveForApp``): nothing
/// is lost or guessed.
public struct ModelConflictResolver: ConflictResolver {
    private var merges: [String: @Sendable (SyncConflict) async -> ConflictResolution?] = [:]
    private let fallback: any ConflictResolver

    /// A resolver that hands every conflict without a merge function to `fallback`.
    public init(otherwise fallback: any ConflictResolver = ConflictPolicy.serverWins) {
        self.fallback = fallback
    }

    /// This resolver, merging conflicts on `Model`'s table with `merge`.
    public func merging<Model: SyncModel>(_ model: Model.Type,
                                          _ merge: @escaping @Sendable (_ local: Model, _ server: Model) async -> Model) -> ModelConflictResolver {
        var copy = self
        copy.merges[Model.tableName] = { conflict in
            guard conflict.kind != .delete, !conflict.serverRecord.deleted, let client = conflict.clientRecord else { return nil }
            let decoder = RecordDecoder()
            guard let local = try? decoder.decode(Model.self, from: client),
                  let server = try? decoder.decode(Model.self, from: conflict.serverRecord) else { return .leaveForApp }
            let merged = await merge(local, server)
            guard merged.id.recordId == conflict.itemId, let record = try? ModelCoding.encode(merged) else { return .leaveForApp }
            return .merged(record)
        }
        return copy
    }

    public func resolve(_ conflict: SyncConflict) async -> ConflictResolution {
        if let merge = merges[conflict.table], let resolution = await merge(conflict) { return resolution }
        return await fallback.resolve(conflict)
    }

    public func resolveRefusal(_ refusal: SyncRefusal) async -> RefusalResolution {
        await fallback.resolveRefusal(refusal)
    }
}
