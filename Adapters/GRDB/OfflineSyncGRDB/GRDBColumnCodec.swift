import OfflineSync
import OfflineSyncSQLite
import OfflineSyncWire

/// How a declared field's value sits in the app's typed column, in the forms GRDB's own
/// records read and write, so the app reads synced rows with its `FetchableRecord`s:
///
/// | field type | column value |
/// |---|---|
/// | bool | INTEGER 0 or 1 |
/// | int | INTEGER |
/// | double | REAL |
/// | string | TEXT |
/// | bytes | BLOB |
/// | date | TEXT `YYYY-MM-DD HH:MM:SS.SSS`, UTC (GRDB's `Date` format); read also from a number of seconds since 1970, as GRDB reads one |
/// | array, object | TEXT: JSON (the wire's lossless form: bytes and dates as `{"$bytes": …}`, `{"$date": …}`), but an attachment reference as `Attachment`'s own `Codable` form |
/// | any | TEXT JSON as above; an INTEGER, REAL or BLOB an app wrote reads as itself |
///
/// GRDB stores a `Codable` property that is not a database value (an `Attachment`, an array
/// of them, a struct holding one) as the JSON `JSONEncoder` writes, and reads it back with
/// `JSONDecoder`. `Attachment` encodes as `{"$attachment": …, "size": …, "contentType": …}`,
/// a key the wire's JSON would escape to `"$$attachment"`. So an object member named exactly
/// `$attachment`, at any depth, is the reference's marker both ways: the column reads as
/// the reference ``OfflineSync/Attachment/value`` holds, and a reference is written in the
/// form the app's `Attachment` decodes. `"$$attachment"` (what earlier versions wrote) reads
/// as the marker too; any other key starting with a single `$` is not a value.
///
/// A value a column cannot hold exactly — a NaN or a negative zero in a REAL column, which
/// SQLite stores as NULL and 0 — is written as SQLite keeps it and kept exact beside the row
/// (``GRDBTypedTable``), where it counts only while the column still holds that form.
package enum GRDBColumnCodec {
    /// The column value for `value` of a field of `type` (`value` fits `type`: the schema
    /// validated it).
    package static func encode(_ value: Value, as type: FieldType) -> SQLiteValue {
        switch value {
        case .null: return .null
        case .bool(let b) where type == .bool: return .int(b ? 1 : 0)
        case .int(let i) where type == .int: return .int(i)
        case .double(let d) where type == .double: return d.isNaN ? .null : .double(d == 0 ? 0 : d)
        case .string(let s) where type == .string: return .text(s)
        case .bytes(let b) where type == .bytes: return .blob(b)
        case .date(let t) where type == .date: return .text(GRDBDateText.format(t))
        default: return .text(jsonText(value))
        }
    }

    /// The JSON text of a value: the wire's, with each attachment reference's marker as
    /// `Attachment`'s `Codable` form spells it.
    static func jsonText(_ value: Value) -> String {
        var json = Wire.json(value)
        switch value {
        case .array, .object:
            if let renamed = renamingKey(in: json, from: wireMarker, to: Attachment.marker) { json = renamed }
        default:
            break
        }
        return String(decoding: json.encoded, as: UTF8.self)
    }

    /// The value of JSON text a column holds, reading `Attachment`'s `Codable` form of a
    /// reference. Throws what ``OfflineSyncWire/Wire/value(_:path:)`` throws.
    static func value(ofJSON text: String, path: String) throws -> Value {
        let json = try JSON.parse(Array(text.utf8))
        return try Wire.value(renamingKey(in: json, from: Attachment.marker, to: wireMarker) ?? json, path: path)
    }

    /// How the wire's JSON writes the marker key (a key starting with `$` gets one more).
    private static let wireMarker = "$" + Attachment.marker

    /// `json` with every object member named exactly `from` (by its bytes) named `to`, at
    /// any depth; `nil` when no member has that name (nothing is copied then).
    static func renamingKey(in json: JSON, from: String, to: String) -> JSON? {
        switch json {
        case .array(let items):
            var changed: [JSON]?
            for (index, item) in items.enumerated() {
                guard let renamed = renamingKey(in: item, from: from, to: to) else { continue }
                if changed == nil { changed = items }
                changed![index] = renamed
            }
            return changed.map(JSON.array)
        case .object(let members):
            var changed: [(key: String, value: JSON)]?
            for (index, member) in members.enumerated() {
                let key = member.key.utf8.elementsEqual(from.utf8) ? to : nil
                let value = renamingKey(in: member.value, from: from, to: to)
                guard key != nil || value != nil else { continue }
                if changed == nil { changed = members }
                changed![index] = (key: key ?? member.key, value: value ?? member.value)
            }
            return changed.map(JSON.object)
        default:
            return nil
        }
    }

    /// Whether ``encode(_:as:)`` keeps `value` exactly (decoding the column gives it back).
    package static func isExact(_ value: Value, as type: FieldType) -> Bool {
        guard case .double(let d) = value, type == .double else { return true }
        return !d.isNaN && !(d == 0 && d.sign == .minus)
    }

    /// The value of a column of a field of `type`. Throws ``SyncError/Code/schemaMismatch``
    /// naming the table, row and field when the column holds what the type cannot read (the
    /// app wrote text into a column the schema declares int, say).
    package static func decode(_ stored: SQLiteValue, as type: FieldType, table: String, id: String, field: String) throws -> Value {
        func mismatch() -> SyncError {
            SyncError(.schemaMismatch, "table '\(table)', row '\(id)': column '\(field)' holds \(describe(stored)), which a field of type \(type.rawValue) cannot read")
        }
        switch (type, stored) {
        case (_, .null): return .null
        case (.bool, .int(let i)): return .bool(i != 0)
        case (.int, .int(let i)): return .int(i)
        case (.int, .double(let d)):
            guard let i = Int64(exactly: d) else { throw mismatch() }
            return .int(i)
        case (.double, .double(let d)): return .double(d)
        case (.double, .int(let i)): return .double(Double(i))
        case (.string, .text(let s)): return .string(s)
        case (.bytes, .blob(let b)): return .bytes(b)
        case (.date, .text(let s)):
            guard let t = GRDBDateText.parse(s) else { throw mismatch() }
            return .date(t)
        case (.date, .int(let seconds)):
            let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
            guard !overflow else { throw mismatch() }
            return .date(Timestamp(millisecondsSince1970: ms))
        case (.date, .double(let seconds)):
            guard let ms = Int64(exactly: (seconds * 1000).rounded()) else { throw mismatch() }
            return .date(Timestamp(millisecondsSince1970: ms))
        case (.any, .int(let i)): return .int(i)
        case (.any, .double(let d)): return .double(d)
        case (.any, .blob(let b)): return .bytes(b)
        case (.any, .text(let s)), (.array, .text(let s)), (.object, .text(let s)):
            let value: Value
            do {
                value = try Self.value(ofJSON: s, path: field)
            } catch {
                throw SyncError(.schemaMismatch, "table '\(table)', row '\(id)': column '\(field)' holds text that is not the JSON of a value: \(error)")
            }
            guard type.accepts(value) else { throw mismatch() }
            return value
        default:
            throw mismatch()
        }
    }

    private static func describe(_ stored: SQLiteValue) -> String {
        switch stored {
        case .null: return "NULL"
        case .int: return "an INTEGER"
        case .double: return "a REAL"
        case .text: return "TEXT"
        case .blob: return "a BLOB"
        }
    }

    /// The SQL type a column created for a field of `type` is declared with: GRDB's names
    /// for the same columns (`t.column("x", .datetime)` declares `DATETIME`).
    static func sqlType(_ type: FieldType) -> String {
        switch type {
        case .bool: return "BOOLEAN"
        case .int: return "INTEGER"
        case .double: return "DOUBLE"
        case .string: return "TEXT"
        case .bytes: return "BLOB"
        case .date: return "DATETIME"
        case .array, .object, .any: return "TEXT"
        }
    }
}

