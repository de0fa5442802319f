import Foundation

/// The names and schemas of the four system tables the core keeps in every local store,
/// under the reserved `__` prefix, through the ordinary ``LocalStore`` API.
public enum SystemTables {
    /// The operation queue (Azure's `MS_TableOperations`).
    public static let operations = OperationRow.table
    /// Operations the remote rejected or the app must resolve (`MS_TableOperationErrors`).
    public static let operationErrors = OperationErrorRow.table
    /// Per-table settings: pull cursors per query id, dataset sync counts, schema versions (`MS_TableConfig`).
    public static let config = ConfigRow.table
    /// The attachments local records reference: size, state, pin and last use, by hash.
    public static let attachments = AttachmentRow.table

    /// The schema of `__operations`.
    public static let operationsSchema = OperationRow.schema
    /// The schema of `__operation_errors`.
    public static let operationErrorsSchema = OperationErrorRow.schema
    /// The schema of `__config`.
    public static let configSchema = ConfigRow.schema
    /// The schema of `__attachments`.
    public static let attachmentsSchema = AttachmentRow.schema

    /// All four schemas.
    public static let all = [operationsSchema, operationErrorsSchema, configSchema, attachmentsSchema]

    /// Defines the system tables in `store` (idempotent).
    public static func define(in store: any LocalStore) async throws {
        for schema in all { try await store.defineTable(schema) }
    }

    /// Reads a `__config` value.
    public static func configValue(_ txn: any LocalReadTransaction, table: String, key: String) throws -> String? {
        try ConfigRow.value(txn, table: table, key: key)
    }

    /// Writes (or with `nil`, removes) a `__config` value.
    public static func setConfigValue(_ txn: any LocalWriteTransaction, table: String, key: String,
                                      keyType: String, value: String?) throws {
        try ConfigRow.setValue(txn, table: table, key: key, keyType: keyType, value: value)
    }
}

/// The state of a queued operation.
///
/// New cases arrive in minor releases (Docs/Versioning.md): switch over it with an
/// `@unknown default:` case.
public enum OperationState: String, Sendable, Hashable, Codable {
    /// Waiting to be sent; later writes to the item may still collapse into it.
    case pending
    /// Sent at least once (the remote may have applied it): never rewritten, resent as is.
    case attempted
    /// Rejected or left for the app: see ``SyncContext/operationErrors()``. Later operations
    /// on the same item wait behind it; other items are not blocked.
    case failed
}

/// One entry of the operation queue, as stored in `__operations`.
///
/// A value type whose fields live in one shared box until a copy changes one (copy on
/// write): a push passes each batch's operations through several loops and collections, and
/// copying fourteen fields, ten of them reference-counted, was 9% of the push's local
/// transactions (`perf`, push-10k: `initializeWithCopy for QueuedOperation`).
public struct QueuedOperation: Sendable, Hashable {
    private var box: Box

    /// The local id of the operation.
    public var id: String {
        get { box.values.id }
        set { unique().values.id = newValue }
    }
    /// Position in the queue (increasing).
    public var sequence: Int64 {
        get { box.values.sequence }
        set { unique().values.sequence = newValue }
    }
    /// The table of the item.
    public var table: String {
        get { box.values.table }
        set { unique().values.table = newValue }
    }
    /// The item's id.
    public var itemId: String {
        get { box.values.itemId }
        set { unique().values.itemId = newValue }
    }
    /// Insert, update or delete.
    public var kind: OperationKind {
        get { box.values.kind }
        set { unique().values.kind = newValue }
    }
    /// The item as the app last wrote it (for a delete, as it was before the delete).
    public var item: Record? {
        get { box.values.item }
        set { unique().values.item = newValue }
    }
    /// The remote version the change is based on.
    public var baseVersion: String? {
        get { box.values.baseVersion }
        set { unique().values.baseVersion = newValue }
    }
    /// Pending, attempted or failed.
    public var state: OperationState {
        get { box.values.state }
        set { unique().values.state = newValue }
    }
    /// How many times it was sent.
    public var attempts: Int {
        get { box.values.attempts }
        set { unique().values.attempts = newValue }
    }
    /// When the operation was first queued.
    public var createdAt: Timestamp {
        get { box.values.createdAt }
        set { unique().values.createdAt = newValue }
    }
    /// When a local write last changed it (collapses update this).
    public var changedAt: Timestamp {
        get { box.values.changedAt }
        set { unique().values.changedAt = newValue }
    }
    /// The local transaction that queued it (operations of one transaction are pushed together).
    public var transaction: String {
        get { box.values.transaction }
        set { unique().values.transaction = newValue }
    }
    /// The id the remote sees; a fresh one is drawn when a conflict resolution resends it.
    public var sendId: String {
        get { box.values.sendId }
        set { unique().values.sendId = newValue }
    }
    /// The fields the app changed relative to the base version (for field-level merge).
    public var changedFields: [String] {
        get { box.values.changedFields }
        set { unique().values.changedFields = newValue }
    }

