import Foundation
import OfflineSync
import OfflineSyncWire

/// One token of an OData expression, with its 1-based position in Unicode scalars.
struct ODataToken {
    enum Kind {
        /// An identifier or keyword (`name`, `eq`, `startswith`).
        case word(String)
        /// A literal: `null`, `true`, `false`, a number, string, date-time or binary value.
        case literal(Value)
        case open, close, comma, end
    }

    var kind: Kind
    var position: Int

    /// The token as an error message names it: never the contents of a string or binary
    /// literal, which may be record data.
    var described: String {
        switch kind {
        case .word(let w): return "'\(ODataSyntax.clip(w))'"
        case .literal(let v):
            switch v {
            case .string: return "a string literal"
            case .bytes: return "a binary literal"
            case .date: return "a date-time literal"
            default: return "'\(ODataRenderer.literal(v))'"
            }
        case .open: return "'('"
        case .close: return "')'"
        case .comma: return "','"
        case .end: return "the end"
        }
    }

    var word: String? { if case .word(let w) = kind { return w } else { return nil } }
}

/// The lexer and the small option grammars shared by ``ODataQuery``'s parsers.
enum ODataSyntax {
    /// Words that are operators and can never name a field.
    static let keywords: Set<String> = ["and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "in",
                                         "add", "sub", "mul", "div", "mod"]
    /// OData typed-literal prefixes (`guid'…'`) other than those supported, refused by name.
    static let unsupportedTypedLiterals: Set<String> = [
        "guid", "x", "time", "timeofday", "duration", "date", "geography", "geometry", "decimal", "int64",
    ]

    /// Text for an error message, cut at 40 characters.
    static func clip(_ text: String) -> String {
        let scalars = text.unicodeScalars
        let cut = scalars.count > 40 ? String(String.UnicodeScalarView(scalars.prefix(40))) + "…" : text
        return cut.unicodeScalars.map { $0.properties.generalCategory == .control ? $0.escaped(asASCII: true) : String($0) }.joined()
    }

    static func error(_ context: String, _ reason: String, at position: Int) -> SyncError {
        SyncError(.invalidQuery, "\(context): \(reason) at position \(position)")
    }

    /// A hint for a word that is a keyword or literal in the wrong case.
    static func caseHint(_ word: String) -> String {
        let lower = word.lowercased()
        if lower != word, keywords.contains(lower) || ["null", "true", "false", "asc", "desc"].contains(lower) {
            return " (OData keywords are lower case: '\(lower)')"
        }
        return ""
    }

    static func isDigit(_ c: Unicode.Scalar) -> Bool { c.value >= 0x30 && c.value <= 0x39 }
    static func isIdentifierStart(_ c: Unicode.Scalar) -> Bool {
        (c.value >= 0x41 && c.value <= 0x5A) || (c.value >= 0x61 && c.value <= 0x7A) || c == "_"
    }
    static func isIdentifierPart(_ c: Unicode.Scalar) -> Bool { isIdentifierStart(c) || isDigit(c) }
    static func isIdentifier(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, isIdentifierStart(first) else { return false }
        return s.unicodeScalars.allSatisfy(isIdentifierPart)
    }

    // MARK: Lexer

    /// The tokens of `text` (ending with `.end`), refusing text longer than ``ODataQuery/maxLength``.
    static func tokens(_ text: String, context: String) throws -> [ODataToken] {
        let s = Array(text.unicodeScalars)
        guard s.count <= ODataQuery.maxLength else {
            throw SyncError(.invalidQuery, "\(context) is longer than \(ODataQuery.maxLength) characters")
        }
        var lexer = Lexer(s: s, context: context)
        return try lexer.run()
    }

    private struct Lexer {
        let s: [Unicode.Scalar]
        let context: String
        var i = 0
        var tokens: [ODataToken] = []

        init(s: [Unicode.Scalar], context: String) {
            self.s = s
            self.context = context
        }

        func peek(_ offset: Int = 0) -> Unicode.Scalar? { i + offset < s.count ? s[i + offset] : nil }

        func fail(_ reason: String, at index: Int) -> SyncError { ODataSyntax.error(context, reason, at: index + 1) }

