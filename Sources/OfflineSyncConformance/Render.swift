import OfflineSync

/// Readable renderings of values, records and queries for failure messages, and the first
/// difference between what a store returned and what it should have.
enum Render {
    /// A string quoted, printable ASCII as is, everything else escaped as `\u{…}`, so strings
    /// that differ only in normalisation or invisible characters look different. Long
    /// strings are cut.
    static func string(_ s: String, limit: Int = 60) -> String {
        var out = "\""
        var count = 0
        for scalar in s.unicodeScalars {
            if count == limit { out += "…(\(s.utf8.count) UTF-8 bytes)"; break }
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case " "..."~": out.unicodeScalars.append(scalar)
            default: out += "\\u{\(String(scalar.value, radix: 16))}"
            }
            count += 1
        }
        return out + "\""
    }

    /// A short rendering of a value (long strings, bytes and containers are summarised).
    static func value(_ v: Value) -> String {
        switch v {
        case .null: return "null"
        case .bool(let b): return String(b)
        case .int(let i): return String(i)
        case .double(let d): return "\(d)" + (d == 0 ? (d.sign == .minus ? " (negative zero)" : "") : "")
        case .string(let s): return string(s)
        case .bytes(let b):
            if b.count > 16 { return "<\(b.count) bytes>" }
            return "x'" + b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() + "'"
        case .date(let t): return "date(\(t.millisecondsSince1970) ms)"
        case .array(let items):
            if items.count > 8 { return "[\(items.count) items]" }
            return "[" + items.map(value).joined(separator: ", ") + "]"
        case .object(let object):
            if object.count > 8 { return "{\(object.count) keys}" }
            return "{" + object.keys.sorted(by: Value.utf8Less).map { "\(string($0)): \(value(object[$0]!))" }
                .joined(separator: ", ") + "}"
        }
    }

    /// Where `actual` differs from `expected` (a path and both sides), or `nil` if equal.
    static func difference(_ expected: Value, _ actual: Value, path: String) -> String? {
        if expected == actual { return nil }
        switch (expected, actual) {
        case let (.double(e), .double(a)):
            return "\(path): expected \(value(expected)) (bits 0x\(String(e.bitPattern, radix: 16))), got \(value(actual)) (bits 0x\(String(a.bitPattern, radix: 16)))"
        case let (.string(e), .string(a)):
            let eb = Array(e.utf8), ab = Array(a.utf8)
            let at = firstMismatch(eb, ab)
            return "\(path): strings differ at UTF-8 byte \(at) (expected \(eb.count) bytes, got \(ab.count)): expected \(string(e)), got \(string(a))"
        case let (.bytes(e), .bytes(a)):
            let at = firstMismatch(e, a)
            return "\(path): bytes differ at offset \(at) (expected \(e.count) bytes, got \(a.count))"
        case let (.array(e), .array(a)):
            if e.count != a.count { return "\(path): expected an array of \(e.count) items, got \(a.count)" }
            for (index, (ev, av)) in zip(e, a).enumerated() {
                if let d = difference(ev, av, path: "\(path)[\(index)]") { return d }
            }
            return "\(path): arrays differ"
        case let (.object(e), .object(a)):
            let actualByBytes = Dictionary(a.map { (Array($0.key.utf8), $0) }, uniquingKeysWith: { first, _ in first })
            let expectedKeys = Set(e.keys.map { Array($0.utf8) })
            for key in e.keys.sorted(by: Value.utf8Less) {
                let childPath = "\(path).\(string(key))"
                guard let (_, av) = actualByBytes[Array(key.utf8)] else { return "\(childPath): missing" }
                if let d = difference(e[key]!, av, path: childPath) { return d }
            }
            for (bytes, entry) in actualByBytes where !expectedKeys.contains(bytes) {
                return "\(path).\(string(entry.key)): unexpected extra key with value \(value(entry.value))"
            }
            return "\(path): objects differ"
        default:
            return "\(path): expected \(value(expected)), got \(value(actual))"
        }
    }

    /// Where a record differs from the expected one, or `nil` if it is exactly equal.
    static func difference(_ expected: Record, _ actual: Record) -> String? {
        if expected == actual { return nil }
        let name = "record \(string(expected.id))"
        if !expected.id.utf8.elementsEqual(actual.id.utf8) {
            return "expected record \(string(expected.id)), got record \(string(actual.id))"
        }
        if expected.version != actual.version {
            return "\(name): version expected \(expected.version.map { string($0) } ?? "nil"), got \(actual.version.map { string($0) } ?? "nil")"
        }
        if expected.updatedAt != actual.updatedAt {
            return "\(name): updatedAt expected \(expected.updatedAt.map { "\($0.millisecondsSince1970) ms" } ?? "nil"), got \(actual.updatedAt.map { "\($0.millisecondsSince1970) ms" } ?? "nil")"
        }
        if expected.deleted != actual.deleted {
            return "\(name): deleted expected \(expected.deleted), got \(actual.deleted)"
        }
        return difference(.object(expected.fields), .object(actual.fields), path: "\(name) fields")
            ?? "\(name) differs"
    }

    /// The first position where two record lists differ, or `nil` if they are equal.
    static func difference(_ expected: [Record], _ actual: [Record]) -> String? {
        for index in 0..<max(expected.count, actual.count) {
            let prefix = "expected \(expected.count) records, got \(actual.count); first difference at position \(index)"
            guard index < expected.count else { return "\(prefix): unexpected extra record \(string(actual[index].id))" }
            guard index < actual.count else { return "\(prefix): missing record \(string(expected[index].id))" }
            if let d = difference(expected[index], actual[index]) { return "\(prefix): \(d)" }
        }
        return nil
    }

    /// The first offset where two byte arrays differ (the shorter length if one is a prefix).
    static func firstMismatch(_ a: [UInt8], _ b: [UInt8]) -> Int {
        for index in 0..<min(a.count, b.count) where a[index] != b[index] { return index }
        return min(a.count, b.count)
    }

    /// A query as a readable one-liner: `WHERE n < 3 ORDER BY s DESC LIMIT 5 OFFSET 2`.
    static func query(_ q: Query) -> String {
        var out = "WHERE " + predicate(q.predicate)
        if !q.order.isEmpty {
            out += " ORDER BY " + q.order.map { "\($0.field) \($0.ascending ? "ASC" : "DESC")" }.joined(separator: ", ")
        }
        if let limit = q.limit { out += " LIMIT \(limit)" }
        if q.offset != 0 { out += " OFFSET \(q.offset)" }
        return out
    }

    /// A predicate as a readable expression.
    static func predicate(_ p: QueryPredicate) -> String {
        switch p {
        case .all: return "TRUE"
        case let .compare(field, op, literal): return "\(fieldName(field)) \(op.rawValue) \(value(literal))"
        case let .isIn(field, literals): return "\(fieldName(field)) IN [\(literals.map(value).joined(separator: ", "))]"
        case .isNull(let field): return "\(fieldName(field)) IS NULL"
        case let .contains(field, needle): return "\(fieldName(field)) CONTAINS \(string(needle))"
        case let .hasPrefix(field, prefix): return "\(fieldName(field)) HASPREFIX \(string(prefix))"
        case let .hasSuffix(field, suffix): return "\(fieldName(field)) HASSUFFIX \(string(suffix))"
        case .and(let ps): return ps.isEmpty ? "AND()" : "(" + ps.map(predicate).joined(separator: " AND ") + ")"
        case .or(let ps): return ps.isEmpty ? "OR()" : "(" + ps.map(predicate).joined(separator: " OR ") + ")"
        case .not(let inner):
            let rendered = predicate(inner)
            return rendered.hasPrefix("(") ? "NOT " + rendered : "NOT (" + rendered + ")"
        case let .compareExpressions(l, op, r): return "\(expression(l)) \(op.rawValue) \(expression(r))"
        case .isNullExpression(let e): return "\(expression(e)) IS NULL"
        }
    }

    /// An expression as a readable call: `lowercased(title)`.
    static func expression(_ e: QueryExpression) -> String {
        switch e {
        case .field(let name): return fieldName(name)
        case .literal(let literal): return value(literal)
        case let .call(function, arguments): return "\(function.rawValue)(\(arguments.map(expression).joined(separator: ", ")))"
        }
    }

    private static func fieldName(_ name: String) -> String {
        let plain = !name.isEmpty && name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
        return plain ? name : string(name)
    }
}
