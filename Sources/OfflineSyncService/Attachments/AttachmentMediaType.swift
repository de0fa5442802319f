/// The media type an attachment reference declares (its `contentType`), read by RFC 9110's
/// grammar (§8.3.1) so that a download can be served with it:
///
///     media-type = type "/" subtype *( OWS ";" OWS [ token "=" ( token / quoted-string ) ] )
///
/// A declaration that is not one has none, and the download is `application/octet-stream`:
/// an empty string, a bare word, space around the `/` or before the end, a control
/// character, a byte outside ASCII, or more than ``maximumLength`` bytes.
package struct AttachmentMediaType: Sendable, Hashable {
    /// The longest declaration served, in bytes; a longer one is never sent as a header.
    package static let maximumLength = 255

    /// The `Content-Type` value: type and subtype in lowercase (they are case-insensitive),
    /// the parameters as declared.
    package let value: String
    /// The type, lowercase (`image`).
    package let type: String
    /// The subtype, lowercase (`svg+xml`).
    package let subtype: String

    /// The media type `declared` states, or `nil` when it states none.
    package init?(declared: String) {
        let bytes = Array(declared.utf8)
        guard bytes.count <= Self.maximumLength, let parsed = Self.parse(bytes) else { return nil }
        var lowered: [UInt8] = bytes[..<parsed.end].map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        type = String(decoding: lowered[..<parsed.slash], as: UTF8.self)
        subtype = String(decoding: lowered[(parsed.slash + 1)...], as: UTF8.self)
        lowered.append(contentsOf: bytes[parsed.end...])
        value = String(decoding: lowered, as: UTF8.self)
    }

    /// Whether a browser that opens the file shows it without running anything in it: a
    /// raster image, audio, video or plain text. Everything else — HTML, XHTML, SVG and any
    /// other XML, scripts, style sheets, PDF, and the types a browser does not know — is
    /// served to be saved (`Content-Disposition: attachment`), not opened in the server's
    /// origin. A list of the passive types, not of the active ones, so a type nobody thought
    /// of is a download.
    package var opensInline: Bool {
        // A `+xml` subtype is XML to a browser, whatever its type, and XML can carry script.
        if subtype.hasSuffix("+xml") { return false }
        switch type {
        case "image", "audio", "video": return true
        case "text": return subtype == "plain"
        default: return false
        }
    }

    /// Where the slash is and where the subtype ends, when `bytes` is a media type.
    private static func parse(_ bytes: [UInt8]) -> (slash: Int, end: Int)? {
        var index = 0
        func token() -> Bool {
            let start = index
            while index < bytes.count, isToken(bytes[index]) { index += 1 }
            return index > start
        }
        func spaces() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
        }
        func quoted() -> Bool {
            guard index < bytes.count, bytes[index] == 0x22 else { return false }
            index += 1
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case 0x22:
                    index += 1
                    return true
                case 0x5C:
                    // quoted-pair: a backslash and one HTAB, SP or visible character.
                    guard index + 1 < bytes.count, isQuotable(bytes[index + 1]) else { return false }
                    index += 2
                default:
                    guard isQuotable(byte) else { return false }
                    index += 1
                }
            }
            return false
        }
        guard token(), index < bytes.count, bytes[index] == 0x2F else { return nil }
        let slash = index
        index += 1
        guard token() else { return nil }
        let end = index
        while index < bytes.count {
            spaces()
            guard index < bytes.count, bytes[index] == 0x3B else { return nil }
            index += 1
            spaces()
            // An empty parameter (`;;`, or `;` at the end) is allowed by the grammar.
            if index == bytes.count || bytes[index] == 0x3B { continue }
            guard token(), index < bytes.count, bytes[index] == 0x3D else { return nil }
            index += 1
            guard index < bytes.count, bytes[index] == 0x22 ? quoted() : token() else { return nil }
        }
        return (slash, end)
    }

    /// RFC 9110's `tchar`: a letter, a digit or one of ``!#$%&'*+-.^_`|~``.
    private static func isToken(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: return true
        default: return false
        }
    }

    /// A byte a quoted string may hold (HTAB, SP or a visible ASCII character; `"` and `\`
    /// only escaped, which the caller handles first). Bytes outside ASCII (`obs-text`) are
    /// refused: they would not be sent as a header as they were declared.
    private static func isQuotable(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte <= 0x7E)
    }
}
