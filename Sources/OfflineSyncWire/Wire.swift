import Foundation
import OfflineSync

/// The native protocol's JSON encoding of values, records, predicates, pushes and pulls —
/// lossless for every ``Value`` (see `Docs/Protocol.md`, "JSON encoding"):
///
/// - `null`, booleans, strings and arrays as themselves;
/// - an ``Value/int(_:)`` as a JSON integer (no `.`, no exponent), any 64-bit value exactly;
/// - a ``Value/double(_:)`` as a JSON number that always has a `.` or an exponent (`1.0`,
///   `-0.0`, `1e+300`), in its shortest form that reads back to the same bits;
/// - bytes as `{"$bytes": "<base64>"}`, a date as `{"$date": <ms since 1970>}`, an infinity
///   as `{"$double": "Infinity"}` or `{"$double": "-Infinity"}` (JSON has no number for it; a
///   peer older than this form refuses it as a `$` key, never reads it as something else);
/// - an object as a JSON object whose keys starting with `$` get one more `$` (`"$x"` is
///   written `"$$x"`), so the two forms above are never ambiguous.
///
/// Decoding refuses anything else with ``SyncError/Code/invalidValue`` naming where.
public enum Wire {
    // MARK: Values

    /// The JSON for a value.
    public static func json(_ value: Value) -> JSON {
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .number(String(i))
        case .double(let d): return d.isFinite ? .number("\(d)") : .object([("$double", .string(nonFiniteName(d)))])
        case .string(let s): return .string(s)
        case .bytes(let b): return .object([("$bytes", .string(Data(b).base64EncodedString()))])
        case .date(let t): return .object([("$date", .number(String(t.millisecondsSince1970)))])
        case .array(let items): return .array(items.map(json))
        case .object(let object):
            let keys = object.keys.sorted(by: Value.utf8Less)
            return .object(keys.map { key in (key.hasPrefix("$") ? "$" + key : key, json(object[key]!)) })
        }
    }

    /// The value a JSON document encodes. `path` names it in errors.
    public static func value(_ json: JSON, path: String = "value") throws -> Value {
        switch json {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .string(let s): return .string(s)
        case .number(let text):
            if text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                guard let d = Double(text), d.isFinite else { throw invalid(path, "the number \(text) is out of a double's range") }
                return .double(d)
            }
            guard let i = Int64(text) else { throw invalid(path, "the integer \(text) is out of a 64-bit integer's range") }
            return .int(i)
        case .array(let items):
            return .array(try items.enumerated().map { try value($1, path: "\(path)[\($0)]") })
        case .object(let members):
            if members.count == 1, let special = try tagged(members[0].key, members[0].value, path: path) { return special }
            var object: [String: Value] = [:]
            object.reserveCapacity(members.count)
            for (key, member) in members {
                var name = key
                if key.hasPrefix("$") {
                    guard key.hasPrefix("$$") else { throw invalid(path, "the key '\(key)' starts with '$' (write '$$' for a literal '$')") }
                    name = String(key.dropFirst())
                }
                guard object.updateValue(try value(member, path: "\(path).\(name)"), forKey: name) == nil else {
                    throw invalid(path, "the key '\(name)' appears twice")
                }
            }
            return .object(object)
        }
    }

    /// `{"$bytes": …}` or `{"$date": …}`, or `nil` for an ordinary one-member object.
    private static func tagged(_ key: String, _ member: JSON, path: String) throws -> Value? {
        switch key {
        case "$bytes":
            guard case .string(let text) = member, let data = Data(base64Encoded: text) else {
                throw invalid(path, "$bytes takes a base64 string")
            }
            return .bytes([UInt8](data))
        case "$date":
            guard case .number(let text) = member, let ms = Int64(text) else {
                throw invalid(path, "$date takes whole milliseconds since 1970")
            }
            return .date(Timestamp(millisecondsSince1970: ms))
        case "$double":
            switch member {
            case .string("Infinity"): return .double(.infinity)
            case .string("-Infinity"): return .double(-.infinity)
            case .string("NaN"): throw invalid(path, "NaN is not a value any store can keep")
            default: throw invalid(path, "$double takes \"Infinity\" or \"-Infinity\" (finite doubles are JSON numbers)")
            }
        default:
            return nil
        }
    }

    /// How `{"$double": …}` names a double JSON has no number for.
    static func nonFiniteName(_ d: Double) -> String {
        d.isNaN ? "NaN" : d < 0 ? "-Infinity" : "Infinity"
    }

    static func invalid(_ path: String, _ message: String) -> SyncError {
        SyncError(.invalidValue, "\(path): \(message)")
    }

    // MARK: Records

    /// `{"id", "version"?, "updatedAt"? (ms), "deleted"? (true only), "fields"}`.
    public static func json(_ record: Record) -> JSON {
        var members: [(key: String, value: JSON)] = [("id", .string(record.id))]
        if let version = record.version { members.append(("version", .string(version))) }
        if let updatedAt = record.updatedAt { members.append(("updatedAt", .number(String(updatedAt.millisecondsSince1970)))) }
        if record.deleted { members.append(("deleted", .bool(true))) }
        members.append(("fields", json(.object(record.fields))))
        return .object(members)
    }

    /// The record a JSON object encodes.
    public static func record(_ json: JSON, path: String = "record") throws -> Record {
        let reader = try ObjectReader(json, path: path, allowed: ["id", "version", "updatedAt", "deleted", "fields"])
        let id = try reader.string("id")
        let version = try reader.optionalString("version")
        let updatedAt = try reader.optionalInt("updatedAt").map(Timestamp.init(millisecondsSince1970:))
        let deleted = try reader.optionalBool("deleted") ?? false
        var fields: [String: Value] = [:]
        if let raw = reader["fields"] {
            guard case .object(let object) = try value(raw, path: "\(path).fields") else {
                throw invalid("\(path).fields", "must be an object")
            }
            fields = object
        }
        return Record(id: id, fields: fields, version: version, updatedAt: updatedAt, deleted: deleted)
    }

    // MARK: Predicates

    /// `{"op": "all" | "compare" | "in" | "isNull" | "contains" | "hasPrefix" | "hasSuffix" | "and" | "or" | "not"
    /// | "compareExpressions" | "isNullExpression", …}` (the last two in Wire+Expressions.swift).
    public static func json(_ predicate: QueryPredicate) -> JSON {
        switch predicate {
        case .all: return .object([("op", .string("all"))])
        case let .compare(field, op, literal):
            return .object([("op", .string("compare")), ("field", .string(field)), ("cmp", .string(op.rawValue)), ("value", json(literal))])
        case let .isIn(field, literals):
            return .object([("op", .string("in")), ("field", .string(field)), ("values", .array(literals.map(json)))])
        case .isNull(let field):
            return .object([("op", .string("isNull")), ("field", .string(field))])
        case let .contains(field, needle):
            return .object([("op", .string("contains")), ("field", .string(field)), ("value", .string(needle))])
        case let .hasPrefix(field, prefix):
            return .object([("op", .string("hasPrefix")), ("field", .string(field)), ("value", .string(prefix))])
        case let .hasSuffix(field, suffix):
            return .object([("op", .string("hasSuffix")), ("field", .string(field)), ("value", .string(suffix))])
        case .and(let parts): return .object([("op", .string("and")), ("of", .array(parts.map(json)))])
        case .or(let parts): return .object([("op", .string("or")), ("of", .array(parts.map(json)))])
        case .not(let inner): return .object([("op", .string("not")), ("of", json(inner))])
        case .compareExpressions, .isNullExpression: return expressionPredicateJSON(predicate)!
        }
    }

    /// The predicate a JSON object encodes.
    public static func predicate(_ json: JSON, path: String = "predicate") throws -> QueryPredicate {
        guard case .object = json else { throw invalid(path, "must be an object") }
        guard case .string(let op)? = json["op"] else { throw invalid(path, "needs a string 'op'") }
        switch op {
        case "all":
            _ = try ObjectReader(json, path: path, allowed: ["op"])
            return .all
        case "compare":
            let reader = try ObjectReader(json, path: path, allowed: ["op", "field", "cmp", "value"])
            let name = try reader.string("cmp")
            guard let comparison = ComparisonOperator(rawValue: name) else { throw invalid(path, "unknown comparison '\(name)'") }
            return .compare(try reader.string("field"), comparison, try value(try reader.required("value"), path: "\(path).value"))
        case "in":
            let reader = try ObjectReader(json, path: path, allowed: ["op", "field", "values"])
            guard case .array(let items) = try reader.required("values") else { throw invalid(path, "'values' must be an array") }
            return .isIn(try reader.string("field"), try items.enumerated().map { try value($1, path: "\(path).values[\($0)]") })
        case "isNull":
            return .isNull(try ObjectReader(json, path: path, allowed: ["op", "field"]).string("field"))
        case "contains", "hasPrefix", "hasSuffix":
            let reader = try ObjectReader(json, path: path, allowed: ["op", "field", "value"])
            let field = try reader.string("field"), text = try reader.string("value")
            switch op {
            case "contains": return .contains(field, text)
            case "hasPrefix": return .hasPrefix(field, text)
            default: return .hasSuffix(field, text)
            }
        case "and", "or":
            let reader = try ObjectReader(json, path: path, allowed: ["op", "of"])
            guard case .array(let items) = try reader.required("of") else { throw invalid(path, "'of' must be an array") }
            let parts = try items.enumerated().map { try predicate($1, path: "\(path).of[\($0)]") }
            return op == "and" ? .and(parts) : .or(parts)
        case "not":
            let reader = try ObjectReader(json, path: path, allowed: ["op", "of"])
            return .not(try predicate(try reader.required("of"), path: "\(path).of"))
        default:
            if let predicate = try expressionPredicate(op, json, path: path) { return predicate }
            throw invalid(path, "unknown op '\(op)'")
        }
    }

    // MARK: Push

    /// `{"id", "table", "itemId", "kind", "item"?, "baseVersion"?}`.
    public static func json(_ operation: PushOperation) -> JSON {
        var members: [(key: String, value: JSON)] = [
            ("id", .string(operation.id)), ("table", .string(operation.table)), ("itemId", .string(operation.itemId)),
            ("kind", .string(operation.kind.rawValue)),
        ]
        if let item = operation.item { members.append(("item", json(item))) }
        if let base = operation.baseVersion { members.append(("baseVersion", .string(base))) }
        return .object(members)
    }

    /// The operation a JSON object encodes.
    public static func operation(_ json: JSON, path: String = "operation") throws -> PushOperation {
        let reader = try ObjectReader(json, path: path, allowed: ["id", "table", "itemId", "kind", "item", "baseVersion"])
        let kindName = try reader.string("kind")
        guard let kind = OperationKind(rawValue: kindName) else { throw invalid(path, "unknown kind '\(kindName)'") }
        return PushOperation(id: try reader.string("id"), table: try reader.string("table"), itemId: try reader.string("itemId"),
                             kind: kind, item: try reader["item"].map { try record($0, path: "\(path).item") },
                             baseVersion: try reader.optionalString("baseVersion"))
    }

    /// `{"operationId", "outcome": "applied" | "conflict" | "rejected", "record"?, "reason"?, "status"?}`.
    /// A rejection's code (``PushResult/rejectionCode``) goes as the reason's prefix,
    /// `"<code>: <reason>"`, which every reader understands (see ``rejection(reason:code:)``).
    public static func json(_ result: PushResult) -> JSON {
        var members: [(key: String, value: JSON)] = [("operationId", .string(result.operationId))]
        switch result.outcome {
        case .applied(let record):
            members += [("outcome", .string("applied")), ("record", json(record))]
        case .conflict(let server):
            members += [("outcome", .string("conflict")), ("record", json(server))]
        case let .rejected(reason, status):
            members += [("outcome", .string("rejected")), ("reason", .string(wireReason(reason, code: result.rejectionCode)))]
            if let status { members.append(("status", .number(String(status)))) }
        }
        return .object(members)
    }

    /// The result a JSON object encodes. An applied result without its record (the minimal
    /// form of ``encode(results:minimalFor:)``) is rebuilt from `operation`, the one it
    /// answers; without that operation, or for a delete, or when the ids differ, it is refused.
    /// A rejection's code is read from its `code` member (a string or null, accepted from any
    /// server though this one does not send it) or else its reason's `<code>: ` prefix, and
    /// taken off the reason (``PushResult/rejectionCode``).
    public static func result(_ json: JSON, answering operation: PushOperation? = nil, path: String = "result") throws -> PushResult {
        let reader = try ObjectReader(json, path: path, allowed: ["operationId", "outcome", "record", "reason", "status", "code",
                                                                   "version", "updatedAt", "deleted"])
        let id = try reader.string("operationId")
        let outcome = try reader.string("outcome")
        let minimal = ["version", "updatedAt", "deleted"].filter { reader[$0] != nil }
        if outcome != "applied" || reader["record"] != nil, let member = minimal.first {
            throw invalid(path, "'\(member)' belongs only to an applied result without its record")
        }
        if outcome != "rejected", reader["code"] != nil { throw invalid(path, "'code' belongs only to a rejected result") }
        switch outcome {
        case "applied" where reader["record"] == nil:
            guard reader["deleted"] != nil else { throw invalid(path, "'deleted' is missing") }
            let version = try reader.optionalString("version")
            let updatedAt = try reader.optionalInt("updatedAt").map(Timestamp.init(millisecondsSince1970:))
            let deleted = try reader.optionalBool("deleted") ?? false
            guard let operation, ExactString.sameBytes(operation.id, id),
                  let record = operation.storedRecord(version: version, updatedAt: updatedAt, deleted: deleted) else {
                throw invalid(path, "an applied result without its record answers only the insert or update it names")
            }
            return PushResult(operationId: id, outcome: .applied(record))
        case "applied": return PushResult(operationId: id, outcome: .applied(try record(try reader.required("record"), path: "\(path).record")))
        case "conflict": return PushResult(operationId: id, outcome: .conflict(serverRecord: try record(try reader.required("record"), path: "\(path).record")))
        case "rejected":
            let status = try reader.optionalInt("status").map { Int($0) }
            let (reason, code) = rejection(reason: try reader.string("reason"), code: try reader.optionalString("code"))
            return PushResult(operationId: id, outcome: .rejected(reason: reason, status: status), rejectionCode: code)
        case let other: throw invalid(path, "unknown outcome '\(other)'")
        }
    }

    // MARK: Pull

    /// `{"table", "predicate", "cursor"?, "limit"}`.
    public static func json(_ request: PullRequest) -> JSON {
        var members: [(key: String, value: JSON)] = [("table", .string(request.table)), ("predicate", json(request.predicate))]
        if let cursor = request.cursor { members.append(("cursor", .string(cursor))) }
        members.append(("limit", .number(String(request.limit))))
        return .object(members)
    }

    /// The request a JSON object encodes (`predicate` defaults to all, `limit` to 500).
    public static func pullRequest(_ json: JSON, path: String = "request") throws -> PullRequest {
        let reader = try ObjectReader(json, path: path, allowed: ["table", "predicate", "cursor", "limit"])
        let limit = try reader.optionalInt("limit") ?? 500
        guard limit >= 0, limit <= Int64(Int32.max) else { throw invalid(path, "'limit' is out of range") }
        return PullRequest(table: try reader.string("table"),
                           predicate: try reader["predicate"].map { try predicate($0, path: "\(path).predicate") } ?? .all,
                           cursor: try reader.optionalString("cursor"), limit: Int(limit))
    }

    /// `{"records", "nextCursor", "remaining", "cursorReset"}`, and `"removed"` (ids that left
    /// the view under sync rules) only when there are some, so pages without removals read
    /// as they always have.
    public static func json(_ page: PullPage) -> JSON {
        var members: [(String, JSON)] = [("records", .array(page.records.map(json))), ("nextCursor", .string(page.nextCursor)),
                                         ("remaining", .number(String(page.remaining))), ("cursorReset", .bool(page.cursorReset))]
        if !page.removed.isEmpty { members.append(("removed", .array(page.removed.map(JSON.string)))) }
        return .object(members)
    }

    /// The page a JSON object encodes.
    public static func pullPage(_ json: JSON, path: String = "page") throws -> PullPage {
        let reader = try ObjectReader(json, path: path, allowed: ["records", "nextCursor", "remaining", "cursorReset", "removed"])
        guard case .array(let items) = try reader.required("records") else { throw invalid(path, "'records' must be an array") }
        let remaining = try reader.optionalInt("remaining") ?? 0
        guard remaining >= 0 else { throw invalid(path, "'remaining' is negative") }
        var removed: [String] = []
        if let value = reader["removed"] {
            guard case .array(let ids) = value else { throw invalid(path, "'removed' must be an array of ids") }
            removed = try ids.map { id in
                guard case .string(let text) = id else { throw invalid(path, "'removed' must be an array of ids") }
                return text
            }
        }
        return PullPage(records: try items.enumerated().map { try record($1, path: "\(path).records[\($0)]") },
                        nextCursor: try reader.string("nextCursor"), remaining: Int(remaining),
                        cursorReset: try reader.optionalBool("cursorReset") ?? false, removed: removed)
    }
}