/// GRDB's text form of a date, `YYYY-MM-DD HH:MM:SS.SSS` in UTC, for any millisecond
/// timestamp (a year outside 0...9999 is written with its sign or extra digits, and read
/// back exactly).
enum GRDBDateText {
    static func format(_ t: Timestamp) -> String {
        let ms = t.millisecondsSince1970
        let (days, msOfDay) = floorDivision(ms, 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let h = msOfDay / 3_600_000, m = msOfDay / 60_000 % 60, s = msOfDay / 1000 % 60, f = msOfDay % 1000
        let yearText = year < 0 ? "-" + pad(-year, 4) : pad(year, 4)
        return "\(yearText)-\(pad(month, 2))-\(pad(day, 2)) \(pad(h, 2)):\(pad(m, 2)):\(pad(s, 2)).\(pad(f, 3))"
    }

    /// Reads `YYYY-MM-DD`, `YYYY-MM-DD HH:MM`, `…:SS` or `…:SS.SSS` (a `T` may stand for the
    /// space; further fraction digits are cut to milliseconds), in UTC. `nil` for anything else.
    static func parse(_ text: String) -> Timestamp? {
        var bytes = Array(text.utf8)[...]
        var negative = false
        if bytes.first == UInt8(ascii: "-") {
            negative = true
            bytes = bytes.dropFirst()
        }
        func number(_ count: Int? = nil) -> Int64? {
            var digits = 0
            var value: Int64 = 0
            while let b = bytes.first, b >= 48, b <= 57, count.map({ digits < $0 }) ?? true {
                guard digits < 18 else { return nil }
                value = value * 10 + Int64(b - 48)
                digits += 1
                bytes = bytes.dropFirst()
            }
            return digits == 0 || (count != nil && digits != count) ? nil : value
        }
        func expect(_ c: Character) -> Bool {
            guard bytes.first == c.asciiValue else { return false }
            bytes = bytes.dropFirst()
            return true
        }
        guard let rawYear = number(), let month = (expect("-") ? number(2) : nil), let day = (expect("-") ? number(2) : nil),
              (1...12).contains(month), (1...31).contains(day) else { return nil }
        let year = negative ? -rawYear : rawYear
        var msOfDay: Int64 = 0
        if !bytes.isEmpty {
            guard expect(" ") || expect("T"), let h = number(2), expect(":"), let m = number(2), h < 24, m < 60 else { return nil }
            msOfDay = h * 3_600_000 + m * 60_000
            if expect(":") {
                guard let s = number(2), s < 60 else { return nil }
                msOfDay += s * 1000
                if expect(".") {
                    var scale: Int64 = 100
                    var digits = 0
                    while let b = bytes.first, b >= 48, b <= 57 {
                        msOfDay += Int64(b - 48) * scale
                        scale /= 10
                        digits += 1
                        bytes = bytes.dropFirst()
                    }
                    guard digits > 0 else { return nil }
                }
            }
            guard bytes.isEmpty else { return nil }
        }
        // Before 1970 the day's start may lie below Int64's range while the instant does not:
        // count from the next day's start back.
        let days = days(fromCivil: year, month, day)
        let (start, overflow) = (days < 0 ? days + 1 : days).multipliedReportingOverflow(by: 86_400_000)
        guard !overflow else { return nil }
        let (ms, overflow2) = start.addingReportingOverflow(days < 0 ? msOfDay - 86_400_000 : msOfDay)
        return overflow2 ? nil : Timestamp(millisecondsSince1970: ms)
    }

    private static func pad(_ n: Int64, _ width: Int) -> String {
        let digits = String(n)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func floorDivision(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b, r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    // Howard Hinnant's days-from-civil and civil-from-days (proleptic Gregorian calendar).
    private static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
