import Foundation
import OfflineSync

/// Direct writers: the same JSON text as encoding ``Wire``'s ``JSON`` trees, written straight
/// into a byte buffer. Pages and batches are written this way, so a page of a thousand
/// records costs no intermediate tree.
extension Wire {
    /// Appends `value`'s JSON text: the bytes of `Wire.json(value).encoded`.
    public static func write(_ value: Value, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d) where d.isFinite: out.append(contentsOf: "\(d)".utf8)
        case .double(let d):
            out.append(contentsOf: #"{"$double":""#.utf8)
            out.append(contentsOf: nonFiniteName(d).utf8)
            out.append(contentsOf: #""}"#.utf8)
        case .string(let s): JSON.writeString(s, into: &out)
        case .bytes(let b):
            out.append(contentsOf: #"{"$bytes":""#.utf8)
            out.append(contentsOf: Data(b).base64EncodedString().utf8)
            out.append(contentsOf: #""}"#.utf8)
        case .date(let t):
            out.append(contentsOf: #"{"$date":"#.utf8)
            out.append(contentsOf: String(t.millisecondsSince1970).utf8)
            out.append(UInt8(ascii: "}"))
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(item, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            writeObject(object, into: &out)
        }
    }

    static func writeObject(_ object: [String: Value], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        let keys = object.count < 2 ? Array(object.keys) : object.keys.sorted(by: Value.utf8Less)
        for (index, key) in keys.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSON.writeString(key.hasPrefix("$") ? "$" + key : key, into: &out)
            out.append(UInt8(ascii: ":"))
            write(object[key]!, into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Appends `record`'s JSON text: the bytes of `Wire.json(record).encoded`.
    public static func write(_ record: Record, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"id":"#.utf8)
        JSON.writeString(record.id, into: &out)
        writeVersionAndTime(of: record, into: &out)
        if record.deleted { out.append(contentsOf: #","deleted":true"#.utf8) }
        out.append(contentsOf: #","fields":"#.utf8)
        writeObject(record.fields, into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// `page`'s JSON text: the bytes of `Wire.json(page).encoded`.
    public static func encode(_ page: PullPage) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + page.records.count * 256)
        out.append(contentsOf: #"{"records":["#.utf8)
        for (index, record) in page.records.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(record, into: &out)
        }
        out.append(contentsOf: #"],"nextCursor":"#.utf8)
        JSON.writeString(page.nextCursor, into: &out)
        out.append(contentsOf: #","remaining":"#.utf8)
        out.append(contentsOf: String(page.remaining).utf8)
        out.append(contentsOf: #","cursorReset":"#.utf8)
        out.append(contentsOf: (page.cursorReset ? "true" : "false").utf8)
        if !page.removed.isEmpty {
            out.append(contentsOf: #","removed":["#.utf8)
            for (index, id) in page.removed.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(id, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"operations":[…]}`: the body of a push.
    public static func encode(operations: [PushOperation]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32 + operations.count * 320)
        out.append(contentsOf: #"{"operations":["#.utf8)
        for (index, operation) in operations.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"id":"#.utf8)
            JSON.writeString(operation.id, into: &out)
            out.append(contentsOf: #","table":"#.utf8)
            JSON.writeString(operation.table, into: &out)
            out.append(contentsOf: #","itemId":"#.utf8)
            JSON.writeString(operation.itemId, into: &out)
            out.append(contentsOf: #","kind":"#.utf8)
            JSON.writeString(operation.kind.rawValue, into: &out)
            if let item = operation.item {
                out.append(contentsOf: #","item":"#.utf8)
                write(item, into: &out)
            }
            if let base = operation.baseVersion {
                out.append(contentsOf: #","baseVersion":"#.utf8)
                JSON.writeString(base, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: "]}".utf8)
        return out
    }

    /// `{"results":[…]}`: the answer to a push.
    ///
    /// With `operations` (the push's own, in the results' order: a client that sent
    /// `Prefer: return=minimal`), an applied insert or update whose record is exactly the
    /// operation's item — its id and every field, byte for byte — is written without the
    /// record: `{"operationId", "outcome": "applied", "version"?, "updatedAt"?, "deleted"}`,
    /// and the client rebuilds the record from the operation it sent (``result(_:answering:path:)``).
    /// Every other result is written whole, so what the client rebuilds is always what the
    /// whole answer would have carried.
    public static func encode(results: [PushResult], minimalFor operations: [PushOperation]? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32 + results.count * (operations == nil ? 320 : 96))
        out.append(contentsOf: #"{"results":["#.utf8)
        for (index, result) in results.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"operationId":"#.utf8)
            JSON.writeString(result.operationId, into: &out)
            switch result.outcome {
            case .applied(let record) where operations.map({ index < $0.count && isEcho(record, of: $0[index], for: result) }) == true:
                out.append(contentsOf: #","outcome":"applied""#.utf8)
                writeVersionAndTime(of: record, into: &out)
                out.append(contentsOf: (record.deleted ? #","deleted":true"# : #","deleted":false"#).utf8)
            case .applied(let record):
                out.append(contentsOf: #","outcome":"applied","record":"#.utf8)
                write(record, into: &out)
            case .conflict(let record):
                out.append(contentsOf: #","outcome":"conflict","record":"#.utf8)
                write(record, into: &out)
            case let .rejected(reason, status):
                // The code as the reason's prefix, as in `json(_:)` of a result.
                out.append(contentsOf: #","outcome":"rejected","reason":"#.utf8)
                JSON.writeString(wireReason(reason, code: result.rejectionCode), into: &out)
                if let status {
                    out.append(contentsOf: #","status":"#.utf8)
                    out.append(contentsOf: String(status).utf8)
                }
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: "]}".utf8)
        return out
    }

    /// Appends `,"version":…` and `,"updatedAt":…` for the ones `record` has.
    private static func writeVersionAndTime(of record: Record, into out: inout [UInt8]) {
        if let version = record.version {
            out.append(contentsOf: #","version":"#.utf8)
            JSON.writeString(version, into: &out)
        }
        if let updatedAt = record.updatedAt {
            out.append(contentsOf: #","updatedAt":"#.utf8)
            out.append(contentsOf: String(updatedAt.millisecondsSince1970).utf8)
        }
    }

    /// Whether `record` is `operation`'s item as sent: the operation this result answers, an
    /// insert or update, with the same id and exactly the same fields.
    static func isEcho(_ record: Record, of operation: PushOperation, for result: PushResult) -> Bool {
        ExactString.sameBytes(operation.id, result.operationId)
            && operation.storedRecord(version: record.version, updatedAt: record.updatedAt, deleted: record.deleted) == record
    }
}
