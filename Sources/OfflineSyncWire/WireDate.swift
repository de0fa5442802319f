import OfflineSync

/// Timestamps as the HTTP APIs write them: ISO 8601 for entity bodies and OData literals,
/// HTTP-dates (RFC 9110) for `Last-Modified` and the conditional-request headers. They share
/// one date reader and proleptic Gregorian calendar (`WireDate+Calendar.swift`).
public enum WireDate {
    /// `2026-11-23T14:22:33.123Z` (a longer or negative year when needed).
    public static func iso8601(_ t: Timestamp) -> String {
        let ms = t.millisecondsSince1970
        var days = ms / 86_400_000, rest = ms % 86_400_000
        if rest < 0 { days -= 1; rest += 86_400_000 }
        let (year, month, day) = civilFromDays(days)
        func pad(_ n: Int64, _ width: Int) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let yearText = (year < 0 ? "-" : "") + pad(year < 0 ? -year : year, 4)
        return "\(yearText)-\(pad(month, 2))-\(pad(day, 2))T\(pad(rest / 3_600_000, 2)):\(pad(rest / 60_000 % 60, 2))"
            + ":\(pad(rest / 1000 % 60, 2)).\(pad(rest % 1000, 3))Z"
    }

    /// A date-time with a zone (`Z` or `±hh:mm`), seconds and fraction optional, to the
    /// millisecond (further digits dropped); `nil` for anything else.
    public static func parseISO8601(_ text: String) -> Timestamp? {
        let scalars = Array(text.unicodeScalars)
        var reader = Reader(s: scalars, i: 0)
        guard let timestamp = reader.read(requireZone: true), reader.i == scalars.count else { return nil }
        return timestamp
    }

    static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]   // 1970-01-01 was a Thursday
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Mon, 23 Nov 2026 14:22:33 GMT` (IMF-fixdate; the milliseconds are dropped).
    public static func httpDate(_ timestamp: Timestamp) -> String {
        let ms = timestamp.millisecondsSince1970
        var days = ms / 86_400_000, rest = ms % 86_400_000
        if rest < 0 { days -= 1; rest += 86_400_000 }
        let (year, month, day) = civilFromDays(days)
        let seconds = rest / 1000
        func pad(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekdays[Int(((days % 7) + 7) % 7)]), \(pad(day)) \(months[Int(month - 1)]) \(year) "
            + "\(pad(seconds / 3600)):\(pad(seconds / 60 % 60)):\(pad(seconds % 60)) GMT"
    }

    /// Milliseconds since 1970 of an IMF-fixdate, or `nil` (obsolete HTTP-date forms included).
    public static func parseHTTPDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int64(parts[1]), let year = Int64(parts[3]),
              let month = months.firstIndex(of: String(parts[2])) else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int64($0) }
        guard clock.count == 3, day >= 1, day <= daysIn(month: Int64(month + 1), year: year),
              clock[0] < 24, clock[1] < 60, clock[2] < 61 else { return nil }
        let days = daysFromCivil(year: year, month: Int64(month + 1), day: day)
        return (days * 86400 + clock[0] * 3600 + clock[1] * 60 + clock[2]) * 1000
    }
}
