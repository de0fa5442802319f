/// What a download answers, decided from its request's `Range`, `If-Range`, `If-Match` and
/// `If-None-Match` fields by RFC 9110's rules for one representation that has a strong entity
/// tag and no modification date (an attachment: its bytes never change under its name).
///
/// Parsed once at the edge; the route only acts on the case.
package enum DownloadAnswer: Equatable, Sendable {
    /// 200 with the whole file.
    case whole
    /// 206 with `bytes first-last/size` (inclusive bounds, `last < size`).
    case partial(first: Int64, last: Int64)
    /// 304: the client's copy (named in `If-None-Match`) is current.
    case notModified
    /// 412: `If-Match` names no tag of this file.
    case preconditionFailed
    /// 416 with `Content-Range: bytes */size`.
    case unsatisfiable

    /// The answer for a request with these fields, for a file of `size` bytes whose entity
    /// tag is `etag` (quoted). `rangeApplies` is false for a method with no range handling
    /// (`HEAD`: RFC 9110 §14.2 defines ranges for `GET` only).
    ///
    /// Preconditions are evaluated in RFC 9110 §13.2.2's order: `If-Match`, then
    /// `If-None-Match`, then `If-Range`, then `Range`. A `Range` the server does not serve —
    /// another unit, a syntax error, several ranges — is ignored (the whole file), as §14.2
    /// allows; a valid single range no byte of the file satisfies is 416.
    package static func decide(range: String?, ifRange: String?, ifMatch: String?, ifNoneMatch: String?,
                       etag: String, size: Int64, rangeApplies: Bool) -> DownloadAnswer {
        if let ifMatch, !EntityTags.list(ifMatch, contains: etag, weak: false) { return .preconditionFailed }
        if let ifNoneMatch, EntityTags.list(ifNoneMatch, contains: etag, weak: true) { return .notModified }
        guard rangeApplies, let range, let requested = ByteRange(range) else { return .whole }
        if let ifRange {
            // A date can never match (the file has no Last-Modified); a tag must match strongly.
            let tag = ifRange.httpTrimmed
            guard !tag.hasPrefix("W/"), tag == etag else { return .whole }
        }
        guard let (first, last) = requested.resolved(size: size) else {
            // An empty file satisfies no position; a suffix of it is the whole (empty) file.
            if case .suffix = requested, size == 0 { return .whole }
            return .unsatisfiable
        }
        return .partial(first: first, last: last)
    }
}

/// One byte range of RFC 9110 §14.1.2: `first-last`, `first-` or `-suffix`.
package enum ByteRange: Equatable, Sendable {
    case from(Int64, through: Int64?)
    case suffix(Int64)

    /// The range of a `Range` field's value with unit `bytes` and exactly one range, or `nil`
    /// for anything else (another unit, a list, a malformed or reversed range, a number over
    /// 18 digits).
    package init?(_ field: String) {
        let text = field.httpTrimmed
        guard let equals = text.firstIndex(of: "="),
              text[..<equals].httpTrimmed.lowercased() == "bytes" else { return nil }
        let spec = text[text.index(after: equals)...].httpTrimmed
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let head = spec[..<dash].httpTrimmed, tail = spec[spec.index(after: dash)...].httpTrimmed
        if head.isEmpty {
            guard let count = Self.number(tail) else { return nil }
            self = .suffix(count)
            return
        }
        guard let first = Self.number(head) else { return nil }
        if tail.isEmpty {
            self = .from(first, through: nil)
            return
        }
        guard let last = Self.number(tail), last >= first else { return nil }
        self = .from(first, through: last)
    }

    /// The inclusive bounds this range selects in a representation of `size` bytes, or `nil`
    /// when it selects none (unsatisfiable): a first position at or past the end, a suffix of
    /// length 0, or any range of an empty representation.
    package func resolved(size: Int64) -> (Int64, Int64)? {
        guard size > 0 else { return nil }
        switch self {
        case .from(let first, let through):
            guard first < size else { return nil }
            return (first, min(through ?? size - 1, size - 1))
        case .suffix(let count):
            guard count > 0 else { return nil }
            return (max(0, size - count), size - 1)
        }
    }

    /// A run of 1 to 18 ASCII digits (so it fits an `Int64`).
    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int64(text)
    }
}

/// Entity-tag lists (`If-Match`, `If-None-Match`) of RFC 9110 §8.8.3 and §13.1.
enum EntityTags {
    /// Whether `field` (`*` or a comma-separated list of entity tags) names `etag` (quoted,
    /// strong). The weak comparison ignores a `W/` prefix; the strong one never matches a
    /// weak tag. A malformed member matches nothing.
    static func list(_ field: String, contains etag: String, weak: Bool) -> Bool {
        let text = field.httpTrimmed
        if text == "*" { return true }
        return text.split(separator: ",").contains { member in
            var tag = member.httpTrimmed
            if tag.hasPrefix("W/") {
                guard weak else { return false }
                tag = tag.dropFirst(2)
            }
            return tag == etag
        }
    }
}

/// The resumable-upload fields' values (`Upload-Complete`, `Upload-Offset`, `Upload-Length`):
/// RFC 8941 structured-field items, read at the edge.
package enum UploadFields {
    /// A boolean item: `?1` or `?0`, with optional spaces around it; anything else is `nil`.
    package static func boolean(_ text: String) -> Bool? {
        switch text.httpTrimmed {
        case "?1": return true
        case "?0": return false
        default: return nil
        }
    }

    /// A non-negative integer item of 1 to 15 digits (RFC 8941's limit), with optional spaces
    /// around it; anything else (a sign, a decimal, a parameter) is `nil`.
    package static func integer(_ text: String) -> Int64? {
        let digits = text.httpTrimmed
        guard !digits.isEmpty, digits.utf8.count <= 15, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int64(digits)
    }
}

extension Substring {
    /// Without the optional whitespace (spaces and tabs) HTTP allows around a value.
    var httpTrimmed: Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
        return self[start...end]
    }
}

extension String {
    /// ``Substring/httpTrimmed`` of the whole string.
    var httpTrimmed: Substring { self[...].httpTrimmed }
}
