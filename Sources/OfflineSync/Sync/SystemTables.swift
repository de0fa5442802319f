import Foundation

/// The names and schemas of the three system tables the core keeps in every local store,
/// under the reserved `__` prefix, through the ordinary ``LocalStore`` API.
public enum SystemTables {
    /// The operation queue (Azure's `MS_TableOperations`).
    public static let operations = "__operations"
    /// Operations the remote rejected or the app must resolve (`MS_TableOperationErrors`).
    public static let operationErrors = "__operation_errors"
    /// Per-table settings: pull cursors per query id, dataset sync counts, schema versions (`MS_TableConfig`).
    public static let config = "__config"

    /// The schema of `__operations`.
    public static let operationsSchema = TableSchema(operations, fields: [
        FieldDefinition("sequence", .int, indexed: true),
        FieldDefinition("table", .string),
        FieldDefinition("itemId", .string),
        FieldDefinition("kind", .string),
        FieldDefinition("item", .object),
        FieldDefinition("baseVersion", .string),
        FieldDefinition("state", .string, indexed: true),
        FieldDefinition("attempts", .int),
        FieldDefinition("createdAt", .date),
        FieldDefinition("changedAt", .date),
        FieldDefinition("transaction", .string),
        FieldDefinition("sendId", .string),
        FieldDefinition("changedFields", .array),
    ], indexes: [IndexDefinition(["table", "itemId", "sequence"])],
       undeclaredFields: .reject)

    /// The schema of `__operation_errors`.
    public static let operationErrorsSchema = TableSchema(operationErrors, fields: [
        FieldDefinition("operationId", .string, indexed: true),
        FieldDefinition("table", .string, indexed: true),
        FieldDefinition("itemId", .string),
        FieldDefinition("kind", .string),
        FieldDefinition("status", .int),
        FieldDefinition("message", .string),
        FieldDefinition("serverItem", .object),
        FieldDefinition("clientItem", .object),
        FieldDefinition("createdAt", .date),
    ], undeclaredFields: .reject)

    /// The schema of `__config`.
    public static let configSchema = TableSchema(config, fields: [
        FieldDefinition("table", .string, indexed: true),
        FieldDefinition("key", .string),
        FieldDefinition("keyType", .string),
        FieldDefinition("value", .string),
    ], undeclaredFields: .reject)

    /// All three schemas.
    public static let all = [operationsSchema, operationErrorsSchema, configSchema]

    /// Defines the system tables in `store` (idempotent).
    public static func define(in store: any LocalStore) async throws {
        for schema in all { try await store.defineTable(schema) }
    }

    /// The id of a `__config` row: unambiguous for any table name and key.
    static func configId(table: String, key: String) -> String {
        CompositeKey.slashed(table, last: key)
    }

    /// Reads a `__config` value.
    public static func configValue(_ txn: any LocalReadTransaction, table: String, key: String) throws -> String? {
        try txn.record(in: config, id: configId(table: table, key: key))?["value"].stringValue
    }

    /// Writes (or with `nil`, removes) a `__config` value.
    public static func setConfigValue(_ txn: any LocalWriteTransaction, table: String, key: String,
                                      keyType: String, value: String?) throws {
        let id = configId(table: table, key: key)
        guard let value else { try txn.delete(id: id, in: config); return }
        try txn.upsert(Record(id: id, fields: [
            "table": .string(table), "key": .string(key), "keyType": .string(keyType), "value": .string(value),
        ]), in: config)
    }
}

/// The state of a queued operation.
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
public struct QueuedOperation: Sendable, Hashable {
    /// The local id of the operation.
    public var id: String
    /// Position in the queue (increasing).
    public var sequence: Int64
    /// The table of the item.
    public var table: String
    /// The item's id.
    public var itemId: String
    /// Insert, update or delete.
    public var kind: OperationKind
    /// The item as the app last wrote it (for a delete, as it was before the delete).
    public var item: Record?
    /// The remote version the change is based on.
    public var baseVersion: String?
    /// Pending, attempted or failed.
    public var state: OperationState
    /// How many times it was sent.
    public var attempts: Int
    /// When the operation was first queued.
    public var createdAt: Timestamp
    /// When a local write last changed it (collapses update this).
    public var changedAt: Timestamp
    /// The local transaction that queued it (operations of one transaction are pushed together).
    public var transaction: String
    /// The id the remote sees; a fresh one is drawn when a conflict resolution resends it.
    public var sendId: String
    /// The fields the app changed relative to the base version (for field-level merge).
    public var changedFields: [String]

