import Foundation
import OfflineSync
import OfflineSyncWire

/// The Datasync / Azure Mobile Apps entity format: a flat JSON object with the fields and the
/// system properties `id`, `updatedAt` (ISO 8601, milliseconds, UTC), `version` and `deleted`.
///
/// Values are written as plain JSON: numbers, strings, booleans, null, arrays and objects;
/// a date as an ISO 8601 string and bytes as a base64 string. Read back, a string becomes a
/// date or bytes when the table's schema declares the field so; otherwise it stays a string.
enum DatasyncFormat {
    static func json(_ record: Record, select: [String]? = nil) -> JSON {
        var members: [(key: String, value: JSON)] = []
        func wanted(_ name: String) -> Bool { select.map { $0.contains(name) } ?? true }
        if wanted(SystemField.id) { members.append((SystemField.id, .string(record.id))) }
        if wanted(SystemField.updatedAt) {
            members.append((SystemField.updatedAt, record.updatedAt.map { .string(WireDate.iso8601($0)) } ?? .null))
        }
        if wanted(SystemField.version) { members.append((SystemField.version, record.version.map { .string(version($0)) } ?? .null)) }
        if wanted(SystemField.deleted) { members.append((SystemField.deleted, .bool(record.deleted))) }
        for name in record.fields.keys.sorted(by: Value.utf8Less) where wanted(name) && !SystemField.all.contains(name) {
            members.append((name, json(record.fields[name]!)))
        }
        return .object(members)
    }

    /// A version as the tables API shows it: the base64 of the stored version's UTF-8.
    ///
    /// Datasync models may declare `byte[] Version` (CommunityToolkit `EntityResolver.cs`;
    /// its `PullAsync_ViaDbSet_Works_ByteVersion` test), which needs valid base64; stored
    /// versions (`1349d25f-5`) are not. Stores keep their versions as they are, and the
    /// native API shows them unchanged.
    static func version(_ stored: String) -> String {
        Data(stored.utf8).base64EncodedString()
    }

    /// The stored version a tables-API version names: the decoded base64, or — for a client
    /// still holding a version from before versions were base64 — the text itself (stored
    /// versions contain `-`, which base64 never does, so the two never collide).
    static func storedVersion(_ shown: String) -> String {
        guard let data = Data(base64Encoded: shown), let text = String(data: data, encoding: .utf8) else { return shown }
        return text
    }

    /// `predicate` with every version it compares with written as stored, so
    /// `version eq '<a version this API showed>'` finds the row.
    static func storedVersions(in predicate: QueryPredicate) -> QueryPredicate {
        func stored(_ value: Value) -> Value {
            if case .string(let shown) = value { return .string(storedVersion(shown)) }
            return value
        }
        switch predicate {
        case let .compare(field, op, value) where field == SystemField.version:
            return .compare(field, op, stored(value))
        case let .isIn(field, values) where field == SystemField.version:
            return .isIn(field, values.map(stored))
        case .and(let parts): return .and(parts.map(storedVersions))
        case .or(let parts): return .or(parts.map(storedVersions))
        case .not(let part): return .not(storedVersions(in: part))
        default: return predicate
        }
    }

    static func json(_ value: Value) -> JSON {
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .number(String(i))
        // A Datasync client reads numbers only: an infinity has no form it would read, so it
        // answers null there (the native API carries it as {"$double": "Infinity"}).
        case .double(let d): return d.isFinite ? Wire.json(value) : .null
        case .string(let s): return .string(s)
        case .bytes(let b): return .string(Data(b).base64EncodedString())
        case .date(let t): return .string(WireDate.iso8601(t))
        case .array(let items): return .array(items.map(json))
        case .object(let object): return .object(object.keys.sorted(by: Value.utf8Less).map { ($0, json(object[$0]!)) })
        }
    }

    /// The record an entity body describes. System properties other than `id` are ignored
    /// (the server assigns them). Throws ``SyncError/Code/invalidValue`` naming the field.
    static func record(_ json: JSON, schema: TableSchema?, fallbackId: String?) throws -> Record {
        guard case .object(let members) = json else { throw SyncError(.invalidValue, "the entity must be a JSON object") }
        var id = fallbackId
        var fields: [String: Value] = [:]
        for (key, member) in members {
            switch key {
            case SystemField.id:
                guard case .string(let text) = member else { throw SyncError(.invalidValue, "'id' must be a string") }
                id = text
            case SystemField.updatedAt, SystemField.version, SystemField.deleted:
                continue
            default:
                let type = schema?.fields.first { $0.name == key }?.type
                fields[key] = try value(member, type: type, path: key)
            }
        }
        return Record(id: id ?? UUID().uuidString.lowercased(), fields: fields)
    }

    static func value(_ json: JSON, type: FieldType?, path: String) throws -> Value {
        switch json {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .number(let text):
            if type != .double, let int = Int64(text) { return .int(int) }
            guard let double = Double(text), double.isFinite else { throw SyncError(.invalidValue, "'\(path)' is not a finite number") }
            return .double(double)
        case .string(let text):
            if type == .date {
                guard let date = WireDate.parseISO8601(text) else { throw SyncError(.invalidValue, "'\(path)' is not an ISO 8601 date-time") }
                return .date(date)
            }
            if type == .bytes {
                guard let data = Data(base64Encoded: text) else { throw SyncError(.invalidValue, "'\(path)' is not base64") }
                return .bytes(Array(data))
            }
            return .string(text)
        case .array(let items):
            return .array(try items.enumerated().map { try value($1, type: nil, path: "\(path)[\($0)]") })
        case .object(let members):
            var object: [String: Value] = [:]
            for (key, member) in members { object[key] = try value(member, type: nil, path: "\(path).\(key)") }
            return .object(object)
        }
    }
}