        mutating func run() throws -> [ODataToken] {
            while let c = peek() {
                let start = i
                switch c {
                case " ", "\t", "\r", "\n":
                    i += 1
                case "(":
                    i += 1; tokens.append(ODataToken(kind: .open, position: start + 1))
                case ")":
                    i += 1; tokens.append(ODataToken(kind: .close, position: start + 1))
                case ",":
                    i += 1; tokens.append(ODataToken(kind: .comma, position: start + 1))
                case "'":
                    let text = try quoted()
                    tokens.append(ODataToken(kind: .literal(.string(text)), position: start + 1))
                case "-", "0"..."9":
                    tokens.append(ODataToken(kind: .literal(try number()), position: start + 1))
                default:
                    if ODataSyntax.isIdentifierStart(c) {
                        tokens.append(try word())
                    } else if c == "/" {
                        throw fail("member paths ('/') are not supported", at: start)
                    } else {
                        throw fail("unexpected character '\(ODataSyntax.clip(String(c)))'", at: start)
                    }
                }
            }
            tokens.append(ODataToken(kind: .end, position: s.count + 1))
            return tokens
        }

        /// A single-quoted string at `i`, with `''` standing for a quote.
        mutating func quoted() throws -> String {
            let start = i
            i += 1
            var out = String.UnicodeScalarView()
            while true {
                guard let c = peek() else { throw fail("unterminated string literal", at: start) }
                i += 1
                if c == "'" {
                    if peek() == "'" { out.append("'"); i += 1 } else { return String(out) }
                } else {
                    out.append(c)
                }
            }
        }

        /// An identifier, keyword, word literal (`null`, `INF`) or typed literal (`datetime'…'`).
        mutating func word() throws -> ODataToken {
            let start = i
            while let c = peek(), ODataSyntax.isIdentifierPart(c) { i += 1 }
            // A primitive type's qualified name (`Edm.DateTimeOffset`, the second argument of
            // `cast`) is one word; no other dotted name is read.
            if i - start == 3, s[start] == "E", s[start + 1] == "d", s[start + 2] == "m", peek() == ".",
               let next = peek(1), ODataSyntax.isIdentifierStart(next) {
                i += 1
                while let c = peek(), ODataSyntax.isIdentifierPart(c) { i += 1 }
            }
            let w = String(String.UnicodeScalarView(s[start..<i]))
            let position = start + 1
            if peek() == "'" {
                switch w {
                case "datetime", "datetimeoffset":
                    let textStart = i + 1
                    let text = Array(try quoted().unicodeScalars)
                    var reader = WireDate.Reader(s: text, i: 0)
                    guard let stamp = reader.read(requireZone: false), reader.i == text.count else {
                        throw fail("malformed \(w) literal", at: textStart + min(reader.i, text.count))
                    }
                    return ODataToken(kind: .literal(.date(stamp)), position: position)
                case "binary":
                    let text = try quoted()
                    guard let bytes = ODataSyntax.base64URL(text) else { throw fail("malformed binary literal", at: start) }
                    return ODataToken(kind: .literal(.bytes(bytes)), position: position)
                default:
                    if ODataSyntax.unsupportedTypedLiterals.contains(w.lowercased()) {
                        throw fail("the typed literal \(w)'…' is not supported", at: start)
                    }
                }
            }
            switch w {
            case "null": return ODataToken(kind: .literal(.null), position: position)
            case "true": return ODataToken(kind: .literal(.bool(true)), position: position)
            case "false": return ODataToken(kind: .literal(.bool(false)), position: position)
            case "INF": return ODataToken(kind: .literal(.double(.infinity)), position: position)
            case "NaN": return ODataToken(kind: .literal(.double(.nan)), position: position)
            default: return ODataToken(kind: .word(w), position: position)
            }
        }

