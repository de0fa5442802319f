/// A row of `__operation_errors` (Azure's `MS_TableOperationErrors`): why an operation
/// failed, one row per failure, read and written only as ``OperationError``.
struct OperationErrorRow: StoredRow {
    static let table = "__operation_errors"
    enum CodingKeys: String, CodingKey {
        case id, operationId, table, itemId, kind, status, message, serverItem, clientItem, createdAt, compensated, code
    }

    /// A server record with its system properties, as the `serverItem` object keeps it.
    struct ServerItem: Codable {
        var id: String
        var fields: [String: Value]
        var version: String?
        var updatedAt: Timestamp?
        var deleted: Bool
    }

    var id: String
    var operationId: String
    var table: String
    var itemId: String
    var kind: OperationKind
    /// The HTTP (or error) status the remote answered with.
    var status: Int?
    var message: String
    var serverItem: ServerItem?
    /// The client's item's fields (its id is `itemId`).
    var clientItem: [String: Value]?
    var createdAt: Timestamp
    /// Whether the operation was settled by a compensating write; absent in rows written
    /// before refusals existed (read as `false`).
    var compensated: Bool?
    /// The ``SyncError/Code`` recorded with the failure (its name, for example
    /// `attachmentMissing`: the remote's code for its rejection); absent when there was
    /// none, and in rows written before codes were kept (their code follows from `status`).
    var code: String?

    static let schema = TableSchema(table, fields: [
        column(.operationId, .string, indexed: true),
        column(.table, .string, indexed: true),
        column(.itemId, .string),
        column(.kind, .string),
        column(.status, .int),
        column(.message, .string),
        column(.serverItem, .object),
        column(.clientItem, .object),
        column(.createdAt, .date),
        column(.compensated, .bool),
        column(.code, .string),
    ], undeclaredFields: .reject)

    init(_ error: OperationError) {
        id = error.id
        operationId = error.operationId
        table = error.table
        itemId = error.itemId
        kind = error.kind
        status = error.status
        message = error.message
        serverItem = error.serverRecord.map {
            ServerItem(id: $0.id, fields: $0.fields, version: $0.version, updatedAt: $0.updatedAt, deleted: $0.deleted)
        }
        clientItem = error.clientRecord?.fields
        createdAt = error.createdAt
        compensated = error.compensated ? true : nil
        code = error.rejectionCode?.description
    }
}

extension OperationError {
    /// Reads an `__operation_errors` row; ``SyncError/Code/corrupted`` when it does not decode.
    init(row record: Record) throws {
        let row = try OperationErrorRow(row: record)
        id = row.id
        operationId = row.operationId
        table = row.table
        itemId = row.itemId
        kind = row.kind
        status = row.status
        message = row.message
        serverRecord = row.serverItem.map {
            Record(id: $0.id, fields: $0.fields, version: $0.version, updatedAt: $0.updatedAt, deleted: $0.deleted)
        }
        clientRecord = row.clientItem.map { Record(id: row.itemId, fields: $0) }
        createdAt = row.createdAt
        compensated = row.compensated ?? false
        rejectionCode = row.code.flatMap { SyncError.Code(name: $0) }
    }
}
