import OfflineSyncWire

/// Why a token was refused. Only the server's debug log sees it, and it never holds any
/// part of the token: a client is told `unauthorized` and nothing else.
package struct TokenRefusal: Error, Sendable {
    package let reason: String
    /// Set when the token was not found wanting but could not be checked now (its issuer's
    /// keys cannot be had): a retry after this long may pass.
    let retryAfter: Duration?
    init(_ reason: String, retryAfter: Duration? = nil) {
        self.reason = reason
        self.retryAfter = retryAfter
    }
}

/// A JSON Web Token in compact serialization (`header.payload.signature`), split and
/// decoded but not verified.
///
/// Parsing is strict, so that one token has one spelling and no parser disagreement can be
/// played against us: base64url without padding and with no spare bits, JSON objects with
/// no duplicate keys (RFC 7515 §4 lets a parser refuse them; "the last one wins" is how
/// header-smuggling attacks work), and a header that names its algorithm and asks for
/// nothing we will not do — no critical extensions (`crit`), and no key or key location
/// carried by the token itself (`jku`, `x5u`, `jwk`, `x5c`: a token may not choose the key
/// that verifies it).
package struct CompactToken {
    /// The longest token accepted, in bytes. Identity providers' tokens are 1–3 KB; a user in
    /// many groups makes them longer, so the limit is generous but bounded.
    static let maxTokenBytes = 16 * 1024
    /// The longest decoded header accepted, in bytes (real headers are under 200).
    static let maxHeaderBytes = 1024
    /// Header parameters a token may not carry.
    static let forbiddenHeaderParameters = ["crit", "jku", "x5u", "jwk", "x5c"]

    /// The decoded header, a JSON object.
    let header: JSON
    /// The decoded payload (the claims), a JSON object.
    let payload: JSON
    /// What the signature covers: the first two segments and the dot between them.
    let signingInput: [UInt8]
    /// The decoded signature.
    let signature: [UInt8]
    /// The header's `alg`.
    package let algorithm: String
    /// The header's `kid`, when it has one.
    package let keyId: String?

    package init(_ token: String) throws(TokenRefusal) {
        let bytes = Array(token.utf8)
        guard !bytes.isEmpty else { throw TokenRefusal("empty token") }
        guard bytes.count <= Self.maxTokenBytes else { throw TokenRefusal("token longer than \(Self.maxTokenBytes) bytes") }
        let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else { throw TokenRefusal("not three dot-separated segments") }
        guard let headerBytes = Base64URL.decode(segments[0]), let payloadBytes = Base64URL.decode(segments[1]),
              let signature = Base64URL.decode(segments[2]) else {
            throw TokenRefusal("a segment is not canonical base64url")
        }
        guard headerBytes.count <= Self.maxHeaderBytes else { throw TokenRefusal("header longer than \(Self.maxHeaderBytes) bytes") }
        guard let header = try? JSON.parse(headerBytes), case .object = header else {
            throw TokenRefusal("the header is not one JSON object with unique keys")
        }
        guard let payload = try? JSON.parse(payloadBytes), case .object = payload else {
            throw TokenRefusal("the payload is not one JSON object with unique keys")
        }
        for name in Self.forbiddenHeaderParameters where header[name] != nil {
            throw TokenRefusal("header parameter '\(name)' is not accepted")
        }
        guard case .string(let algorithm)? = header["alg"] else { throw TokenRefusal("no 'alg' in the header") }
        var keyId: String?
        if let kid = header["kid"] {
            guard case .string(let text) = kid, !text.isEmpty, text.utf8.count <= 256 else {
                throw TokenRefusal("'kid' is not a string of 1 to 256 bytes")
            }
            keyId = text
        }
        self.header = header
        self.payload = payload
        self.signingInput = Array(bytes[..<segments[1].endIndex])
        self.signature = signature
        self.algorithm = algorithm
        self.keyId = keyId
    }
}

/// Base64url (RFC 4648 §5) as JOSE uses it: no padding, and — when decoding — only the one
/// canonical spelling of each byte string (the unused low bits of the last character are
/// zero), so a token cannot be re-spelled into a different string with the same meaning.
package enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// The bytes `text` spells, or `nil` when it is not canonical unpadded base64url.
    package static func decode<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        let count = text.count
        guard count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Two or four bits are left over after a final partial group: they must be zero.
        guard accumulator == 0 else { return nil }
        return output
    }

    /// `bytes` in unpadded base64url.
    package static func encode<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = (accumulator << 8) | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)])
            }
            accumulator &= (1 << UInt32(bits)) - 1
        }
        if bits > 0 { output.append(alphabet[Int((accumulator << UInt32(6 - bits)) & 0x3F)]) }
        return String(decoding: output, as: UTF8.self)
    }
}
