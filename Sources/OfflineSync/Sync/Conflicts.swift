/// A conflict the remote reported for one queued operation.
public struct SyncConflict: Sendable, Hashable {
    /// The table.
    public var table: String
    /// The item's id.
    public var itemId: String
    /// The kind of the client's operation.
    public var kind: OperationKind
    /// The client's record (for a delete, the record as it was before the delete).
    public var clientRecord: Record?
    /// The remote's current record (a tombstone when the remote deleted it).
    public var serverRecord: Record
    /// The version the client's change was based on.
    public var baseVersion: String?
    /// When the client last changed the item.
    public var clientChangedAt: Timestamp
    /// The fields the client changed (known for inserts and updates).
    public var changedFields: [String]
    /// How many times this operation was sent already.
    public var attempts: Int
}

/// How to settle a conflict.
public enum ConflictResolution: Sendable, Hashable {
    /// Drop the client's change and store the remote's record locally.
    case takeServer
    /// Resend the client's change, based on the remote's current version.
    case keepClient
    /// Send this record instead, based on the remote's current version.
    case merged(Record)
    /// Drop the client's change and remove the local copy; the next pull brings the remote's.
    case discardClient
    /// Keep the operation in `__operation_errors` for the app to settle later.
    case leaveForApp
}

/// A write the remote's sync rules refused (HTTP 403): the identity may not make it, so
/// sending it again cannot succeed. The remote sends no copy of the row — the caller may not
/// be allowed to read it.
public struct SyncRefusal: Sendable, Hashable {
    /// The table.
    public var table: String
    /// The item's id.
    public var itemId: String
    /// The kind of the client's operation.
    public var kind: OperationKind
    /// The client's record (for a delete, the record as it was before the delete).
    public var clientRecord: Record?
    /// The remote's reason, which names the table, the item and the operation, never a value.
    public var reason: String
}

/// How to settle a write the sync rules refused. Either way the refusal is recorded in
/// `__operation_errors` and announced by ``SyncEvent/outboxMutationFailed(table:record:kind:error:)``.
public enum RefusalResolution: Sendable, Hashable {
    /// The compensating write (Realm's name): the operation leaves the queue and the local
    /// copy is removed, so the next pull puts back the server's state — the row as the
    /// identity may read it, or nothing when it may not. The error entry stays, marked
    /// ``OperationError/compensated``, for the app to inspect and dismiss.
    case compensate
    /// Keep the operation (failed) and the local copy for the app, as for any other
    /// rejection; a pull does not overwrite the item while the operation waits.
    case keepForApp
}

/// Decides conflicts, one operation at a time. May be asynchronous (for example, to ask the user).
public protocol ConflictResolver: Sendable {
    /// Returns how to settle the conflict.
    func resolve(_ conflict: SyncConflict) async -> ConflictResolution
    /// Returns how to settle a write the sync rules refused. The default compensates.
    func resolveRefusal(_ refusal: SyncRefusal) async -> RefusalResolution
}

extension ConflictResolver {
    /// Compensates: the local copy goes back to the server's state (see ``RefusalResolution/compensate``).
    public func resolveRefusal(_ refusal: SyncRefusal) async -> RefusalResolution { .compensate }
}

/// The built-in conflict policies.
public enum ConflictPolicy: String, Sendable, Hashable, CaseIterable, ConflictResolver {
    /// The remote's record wins (Amplify's default "apply remote").
    case serverWins
    /// The client's change is resent on the remote's version.
    case clientWins
    /// The newer change wins: the client's change time against the remote's `updatedAt`.
    case lastWriterWins
    /// The remote's record with the fields the client changed taken from the client.
    /// A conflicting delete keeps the remote's record (an edit beats a delete).
    case fieldLevelMerge

    /// Applies the policy.
    public func resolve(_ conflict: SyncConflict) async -> ConflictResolution {
        switch self {
        case .serverWins:
            return .takeServer
        case .clientWins:
            return .keepClient
        case .lastWriterWins:
            guard let serverTime = conflict.serverRecord.updatedAt else { return .keepClient }
            return conflict.clientChangedAt > serverTime ? .keepClient : .takeServer
        case .fieldLevelMerge:
            guard conflict.kind != .delete, let client = conflict.clientRecord else { return .takeServer }
            if conflict.serverRecord.deleted { return .keepClient }
            var merged = Record(id: conflict.itemId, fields: conflict.serverRecord.fields)
            for field in conflict.changedFields { merged[field] = client[field] }
            return .merged(merged)
        }
    }

    /// ``clientWins`` keeps a refused write for the app (the client's change is never thrown
    /// away silently); the other policies compensate, as they take the server's side.
    public func resolveRefusal(_ refusal: SyncRefusal) async -> RefusalResolution {
        self == .clientWins ? .keepForApp : .compensate
    }
}

/// A resolver from a closure.
public struct ClosureConflictResolver: ConflictResolver {
    private let body: @Sendable (SyncConflict) async -> ConflictResolution
    private let refusal: @Sendable (SyncRefusal) async -> RefusalResolution
    /// Wraps `body`; writes the sync rules refuse are compensated.
    public init(_ body: @escaping @Sendable (SyncConflict) async -> ConflictResolution) {
        self.init(body, refusal: { _ in .compensate })
    }
    /// Wraps `body`, and `refusal` for writes the sync rules refuse.
    public init(_ body: @escaping @Sendable (SyncConflict) async -> ConflictResolution,
                refusal: @escaping @Sendable (SyncRefusal) async -> RefusalResolution) {
        self.body = body
        self.refusal = refusal
    }
    /// Calls the closure.
    public func resolve(_ conflict: SyncConflict) async -> ConflictResolution { await body(conflict) }
    /// Calls the refusal closure.
    public func resolveRefusal(_ refusal: SyncRefusal) async -> RefusalResolution { await self.refusal(refusal) }
}

/// How the app settles an entry of ``SyncContext/operationErrors()``.
public enum OperationErrorResolution: Sendable, Hashable {
    /// Send the operation again (based on the remote's version when the error carried one).
    case retry
    /// Send this record instead (an update or insert), based on the remote's version.
    case retryWith(Record)
    /// Drop the operation and store the remote's record locally (or remove the item if the remote has none).
    case takeServer
    /// Drop the operation; the local copy is removed and comes back with the next pull.
    case discard
}

extension ConflictResolution {
    /// The case's name (`takeServer`, `keepClient`, `merged`, `discardClient`, `leaveForApp`)
    /// for logs and summaries; a merged record's fields are left out.
    public var name: String {
        switch self {
        case .takeServer: return "takeServer"
        case .keepClient: return "keepClient"
        case .merged: return "merged"
        case .discardClient: return "discardClient"
        case .leaveForApp: return "leaveForApp"
        }
    }
}
