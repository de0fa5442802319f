import OfflineSync
import OfflineSyncStoreKit

/// A JSON document as the wire format reads and writes it. Numbers keep their text, so an
/// integer (`1`) and a double (`1.0`) stay apart and 64-bit integers are never rounded;
/// object members keep their order and a key may appear only once.
public indirect enum JSON: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, as its JSON text (for example `-12`, `1.0`, `6.02e23`).
    case number(String)
    /// A string.
    case string(String)
    /// An array.
    case array([JSON])
    /// An object: its members in document order, each key once.
    case object([(key: String, value: JSON)])

    /// Compares documents member by member, in order.
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a.utf8.elementsEqual(b.utf8)
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key.utf8.elementsEqual($1.key.utf8) && $0.value == $1.value }
        default: return false
        }
    }

    /// Hashes the document's structure.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(1); hasher.combine(b)
        case .number(let n): hasher.combine(2); hasher.combine(n)
        case .string(let s): hasher.combine(3); hasher.combine(ExactString(s))
        case .array(let items): hasher.combine(4); hasher.combine(items)
        case .object(let members):
            hasher.combine(5)
            for member in members { hasher.combine(ExactString(member.key)); hasher.combine(member.value) }
        }
    }

    /// The value of the member named `key` (by exact bytes), if this is an object that has it.
    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key.utf8.elementsEqual(key.utf8) }?.value
    }
}

// MARK: Reading

extension JSON {
    /// The deepest nesting of arrays and objects a document may have.
    public static let maxDepth = 256

    /// Parses one JSON document (RFC 8259): UTF-8, optional whitespace around one value,
    /// nothing after it. Throws ``SyncError/Code/invalidValue`` naming the byte offset for
    /// malformed input, invalid UTF-8, a lone surrogate escape, a duplicate object key, a
    /// number JSON does not allow, or nesting deeper than ``maxDepth``.
    public static func parse<Bytes: Collection>(_ bytes: Bytes) throws -> JSON where Bytes.Element == UInt8 {
        try bytes.withContiguousStorageIfAvailable { buffer in
            var reader = JSONReader(buffer)
            return try reader.document()
        } ?? {
            let copy = Array(bytes)
            return try copy.withUnsafeBufferPointer { buffer in
                var reader = JSONReader(buffer)
                return try reader.document()
            }
        }()
    }
}

/// A recursive-descent reader over UTF-8 bytes.
private struct JSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    var depth = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    func fail(_ what: String) -> SyncError {
        SyncError(.invalidValue, "malformed JSON at byte \(position): \(what)")
    }

    mutating func document() throws -> JSON {
        skipWhitespace()
        let value = try self.value()
        skipWhitespace()
        guard position == bytes.count else { throw fail("unexpected data after the document") }
        return value
    }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    mutating func value() throws -> JSON {
        guard position < bytes.count else { throw fail("unexpected end") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: String) throws {
        let expected = word.utf8
        guard position + expected.count <= bytes.count,
              expected.elementsEqual(bytes[position..<(position + expected.count)]) else {
            throw fail("unknown literal")
        }
        position += expected.count
    }

    mutating func enter() throws {
        depth += 1
        if depth > JSON.maxDepth { throw fail("nested deeper than \(JSON.maxDepth)") }
    }

    mutating func object() throws -> JSON {
        try enter()
        position += 1
        var members: [(key: String, value: JSON)] = []
        var seen = Set<ExactString>()
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let key = try string()
            guard seen.insert(ExactString(key)).inserted else { throw fail("duplicate key '\(key)'") }
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            position += 1
            skipWhitespace()
            members.append((key, try value()))
            skipWhitespace()
            guard position < bytes.count else { throw fail("unexpected end in an object") }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            if bytes[position] == UInt8(ascii: "}") { position += 1; break }
            throw fail("expected ',' or '}'")
        }
        depth -= 1
        return .object(members)
    }

    mutating func array() throws -> JSON {
        try enter()
        position += 1
        var items: [JSON] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try value())
            skipWhitespace()
            guard position < bytes.count else { throw fail("unexpected end in an array") }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            if bytes[position] == UInt8(ascii: "]") { position += 1; break }
            throw fail("expected ',' or ']'")
        }
        depth -= 1
        return .array(items)
    }

    mutating func number() throws -> String {
        let start = position
        func digits() -> Int {
            let first = position
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
            return position - first
        }
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count else { throw fail("a number needs digits") }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else if digits() == 0 {
            throw fail("a number needs digits")
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard digits() > 0 else { throw fail("a fraction needs digits") }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard digits() > 0 else { throw fail("an exponent needs digits") }
        }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
    }

    mutating func string() throws -> String {
        position += 1
        var utf8: [UInt8] = []
        var runStart = position
        while true {
            guard position < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                utf8.append(contentsOf: bytes[runStart..<position])
                position += 1
                break
            }
            if byte < 0x20 { throw fail("a control character inside a string must be escaped") }
            if byte != UInt8(ascii: "\\") { position += 1; continue }
            utf8.append(contentsOf: bytes[runStart..<position])
            position += 1
            guard position < bytes.count else { throw fail("unterminated escape") }
            let escape = bytes[position]
            position += 1
            switch escape {
            case UInt8(ascii: "\""): utf8.append(0x22)
            case UInt8(ascii: "\\"): utf8.append(0x5C)
            case UInt8(ascii: "/"): utf8.append(0x2F)
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                        throw fail("a lone high surrogate")
                    }
                    position += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("a high surrogate without its low half") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw fail("a lone low surrogate")
                }
                utf8.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
            default:
                throw fail("unknown escape")
            }
            runStart = position
        }
        guard let text = utf8.withUnsafeBytes(UTF8Text.string) else { throw fail("a string is not valid UTF-8") }
        return text
    }

    mutating func hex4() throws -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("a \\u escape needs four hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("a \\u escape needs four hex digits")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }
}

// MARK: Writing

extension JSON {
    /// The document as compact UTF-8 JSON text. Strings escape `"`, `\` and control
    /// characters; everything else is written as is.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        write(into: &out)
        return out
    }

    /// Appends the document's compact JSON text to `out`.
    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            // Runs that need no escape are copied whole.
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
                case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                default:
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                            hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]])
                }
                start = index + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<bytes.count]))
        }
        out.append(UInt8(ascii: "\""))
    }
}
