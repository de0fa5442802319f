/// A parsed store URL: its scheme, and either a hierarchical part (`scheme://host/path?query`)
/// or an opaque one (`sqlite::memory:`).
///
/// Parsing checks only the generic shape; what a path or a parameter means is up to the
/// adapter registered for the scheme. ``description`` hides a password written in the
/// authority (`postgres://user:secret@host/db` prints as `postgres://user:***@host/db`).
public struct StoreLocation: Sendable, Hashable, CustomStringConvertible {
    /// One `name=value` pair of the query, percent-decoded.
    public struct Parameter: Sendable, Hashable {
        /// The parameter's name.
        public var name: String
        /// The parameter's value (empty when the URL gives only a name).
        public var value: String
    }

    /// The URL exactly as given.
    public let url: String
    /// The scheme, lowercased (`sqlite`, `lmdb`, `encrypted-file`, …).
    public let scheme: String
    /// The authority of a hierarchical URL (`user:password@host:port`), percent-decoded, or
    /// `nil` for an opaque URL. Empty for `scheme:///path`.
    public let authority: String?
    /// The percent-decoded path of a hierarchical URL, or the opaque part of an opaque one
    /// (`:memory:` for `sqlite::memory:`).
    public let path: String
    /// The query parameters, in order.
    public let parameters: [Parameter]

    /// Whether the URL has no `//` authority part (`sqlite::memory:`).
    public var isOpaque: Bool { authority == nil }

    /// Parses a store URL. Throws ``SyncError/Code/invalidStoreURL`` when it has no valid
    /// scheme, a malformed percent escape, or a fragment.
    public init(parsing url: String) throws {
        self.url = url
        guard let colon = url.firstIndex(of: ":") else {
            throw SyncError(.invalidStoreURL, "a store URL starts with a scheme, such as sqlite:///path/app.db; '\(StoreLocation.redacted(url))' has none")
        }
        let scheme = String(url[..<colon])
        guard let first = scheme.unicodeScalars.first, first.isASCIILetter,
              scheme.unicodeScalars.allSatisfy({ $0.isASCIILetter || $0.isASCIIDigit || "+-.".unicodeScalars.contains($0) }) else {
            throw SyncError(.invalidStoreURL, "'\(StoreLocation.redacted(scheme))' is not a URL scheme (letters, digits, '+', '-' and '.', starting with a letter)")
        }
        self.scheme = scheme.lowercased()
        var rest = url[url.index(after: colon)...]
        if rest.contains("#") {
            throw SyncError(.invalidStoreURL, "a store URL has no fragment ('#'); percent-encode '#' in a path as %23")
        }
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        if rest.hasPrefix("//") {
            let afterSlashes = rest.dropFirst(2)
            let slash = afterSlashes.firstIndex(of: "/") ?? afterSlashes.endIndex
            authority = try StoreLocation.percentDecoded(afterSlashes[..<slash], what: "authority")
            path = try StoreLocation.percentDecoded(afterSlashes[slash...], what: "path")
        } else {
            authority = nil
            path = try StoreLocation.percentDecoded(rest, what: "path")
        }
        var parameters: [Parameter] = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = try StoreLocation.percentDecoded(parts[0], what: "parameter name", plusIsSpace: true)
            let value = parts.count > 1 ? try StoreLocation.percentDecoded(parts[1], what: "parameter value", plusIsSpace: true) : ""
            parameters.append(Parameter(name: name, value: value))
        }
        self.parameters = parameters
    }

    /// The value of the last parameter with this name, or `nil`.
    public func parameter(_ name: String) -> String? {
        parameters.last(where: { $0.name == name })?.value
    }

    /// Throws ``SyncError/Code/invalidStoreURL`` if the URL has a parameter not in `allowed`,
    /// naming the parameters the scheme accepts.
    public func checkParameters(allowed: Set<String>) throws {
        for parameter in parameters where !allowed.contains(parameter.name) {
            let accepted = allowed.isEmpty ? "none" : allowed.sorted().joined(separator: ", ")
            throw SyncError(.invalidStoreURL, "\(scheme) URLs take no parameter '\(parameter.name)' (accepted: \(accepted))")
        }
    }

    /// The same scheme and parameters with another local path: `scheme:///new/path?…`.
    /// Used to place a store of the same kind in another directory.
    public func withPath(_ newPath: String) throws -> StoreLocation {
        let query = parameters.map { StoreLocation.encoded($0.name) + "=" + StoreLocation.encoded($0.value) }.joined(separator: "&")
        var pathAllowed = StoreLocation.unreserved
        pathAllowed.insert(UInt8(ascii: "/"))
        return try StoreLocation(parsing: scheme + "://" + StoreLocation.encoded(newPath, keeping: pathAllowed)
                                 + (query.isEmpty ? "" : "?" + query))
    }

    private static let unreserved: Set<UInt8> = Set(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8))

    private static func encoded(_ text: String, keeping allowed: Set<UInt8> = unreserved) -> String {
        var out = ""
        for byte in text.utf8 {
            if allowed.contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// The URL with any password in its authority replaced by `***`.
    public var description: String { StoreLocation.redacted(url) }

    /// Hides the password of `scheme://user:password@host…`, and the whole value of a query
    /// parameter named `password` or holding a password (a URL with one, or `password=`: a
    /// PostgreSQL store's `replica=` names another server with its credentials).
    static func redacted(_ text: String) -> String {
        let base = redactedAuthority(text)
        guard let mark = base.firstIndex(of: "?") else { return base }
        let pairs = base[base.index(after: mark)...].split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { return String(pair) }
            let name = ((try? percentDecoded(parts[0], what: "", plusIsSpace: true)) ?? String(parts[0])).lowercased()
            let value = (try? percentDecoded(parts[1], what: "", plusIsSpace: true)) ?? String(parts[1])
            // A password however it is written: `password=`, `password = …` in a key=value
            // string, a parameter named for it, or percent-encoded inside the value (a URL's
            // query keyword is decoded by libpq too), however many times. A value that cannot
            // be decoded to its end (a malformed escape further in, or more than eight
            // layers) could hide one: it is hidden too.
            var decoded = [String(parts[1]), value]
            var undecodable = false
            while let last = decoded.last, last.contains("%") {
                guard decoded.count < 8, let again = try? percentDecoded(Substring(last), what: "", plusIsSpace: true) else {
                    undecodable = true
                    break
                }
                if again == last { break }
                decoded.append(again)
            }
            let hidden = undecodable || name.contains("password") || decoded.contains { $0.lowercased().contains("password") }
                || redactedAuthority(value) != value
            return hidden ? parts[0] + "=***" : String(pair)
        }
        return String(base[...mark]) + pairs.joined(separator: "&")
    }

    /// Hides the password of `scheme://user:password@host…`.
    private static func redactedAuthority(_ text: String) -> String {
        guard let start = text.range(of: "://") else { return text }
        let authorityEnd = text[start.upperBound...].firstIndex(where: { $0 == "/" || $0 == "?" }) ?? text.endIndex
        let authority = text[start.upperBound..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return text }
        return String(text[..<authority.index(after: colon)]) + "***" + String(text[at...])
    }

    private static func percentDecoded(_ text: Substring, what: String, plusIsSpace: Bool = false) throws -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    throw SyncError(.invalidStoreURL, "the \(what) of a store URL has a malformed percent escape")
                }
                bytes.append(high << 4 | low)
            } else if plusIsSpace && byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else {
                bytes.append(byte)
            }
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw SyncError(.invalidStoreURL, "the \(what) of a store URL is not valid UTF-8 once percent-decoded")
        }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