    init(id: String, sequence: Int64, table: String, itemId: String, kind: OperationKind, item: Record?,
         baseVersion: String?, transaction: String, changedFields: [String], now: Timestamp) {
        box = Box(Values(id: id, sequence: sequence, table: table, itemId: itemId, kind: kind, item: item,
                         baseVersion: baseVersion, state: .pending, attempts: 0, createdAt: now, changedAt: now,
                         transaction: transaction, sendId: id, changedFields: changedFields))
    }

    init(_ values: Values) {
        box = Box(values)
    }

    var pushOperation: PushOperation {
        PushOperation(id: sendId, table: table, itemId: itemId, kind: kind,
                      item: kind == .delete ? nil : item, baseVersion: baseVersion)
    }

    /// Every field's value.
    struct Values: Hashable {
        var id: String
        var sequence: Int64
        var table: String
        var itemId: String
        var kind: OperationKind
        var item: Record?
        var baseVersion: String?
        var state: OperationState
        var attempts: Int
        var createdAt: Timestamp
        var changedAt: Timestamp
        var transaction: String
        var sendId: String
        var changedFields: [String]
    }

    /// The shared fields.
    ///
    /// `@unchecked Sendable`: `values` changes only through ``unique()``, which first copies the
    /// box unless this value is its only holder; a box that two values (or threads) hold is
    /// never written.
    private final class Box: @unchecked Sendable {
        var values: Values
        init(_ values: Values) { self.values = values }
    }

    /// The box, copied first if another value shares it.
    private mutating func unique() -> Box {
        if !isKnownUniquelyReferenced(&box) { box = Box(box.values) }
        return box
    }

    /// Equal when every field is.
    public static func == (lhs: QueuedOperation, rhs: QueuedOperation) -> Bool {
        lhs.box === rhs.box || lhs.box.values == rhs.box.values
    }

    /// Hashes every field, consistently with `==`.
    public func hash(into hasher: inout Hasher) {
        box.values.hash(into: &hasher)
    }
}

/// An operation the remote rejected, or a conflict left for the app, as stored in `__operation_errors`.
public struct OperationError: Sendable, Hashable {
    /// The error row's id.
    public var id: String
    /// The failed operation: still in the queue, in state ``OperationState/failed`` —
    /// unless ``compensated``.
    public var operationId: String
    /// The table.
    public var table: String
    /// The item's id.
    public var itemId: String
    /// The failed operation's kind.
    public var kind: OperationKind
    /// An HTTP-like status: 409 for a conflict, or what the remote returned.
    public var status: Int?
    /// Why it failed.
    public var message: String
    /// The remote's record, when it sent one (conflicts).
    public var serverRecord: Record?
    /// The record the client tried to write.
    public var clientRecord: Record?
    /// When the failure was recorded.
    public var createdAt: Timestamp
    /// `true` when the sync rules refused the write and it was settled by a compensating
    /// write (``RefusalResolution/compensate``): the operation is no longer queued and the
    /// local copy went back to the server's state. The entry is a record for the app; resolve
    /// it with ``OperationErrorResolution/discard`` to dismiss it.
    public var compensated: Bool

    /// The code recorded with the failure, when there is one: the remote's code for its
    /// rejection (``PushResult/rejectionCode``), or the code of a write refused on this device.
    var rejectionCode: SyncError.Code?

    /// The failure as a ``SyncError`` code, for the app to branch on (never the message):
    /// the code recorded with it — ``SyncError/Code/attachmentMissing`` for a record whose
    /// file the remote does not hold (see Docs/Attachments.md: add the bytes again and
    /// resolve with ``OperationErrorResolution/retry``), `forbidden` for a write the sync
    /// rules refused —, and otherwise by the status: `forbidden` (403), `conflict` (409: a
    /// conflict left for the app), `notFound` (404), `rejected` for anything else.
    public var code: SyncError.Code {
        if let rejectionCode { return rejectionCode }
        switch status {
        case 403: return .forbidden
        case 409: return .conflict
        case 404: return .notFound
        default: return .rejected
        }
    }

    init(operation: QueuedOperation, status: Int?, message: String, code: SyncError.Code? = nil, serverRecord: Record?,
         now: Timestamp, compensated: Bool = false) {
        rejectionCode = code
        id = UUID.randomString()
        operationId = operation.id
        table = operation.table
        itemId = operation.itemId
        kind = operation.kind
        self.status = status
        self.message = message
        self.serverRecord = serverRecord
        clientRecord = operation.item
        createdAt = now
        self.compensated = compensated
    }
}