        /// A number or bare date-time at `i` (which holds `-` or a digit).
        mutating func number() throws -> Value {
            let start = i
            if peek() == "-" {
                i += 1
                if peek() == "I", peek(1) == "N", peek(2) == "F", !(peek(3).map(ODataSyntax.isIdentifierPart) ?? false) {
                    i += 3
                    return .double(-.infinity)
                }
                guard let c = peek(), ODataSyntax.isDigit(c) else { throw fail("expected a digit after '-'", at: i) }
            }
            let digitsStart = i
            while let c = peek(), ODataSyntax.isDigit(c) { i += 1 }
            if i - digitsStart >= 4, peek() == "-" {
                var reader = WireDate.Reader(s: s, i: start)
                guard let stamp = reader.read(requireZone: true) else {
                    throw fail("malformed date-time literal (expected yyyy-mm-ddThh:mm[:ss[.fff]] and Z or ±hh:mm)", at: reader.i)
                }
                i = reader.i
                if let c = peek(), ODataSyntax.isIdentifierPart(c) || c == ":" || c == "." {
                    throw fail("unexpected character '\(ODataSyntax.clip(String(c)))' after a date-time", at: i)
                }
                return .date(stamp)
            }
            var isDouble = false
            if peek() == "." {
                i += 1
                guard let c = peek(), ODataSyntax.isDigit(c) else { throw fail("expected a digit after '.'", at: i) }
                while let c = peek(), ODataSyntax.isDigit(c) { i += 1 }
                isDouble = true
            }
            if peek() == "e" || peek() == "E" {
                i += 1
                if peek() == "+" || peek() == "-" { i += 1 }
                guard let c = peek(), ODataSyntax.isDigit(c) else { throw fail("expected exponent digits", at: i) }
                while let c = peek(), ODataSyntax.isDigit(c) { i += 1 }
                isDouble = true
            }
            let text = String(String.UnicodeScalarView(s[start..<i]))
            var suffix: Unicode.Scalar?
            if let c = peek(), "LlMmDdFf".unicodeScalars.contains(c) { suffix = c; i += 1 }
            if let c = peek(), ODataSyntax.isIdentifierPart(c) || c == "." {
                throw fail("unexpected character '\(ODataSyntax.clip(String(c)))' after the number '\(ODataSyntax.clip(text))'", at: i)
            }
            switch suffix {
            case "L"?, "l"?:
                guard !isDouble else { throw fail("the integer suffix 'L' after a decimal number", at: i - 1) }
                guard let value = Int64(text) else { throw fail("the integer '\(ODataSyntax.clip(text))' does not fit 64 bits", at: start) }
                return .int(value)
            case nil where !isDouble:
                if let value = Int64(text) { return .int(value) }
                fallthrough
            default:
                guard let value = Double(text), value.isFinite else {
                    throw fail("the number '\(ODataSyntax.clip(text))' is out of range", at: start)
                }
                return .double(value)
            }
        }
    }

    // MARK: Binary

    /// Decodes base64url (or base64), padding optional; `nil` when malformed.
    static func base64URL(_ text: String) -> [UInt8]? {
        var standard = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while standard.hasSuffix("=") { standard.removeLast() }
        guard standard.unicodeScalars.allSatisfy({ isIdentifierPart($0) && $0 != "_" || $0 == "+" || $0 == "/" }),
              standard.count % 4 != 1 else { return nil }
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }

    // MARK: Options

    /// `$skip` / `$top`: decimal digits, at most `max`.
    static func nonNegative(_ value: String, option: String, max: Int) throws -> Int {
        guard !value.isEmpty, value.unicodeScalars.allSatisfy(isDigit) else {
            throw SyncError(.invalidQuery, "\(option) must be a non-negative integer, not '\(clip(value))'")
        }
        let significant = value.drop { $0 == "0" }
        guard significant.count <= 19, let n = Int(significant.isEmpty ? "0" : String(significant)), n <= max else {
            throw SyncError(.invalidQuery, "\(option) must be at most \(max), not '\(clip(value))'")
        }
        return n
    }

    /// `true` or `false`.
    static func boolean(_ value: String, option: String) throws -> Bool {
        switch value {
        case "true": return true
        case "false": return false
        default: throw SyncError(.invalidQuery, "\(option) must be 'true' or 'false', not '\(clip(value))'")
        }
    }

    /// Comma-separated items, each read by `item` from the tokens, which must use them all.
    private static func list<T>(_ value: String, option: String, _ item: (inout ArraySlice<ODataToken>) throws -> T) throws -> [T] {
        var rest = try tokens(value, context: option)[...]
        var items: [T] = []
        while true {
            items.append(try item(&rest))
            let token = rest.removeFirst()
            switch token.kind {
            case .comma: continue
            case .end: return items
            default: throw error(option, "expected ',' or the end, found \(token.described)", at: token.position)
            }
        }
    }

    /// A field name token.
    private static func field(_ rest: inout ArraySlice<ODataToken>, option: String) throws -> String {
        let token = rest.removeFirst()
        guard let name = token.word, !keywords.contains(name) else {
            throw error(option, "expected a field name, found \(token.described)", at: token.position)
        }
        return name
    }

    /// `$orderby`: `field [asc|desc]` items.
    static func orderBy(_ value: String) throws -> [SortKey] {
        try list(value, option: "$orderby") { rest in
            let name = try field(&rest, option: "$orderby")
            if let direction = rest.first?.word {
                switch direction {
                case "asc": rest.removeFirst(); return SortKey(name, ascending: true)
                case "desc": rest.removeFirst(); return SortKey(name, ascending: false)
                default:
                    throw error("$orderby", "expected 'asc' or 'desc', found '\(clip(direction))'\(caseHint(direction))",
                                at: rest.first?.position ?? 0)
                }
            }
            return SortKey(name)
        }
    }

    /// `$select`: field names.
    static func select(_ value: String) throws -> [String] {
        try list(value, option: "$select") { try field(&$0, option: "$select") }
    }
}
