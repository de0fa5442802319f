import OfflineSync
import OfflineSyncStoreKit

/// The binary push of `POST /v2/push` (Docs/Protocol.md, "The binary push"): a batch of
/// operations and its answer in StoreKit's ``ValueCodec``, framed as the page stream is, so
/// a pushed record crosses the wire without a text form. The JSON of `/v1/push` was 40% of
/// the server's work on a push of 1,000-operation batches (`perf`, push-10k: parsing the body,
/// building each operation, writing the answer), and a fifth of the client's.
///
/// A body is a header (four magic bytes and ``version``), then frames — a type byte, the
/// payload's length as a 4-byte little-endian integer, the payload — and an end frame, so a
/// body cut short is never read as a smaller batch.
///
/// The operations (`OSPU` 1):
///
/// | type | payload |
/// |---|---|
/// | 1 operation | an array: `[id, table, itemId, kind ("insert", "update", "delete"), baseVersion (string or null), hasItem (bool)]` |
/// | 2 item | the operation's item, one record (``ValueCodec/encode(_:)-(Record)``); follows its operation exactly when `hasItem` |
/// | 3 end | empty |
///
/// The answer (`OSPA` 1), one result per operation in order:
///
/// | type | payload |
/// |---|---|
/// | 1 result | an array: `[operationId, outcome, …]`, by outcome — 0 applied, as sent: `version` (string or null), `updatedAt` (date or null), `deleted` (bool), the record being the operation's item under its item id with those; 1 applied and 2 conflict: nothing more, a record frame follows; 3 rejected: `reason` (string), `status` (int or null), and optionally `code` (string or null) |
/// | 2 record | the record of an applied (1) or conflict (2) result |
/// | 3 end | empty |
///
/// A rejection's code (``PushResult/rejectionCode``) is written as its reason's prefix,
/// `"<code>: <reason>"`: a reader of version 1 before codes had a type refuses a rejected
/// result of five elements, and the format has no flags to say one is there. This reader
/// takes a fifth element, `code`, all the same, so a later server may send it apart.
public enum PushBatch {
    /// The media type of a body of operations (`Content-Type`), with its version parameter
    /// (`application/vnd.offlinesync.push; version=1`).
    public static let mediaType = "application/vnd.offlinesync.push"
    /// The media type of the answer (`Accept`, and the answer's `Content-Type`).
    public static let resultsMediaType = "application/vnd.offlinesync.push-results"
    /// The format version this build writes and reads, of both.
    public static let version: UInt8 = 1
    /// The first bytes of a body of operations.
    public static let operationsHeader: [UInt8] = Array("OSPU".utf8) + [version]
    /// The first bytes of an answer.
    public static let resultsHeader: [UInt8] = Array("OSPA".utf8) + [version]

    enum FrameType: UInt8 {
        case head = 1, record = 2, end = 3
    }

    private enum Outcome: Int64 {
        case echo = 0, applied = 1, conflict = 2, rejected = 3
    }

    // MARK: Operations

    /// The body that carries `operations`.
    public static func encode(operations: [PushOperation]) -> [UInt8] {
        var out = operationsHeader
        out.reserveCapacity(16 + operations.count * 280)
        for operation in operations {
            Frames.write(FrameType.head.rawValue, into: &out) { out in
                ValueCodec.write(.array([
                    .string(operation.id), .string(operation.table), .string(operation.itemId),
                    .string(operation.kind.rawValue), operation.baseVersion.map(Value.string) ?? .null,
                    .bool(operation.item != nil),
                ]), into: &out)
            }
            if let item = operation.item {
                Frames.write(FrameType.record.rawValue, into: &out) { ValueCodec.write(item, into: &$0) }
            }
        }
        Frames.write(FrameType.end.rawValue, into: &out) { _ in }
        return out
    }

