/// The one way the project builds a string id out of several strings (a row's owner and
/// item, a config row's table and key, a dataset's pool, identity and name…).
///
/// Every part but the last is written as its UTF-8 byte count, a colon and the part, so no
/// choice of parts can make two ids equal: `("a/b", "c")` and `("a", "b/c")` give
/// `3:a/b/c` and `1:a/b/c`. The last part is written as it is, which keeps ids short and
/// lets a query on a prefix find every id that starts with the same leading parts.
///
/// Two layouts are in use and are kept exactly, because the ids are stored: ``slashed``
/// puts a `/` after each length-prefixed part (row ids, dataset ids, `__config` ids),
/// ``packed`` puts nothing between them (the dataset service's scopes and the change feed).
package enum CompositeKey {
    /// `<n₁>:<part₁>/<n₂>:<part₂>/…<last>`.
    package static func slashed(_ leading: String..., last: String) -> String {
        var key = ""
        key.reserveCapacity(leading.reduce(last.utf8.count) { $0 + $1.utf8.count + 21 })
        for part in leading { append(part, to: &key); key.append("/") }
        key.append(last)
        return key
    }

    /// `<n>:<part>/<last>`, built in one allocation: every pushed operation's row and outcome
    /// ids take this form.
    package static func slashed(_ leading: String, last: String) -> String {
        var key = ""
        key.reserveCapacity(leading.utf8.count + last.utf8.count + 21)
        append(leading, to: &key)
        key.append("/")
        key.append(last)
        return key
    }

    /// Appends `<n>:<part>` (n in decimal, 20 digits at most).
    private static func append(_ part: String, to key: inout String) {
        key.append(String(part.utf8.count))
        key.append(":")
        key.append(part)
    }

    /// `<n₁>:<part₁><n₂>:<part₂>…<last>`.
    package static func packed(_ leading: String..., last: String = "") -> String {
        var key = ""
        for part in leading { key += "\(part.utf8.count):\(part)" }
        return key + last
    }

    /// Reads `count` length-prefixed parts of a ``packed(_:last:)`` key from its start;
    /// returns them and what follows them, or `nil` when the key is not in that form (a part
    /// must not be empty).
    package static func unpack(_ key: Substring, count: Int) -> (leading: [String], rest: Substring)? {
        var rest = key
        var leading: [String] = []
        for _ in 0..<count {
            guard let colon = rest.firstIndex(of: ":"), let length = Int(rest[..<colon]), length > 0 else { return nil }
            let bytes = rest.utf8[rest.utf8.index(after: colon)...]
            guard bytes.count >= length else { return nil }
            let split = bytes.index(bytes.startIndex, offsetBy: length)
            guard let part = String(bytes[..<split]) else { return nil }
            leading.append(part)
            rest = Substring(bytes[split...])
        }
        return (leading, rest)
    }
}