/// Reads the members of one JSON object, refusing members it does not know.
struct ObjectReader {
    let members: [(key: String, value: JSON)]
    let path: String

    init(_ json: JSON, path: String, allowed: Set<String>) throws {
        guard case .object(let members) = json else { throw Wire.invalid(path, "must be an object") }
        for member in members where !allowed.contains(member.key) {
            throw Wire.invalid(path, "unknown member '\(member.key)'")
        }
        self.members = members
        self.path = path
    }

    subscript(key: String) -> JSON? {
        members.first { $0.key == key }.map(\.value)
    }

    func required(_ key: String) throws -> JSON {
        guard let value = self[key] else { throw Wire.invalid(path, "needs '\(key)'") }
        return value
    }

    func string(_ key: String) throws -> String {
        guard case .string(let s) = try required(key) else { throw Wire.invalid(path, "'\(key)' must be a string") }
        return s
    }

    func optionalString(_ key: String) throws -> String? {
        switch self[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw Wire.invalid(path, "'\(key)' must be a string")
        }
    }

    func optionalInt(_ key: String) throws -> Int64? {
        switch self[key] {
        case nil, .null?: return nil
        case .number(let text)?:
            guard let value = Int64(text) else { throw Wire.invalid(path, "'\(key)' must be a whole number") }
            return value
        default: throw Wire.invalid(path, "'\(key)' must be a whole number")
        }
    }

    func optionalBool(_ key: String) throws -> Bool? {
        switch self[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        default: throw Wire.invalid(path, "'\(key)' must be true or false")
        }
    }
}