    init(record: Record) throws {
        func string(_ name: String) throws -> String {
            guard let s = record[name].stringValue else {
                throw SyncError(.corrupted, "operation '\(record.id)' has no '\(name)'")
            }
            return s
        }
        id = record.id
        sequence = record["sequence"].intValue ?? 0
        table = try string("table")
        itemId = try string("itemId")
        guard let kind = OperationKind(rawValue: try string("kind")),
              let state = OperationState(rawValue: try string("state")) else {
            throw SyncError(.corrupted, "operation '\(record.id)' has an unknown kind or state")
        }
        self.kind = kind
        self.state = state
        if let object = record["item"].objectValue { item = Record(id: itemId, fields: object) } else { item = nil }
        baseVersion = record["baseVersion"].stringValue
        attempts = Int(record["attempts"].intValue ?? 0)
        createdAt = record["createdAt"].dateValue ?? Timestamp(millisecondsSince1970: 0)
        changedAt = record["changedAt"].dateValue ?? createdAt
        transaction = record["transaction"].stringValue ?? ""
        sendId = record["sendId"].stringValue ?? record.id
        changedFields = (record["changedFields"].arrayValue ?? []).compactMap(\.stringValue)
    }

    init(id: String, sequence: Int64, table: String, itemId: String, kind: OperationKind, item: Record?,
         baseVersion: String?, transaction: String, changedFields: [String], now: Timestamp) {
        self.id = id
        self.sequence = sequence
        self.table = table
        self.itemId = itemId
        self.kind = kind
        self.item = item
        self.baseVersion = baseVersion
        self.state = .pending
        self.attempts = 0
        self.createdAt = now
        self.changedAt = now
        self.transaction = transaction
        self.sendId = id
        self.changedFields = changedFields
    }

    var record: Record {
        // Sized exactly: a larger dictionary would cost memory in every queued row.
        var fields = [String: Value](minimumCapacity: 11 + (item == nil ? 0 : 1) + (baseVersion == nil ? 0 : 1))
        fields["sequence"] = .int(sequence)
        fields["table"] = .string(table)
        fields["itemId"] = .string(itemId)
        fields["kind"] = .string(kind.rawValue)
        fields["state"] = .string(state.rawValue)
        fields["attempts"] = .int(Int64(attempts))
        fields["createdAt"] = .date(createdAt)
        fields["changedAt"] = .date(changedAt)
        fields["transaction"] = .string(transaction)
        fields["sendId"] = .string(sendId)
        fields["changedFields"] = .array(changedFields.map(Value.string))
        // The two optional fields are left out when absent, as a null field is.
        if let item { fields["item"] = .object(item.fields) }
        if let baseVersion { fields["baseVersion"] = .string(baseVersion) }
        return Record(id: id, nonNullFields: fields)
    }

    var pushOperation: PushOperation {
        PushOperation(id: sendId, table: table, itemId: itemId, kind: kind,
                      item: kind == .delete ? nil : item, baseVersion: baseVersion)
    }
}

/// An operation the remote rejected, or a conflict left for the app, as stored in `__operation_errors`.
public struct OperationError: Sendable, Hashable {
    /// The error row's id.
    public var id: String
    /// The failed operation (still in the queue, in state ``OperationState/failed``).
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

    init(record: Record) {
        id = record.id
        operationId = record["operationId"].stringValue ?? ""
        table = record["table"].stringValue ?? ""
        itemId = record["itemId"].stringValue ?? ""
        kind = OperationKind(rawValue: record["kind"].stringValue ?? "") ?? .update
        status = record["status"].intValue.map { Int($0) }
        message = record["message"].stringValue ?? ""
        serverRecord = record["serverItem"].objectValue.flatMap { OperationError.decodeRecord($0) }
        clientRecord = record["clientItem"].objectValue.map { Record(id: record["itemId"].stringValue ?? "", fields: $0) }
        createdAt = record["createdAt"].dateValue ?? Timestamp(millisecondsSince1970: 0)
    }

    init(operation: QueuedOperation, status: Int?, message: String, serverRecord: Record?, now: Timestamp) {
        id = UUID.random().uuidString
        operationId = operation.id
        table = operation.table
        itemId = operation.itemId
        kind = operation.kind
        self.status = status
        self.message = message
        self.serverRecord = serverRecord
        clientRecord = operation.item
        createdAt = now
    }

    var record: Record {
        Record(id: id, fields: [
            "operationId": .string(operationId), "table": .string(table), "itemId": .string(itemId),
            "kind": .string(kind.rawValue), "status": status.map { .int(Int64($0)) } ?? .null,
            "message": .string(message), "serverItem": serverRecord.map(OperationError.encodeRecord) ?? .null,
            "clientItem": clientRecord.map { .object($0.fields) } ?? .null, "createdAt": .date(createdAt),
        ])
    }

    /// A server record with its system properties, as an object value.
    static func encodeRecord(_ record: Record) -> Value {
        .object([
            "id": .string(record.id), "fields": .object(record.fields),
            "version": record.version.map(Value.string) ?? .null,
            "updatedAt": record.updatedAt.map(Value.date) ?? .null, "deleted": .bool(record.deleted),
        ])
    }

    static func decodeRecord(_ object: [String: Value]) -> Record? {
        guard let id = object["id"]?.stringValue else { return nil }
        return Record(id: id, fields: object["fields"]?.objectValue ?? [:], version: object["version"]?.stringValue,
                      updatedAt: object["updatedAt"]?.dateValue, deleted: object["deleted"]?.boolValue ?? false)
    }
}