    /// The operations a body carries. Anything else — another magic or version, an unknown
    /// frame, an operation without the item it announces or an item without its operation,
    /// a head that is not six values of the right kinds, an unknown kind, a value that does
    /// not decode, a NaN, no end frame, bytes after it — is ``SyncError/Code/invalidValue``
    /// naming the operation or the byte.
    ///
    /// Each item's fields are decoded with room for `extraFields` more (a server that adds
    /// its own to each row it stores).
    public static func decodeOperations(_ buffer: UnsafeRawBufferPointer, reservingExtraFields extraFields: Int = 0) throws -> [PushOperation] {
        var reader = try Frames.Reader(buffer, header: operationsHeader, what: "the push body")
        var operations: [PushOperation] = []
        while true {
            guard let frame = try reader.next() else { throw reader.refused("the body ends without its end frame", at: reader.offset) }
            switch FrameType(rawValue: frame.type) {
            case .end?:
                guard frame.payload.isEmpty else { throw reader.refused("the end frame has a payload", at: frame.at) }
                guard reader.atEnd else { throw reader.refused("bytes follow the end frame", at: reader.offset) }
                return operations
            case .head?:
                let path = "operations[\(operations.count)]"
                guard case .array(let head) = try value(frame.payload, reader, at: frame.at), head.count == 6,
                      case .string(let id) = head[0], case .string(let table) = head[1], case .string(let itemId) = head[2],
                      case .string(let kindName) = head[3], case .bool(let hasItem) = head[5] else {
                    throw reader.refused("\(path): an operation is an array of id, table, itemId, kind, baseVersion and hasItem", at: frame.at)
                }
                guard let kind = OperationKind(rawValue: kindName) else { throw reader.refused("\(path): unknown kind '\(kindName)'", at: frame.at) }
                let baseVersion: String?
                switch head[4] {
                case .null: baseVersion = nil
                case .string(let base): baseVersion = base
                default: throw reader.refused("\(path): baseVersion must be a string or null", at: frame.at)
                }
                var item: Record?
                if hasItem {
                    guard let next = try reader.next(), next.type == FrameType.record.rawValue else {
                        throw reader.refused("\(path): the item it announces does not follow it", at: reader.offset)
                    }
                    item = try record(next.payload, reader, at: next.at, reservingExtra: extraFields)
                }
                operations.append(PushOperation(id: id, table: table, itemId: itemId, kind: kind, item: item, baseVersion: baseVersion))
            case .record?:
                throw reader.refused("an item frame follows no operation that announces one", at: frame.at)
            case nil:
                throw reader.refused("unknown frame type \(frame.type)", at: frame.at)
            }
        }
    }

    // MARK: Results

    /// The answer carrying `results`. An applied insert or update whose record is exactly
    /// its operation's item (`operations`, the push's own, in the results' order) goes as its
    /// version, time and deleted flag only, and the client rebuilds the record from what it
    /// sent, as `/v1/push` does for `Prefer: return=minimal`.
    public static func encode(results: [PushResult], answering operations: [PushOperation]) -> [UInt8] {
        var out = resultsHeader
        out.reserveCapacity(16 + results.count * 64)
        for (index, result) in results.enumerated() {
            var record: Record?
            Frames.write(FrameType.head.rawValue, into: &out) { out in
                let id = Value.string(result.operationId)
                switch result.outcome {
                case .applied(let applied) where index < operations.count && Wire.isEcho(applied, of: operations[index], for: result):
                    ValueCodec.write(.array([
                        id, .int(Outcome.echo.rawValue), applied.version.map(Value.string) ?? .null,
                        applied.updatedAt.map(Value.date) ?? .null, .bool(applied.deleted),
                    ]), into: &out)
                case .applied(let applied):
                    ValueCodec.write(.array([id, .int(Outcome.applied.rawValue)]), into: &out)
                    record = applied
                case .conflict(let server):
                    ValueCodec.write(.array([id, .int(Outcome.conflict.rawValue)]), into: &out)
                    record = server
                case let .rejected(reason, status):
                    ValueCodec.write(.array([id, .int(Outcome.rejected.rawValue), .string(Wire.wireReason(reason, code: result.rejectionCode)),
                                             status.map { .int(Int64($0)) } ?? .null]), into: &out)
                }
            }
            if let record {
                Frames.write(FrameType.record.rawValue, into: &out) { ValueCodec.write(record, into: &$0) }
            }
        }
        Frames.write(FrameType.end.rawValue, into: &out) { _ in }
        return out
    }

