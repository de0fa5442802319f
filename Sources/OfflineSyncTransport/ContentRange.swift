/// A `Content-Range` field of a byte-range answer (RFC 9110 §14.4), parsed where the answer
/// arrives: `bytes first-last/complete` (a 206) or `bytes */complete` (a 416).
package struct ContentRange: Equatable, Sendable {
    /// The bytes the answer carries (inclusive bounds); `nil` for an unsatisfied range.
    package var range: ClosedRange<Int64>?
    /// The length of the whole file.
    package var complete: Int64

    /// A range and the file's length.
    package init(range: ClosedRange<Int64>?, complete: Int64) {
        self.range = range
        self.complete = complete
    }

    /// The field's value; `nil` for anything else: another unit, a length not given (`/*`),
    /// a range reversed or reaching past the length, a number of more than 18 digits.
    package init?(_ field: String) {
        var text = Substring(field)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        guard text.utf8.count > 6, text.prefix(6).lowercased() == "bytes " else { return nil }
        text = text.dropFirst(6)
        guard let slash = text.firstIndex(of: "/"), let complete = Self.number(text[text.index(after: slash)...]) else { return nil }
        let spec = text[..<slash]
        if spec == "*" {
            range = nil
        } else {
            guard let dash = spec.firstIndex(of: "-"), let first = Self.number(spec[..<dash]),
                  let last = Self.number(spec[spec.index(after: dash)...]), first <= last, last < complete else { return nil }
            range = first...last
        }
        self.complete = complete
    }

    /// A decimal number of 1 to 18 digits.
    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }
}
