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
            members.append((SystemField.updatedAt, record.updatedAt.map { .string(iso8601($0)) } ?? .null))
        }
        if wanted(SystemField.version) { members.append((SystemField.version, record.version.map { .string($0) } ?? .null)) }
        if wanted(SystemField.deleted) { members.append((SystemField.deleted, .bool(record.deleted))) }
        for name in record.fields.keys.sorted(by: Value.utf8Less) where wanted(name) && !SystemField.all.contains(name) {
            members.append((name, json(record.fields[name]!)))
        }
        return .object(members)
    }

    static func json(_ value: Value) -> JSON {
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .number(String(i))
        case .double: return Wire.json(value)
        case .string(let s): return .string(s)
        case .bytes(let b): return .string(Data(b).base64EncodedString())
        case .date(let t): return .string(iso8601(t))
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
                guard let date = parseISO8601(text) else { throw SyncError(.invalidValue, "'\(path)' is not an ISO 8601 date-time") }
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

    // MARK: Dates

    /// `2026-11-23T14:22:33.123Z`.
    static func iso8601(_ timestamp: Timestamp) -> String {
        let ms = timestamp.millisecondsSince1970
        let (days, msOfDay) = floorDivide(ms, 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let seconds = msOfDay / 1000
        return String(format: "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ", year, month, day,
                      seconds / 3600, seconds / 60 % 60, seconds % 60, msOfDay % 1000)
    }

    /// `Mon, 23 Nov 2026 14:22:33 GMT` (RFC 9110 HTTP-date).
    static func httpDate(_ timestamp: Timestamp) -> String {
        let (days, msOfDay) = floorDivide(timestamp.millisecondsSince1970, 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let seconds = msOfDay / 1000
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][Int(((days % 7) + 7) % 7)]
        let monthName = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][Int(month - 1)]
        return String(format: "%@, %02lld %@ %04lld %02lld:%02lld:%02lld GMT", weekday, day, monthName, year,
                      seconds / 3600, seconds / 60 % 60, seconds % 60)
    }

    /// Milliseconds since 1970 of an HTTP-date (IMF-fixdate), or nil.
    static func parseHTTPDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int64(parts[1]), let year = Int64(parts[3]),
              let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].firstIndex(of: String(parts[2])) else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int64($0) }
        guard clock.count == 3, (1...31).contains(day), clock[0] < 24, clock[1] < 60, clock[2] < 61 else { return nil }
        let days = days(fromCivil: year, Int64(month + 1), day)
        return (days * 86400 + clock[0] * 3600 + clock[1] * 60 + clock[2]) * 1000
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, to milliseconds.
    static func parseISO8601(_ text: String) -> Timestamp? {
        let bytes = Array(text.utf8)
        func number(_ start: Int, _ count: Int) -> Int64? {
            guard start + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[start..<start + count] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - 48)
            }
            return value
        }
        guard bytes.count >= 20, let year = number(0, 4), bytes[4] == 45, let month = number(5, 2), bytes[7] == 45,
              let day = number(8, 2), bytes[10] == 84 || bytes[10] == 116, let hour = number(11, 2), bytes[13] == 58,
              let minute = number(14, 2), bytes[16] == 58, let second = number(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var index = 19
        var millis: Int64 = 0
        if index < bytes.count, bytes[index] == 46 {
            index += 1
            var digits = 0
            while index < bytes.count, (48...57).contains(bytes[index]) {
                if digits < 3 { millis = millis * 10 + Int64(bytes[index] - 48) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            if digits < 3 { for _ in digits..<3 { millis *= 10 } }
        }
        var offsetMinutes: Int64 = 0
        guard index < bytes.count else { return nil }
        if bytes[index] == 90 || bytes[index] == 122 {
            index += 1
        } else if bytes[index] == 43 || bytes[index] == 45 {
            guard let h = number(index + 1, 2), index + 3 < bytes.count, bytes[index + 3] == 58, let m = number(index + 4, 2),
                  h < 24, m < 60 else { return nil }
            offsetMinutes = (h * 60 + m) * (bytes[index] == 43 ? 1 : -1)
            index += 6
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = days(fromCivil: year, month, day)
        let ms = ((days * 86400 + hour * 3600 + minute * 60 + second) - offsetMinutes * 60) * 1000 + millis
        return Timestamp(millisecondsSince1970: ms)
    }

    static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b, r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    /// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
    static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