    /// The results an answer carries, rebuilding each applied-as-sent record from the
    /// operation it answers (`operations`, in order). Malformed bytes are
    /// ``SyncError/Code/invalidValue`` as in ``decodeOperations(_:reservingExtraFields:)``, and so is an
    /// applied-as-sent result that names another operation than the one at its place, a
    /// delete (whose record no operation carries), or an answer with more or fewer results
    /// than `operations`.
    public static func decodeResults(_ buffer: UnsafeRawBufferPointer, answering operations: [PushOperation]) throws -> [PushResult] {
        var reader = try Frames.Reader(buffer, header: resultsHeader, what: "the push answer")
        var results: [PushResult] = []
        results.reserveCapacity(operations.count)
        while true {
            guard let frame = try reader.next() else { throw reader.refused("the answer ends without its end frame", at: reader.offset) }
            switch FrameType(rawValue: frame.type) {
            case .end?:
                guard frame.payload.isEmpty else { throw reader.refused("the end frame has a payload", at: frame.at) }
                guard reader.atEnd else { throw reader.refused("bytes follow the end frame", at: reader.offset) }
                guard results.count == operations.count else {
                    throw reader.refused("the answer holds \(results.count) results for \(operations.count) operations", at: frame.at)
                }
                return results
            case .head?:
                let path = "results[\(results.count)]"
                guard case .array(let head) = try value(frame.payload, reader, at: frame.at), head.count >= 2,
                      case .string(let id) = head[0], case .int(let code) = head[1], let outcome = Outcome(rawValue: code) else {
                    throw reader.refused("\(path): a result is an array of operationId, outcome and its details", at: frame.at)
                }
                func followingRecord() throws -> Record {
                    guard head.count == 2 else { throw reader.refused("\(path): an applied or conflict result holds only its id and outcome", at: frame.at) }
                    guard let next = try reader.next(), next.type == FrameType.record.rawValue else {
                        throw reader.refused("\(path): the result's record does not follow it", at: reader.offset)
                    }
                    return try record(next.payload, reader, at: next.at)
                }
                switch outcome {
                case .echo:
                    guard head.count == 5, case .bool(let deleted) = head[4] else {
                        throw reader.refused("\(path): an applied-as-sent result is operationId, 0, version, updatedAt and deleted", at: frame.at)
                    }
                    let version: String?, updatedAt: Timestamp?
                    switch head[2] {
                    case .null: version = nil
                    case .string(let text): version = text
                    default: throw reader.refused("\(path): version must be a string or null", at: frame.at)
                    }
                    switch head[3] {
                    case .null: updatedAt = nil
                    case .date(let time): updatedAt = time
                    default: throw reader.refused("\(path): updatedAt must be a date or null", at: frame.at)
                    }
                    let index = results.count
                    guard index < operations.count, ExactString.sameBytes(operations[index].id, id),
                          let record = operations[index].storedRecord(version: version, updatedAt: updatedAt, deleted: deleted) else {
                        throw reader.refused("\(path): an applied-as-sent result answers only the insert or update at its place", at: frame.at)
                    }
                    results.append(PushResult(operationId: id, outcome: .applied(record)))
                case .applied:
                    results.append(PushResult(operationId: id, outcome: .applied(try followingRecord())))
                case .conflict:
                    results.append(PushResult(operationId: id, outcome: .conflict(serverRecord: try followingRecord())))
                case .rejected:
                    results.append(try rejected(head, id: id, path: path, reader, at: frame.at))
                }
            case .record?:
                throw reader.refused("a record frame follows no result that announces one", at: frame.at)
            case nil:
                throw reader.refused("unknown frame type \(frame.type)", at: frame.at)
            }
        }
    }

    /// A rejected result's head, `[operationId, 3, reason, status]` or with a fifth element,
    /// `code` (string or null); its code is read as ``Wire/rejection(reason:code:)`` reads it.
    private static func rejected(_ head: [Value], id: String, path: String, _ reader: Frames.Reader, at offset: Int) throws -> PushResult {
        guard head.count == 4 || head.count == 5, case .string(let sentReason) = head[2] else {
            throw reader.refused("\(path): a rejected result is operationId, 3, reason, status and optionally code", at: offset)
        }
        let status: Int?
        switch head[3] {
        case .null: status = nil
        case .int(let number): status = Int(exactly: number)
        default: throw reader.refused("\(path): status must be an int or null", at: offset)
        }
        var sentCode: String?
        if head.count == 5 {
            switch head[4] {
            case .null: sentCode = nil
            case .string(let text): sentCode = text
            default: throw reader.refused("\(path): code must be a string or null", at: offset)
            }
        }
        let rejection = Wire.rejection(reason: sentReason, code: sentCode)
        return PushResult(operationId: id, outcome: .rejected(reason: rejection.reason, status: status), rejectionCode: rejection.code)
    }

    // MARK: Payloads

    private static func value(_ payload: UnsafeRawBufferPointer, _ reader: Frames.Reader, at offset: Int) throws -> Value {
        do { return try ValueCodec.decode(payload) } catch let error as SyncError {
            throw reader.refused("a value does not decode: \(error.message)", at: offset)
        }
    }

    /// A record frame's record. The codec keeps every bit pattern; a value may not be NaN (no
    /// store keeps one).
    private static func record(_ payload: UnsafeRawBufferPointer, _ reader: Frames.Reader, at offset: Int,
                               reservingExtra extra: Int = 0) throws -> Record {
        do {
            let record = try ValueCodec.decodeRecord(payload, reservingExtra: extra)
            for (name, value) in record.fields { try value.validate(path: name) }
            return record
        } catch let error as SyncError {
            throw reader.refused("a record does not decode: \(error.message)", at: offset)
        }
    }
}
