import OfflineSync

/// The proleptic Gregorian calendar and the ISO 8601 reader that every date the HTTP APIs
/// exchange goes through: entity bodies, OData literals, SigV4 and HTTP-dates.
extension WireDate {
    /// Reads `[-]yyyy-mm-ddThh:mm[:ss[.fraction]][Z|±hh:mm]`, proleptic Gregorian, to the millisecond.
    public struct Reader {
        /// The text.
        public let s: [Unicode.Scalar]
        /// The position of the next character to read.
        public var i: Int

        /// A reader of `s` from position `i`.
        public init(s: [Unicode.Scalar], i: Int) {
            self.s = s
            self.i = i
        }

        func peek() -> Unicode.Scalar? { i < s.count ? s[i] : nil }

        mutating func expect(_ c: Unicode.Scalar) -> Bool {
            guard peek() == c else { return false }
            i += 1
            return true
        }

        /// Exactly `count` digits (or between `count` and `max`), as a number.
        mutating func digits(_ count: Int, max: Int? = nil) -> Int64? {
            var value: Int64 = 0, n = 0
            while n < (max ?? count), let c = peek(), (c.value >= 0x30 && c.value <= 0x39) {
                value = value * 10 + Int64(c.value - 0x30)
                n += 1
                i += 1
            }
            return n >= count ? value : nil
        }

        /// The timestamp, or `nil` (with `i` at the offending character).
        public mutating func read(requireZone: Bool) -> Timestamp? {
            let negative = expect("-")
            guard var year = digits(4, max: 9) else { return nil }
            if negative { year = -year }
            guard expect("-"), let month = digits(2), (1...12).contains(month) else { return nil }
            guard expect("-"), let day = digits(2), day >= 1, day <= WireDate.daysIn(month: month, year: year) else { return nil }
            guard expect("T") || expect("t") else { return nil }
            guard let hour = digits(2), hour < 24, expect(":"), let minute = digits(2), minute < 60 else { return nil }
            var second: Int64 = 0, millis: Int64 = 0
            if expect(":") {
                guard let s = digits(2), s < 60 else { return nil }
                second = s
                if expect(".") {
                    var n = 0
                    while let c = peek(), (c.value >= 0x30 && c.value <= 0x39) {
                        if n < 3 { millis = millis * 10 + Int64(c.value - 0x30) }
                        n += 1
                        i += 1
                    }
                    guard (1...12).contains(n) else { return nil }
                    for _ in n..<max(n, 3) { millis *= 10 }
                }
            }
            var offset: Int64 = 0
            if expect("Z") || expect("z") {
                offset = 0
            } else if let sign = peek(), sign == "+" || sign == "-" {
                i += 1
                guard let oh = digits(2), oh < 24, expect(":"), let om = digits(2), om < 60 else { return nil }
                offset = (oh * 60 + om) * (sign == "-" ? -1 : 1)
            } else if requireZone {
                return nil
            }
            let days = Int128(WireDate.daysFromCivil(year: year, month: month, day: day))
            let seconds = days * 86_400 + Int128(hour * 3600 + minute * 60 + second) - Int128(offset * 60)
            let ms = seconds * 1000 + Int128(millis)
            guard ms >= Int128(Int64.min), ms <= Int128(Int64.max) else { return nil }
            return Timestamp(millisecondsSince1970: Int64(ms))
        }
    }

    /// Whether `year` is a leap year of the proleptic Gregorian calendar.
    public static func isLeap(_ year: Int64) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    /// The days of `month` (1–12) in `year`.
    public static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    public static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    public static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        Timestamp.civilDate(days: days)
    }
}
