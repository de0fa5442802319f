/// Who a token speaks for, and so who owns a row or a dataset: a string the server compares
/// by its exact UTF-8 bytes.
///
/// Swift's `String` equality is Unicode canonical equivalence: `"jos\u{E9}"` (é precomposed)
/// and `"jose\u{301}"` (e and a combining acute accent) are equal strings. An identity
/// provider treats them as two users, and every store compares them as two keys, so code that
/// decides who may read a row must not merge them. `Identity` is equal, hashed and ordered by
/// bytes only, and it is validated once, where it enters (a verified token, a route, a call
/// of the service), by the one rule ``validate(_:)`` states.
public struct Identity: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The longest identity accepted, in UTF-8 bytes.
    public static let maximumByteCount = 256

    private let exact: ExactString

    /// The identity's text, exactly as the token carried it.
    public var text: String { exact.value }

    /// Validates `text` by ``validate(_:)``. Throws ``SyncError/Code/invalidValue`` for a text
    /// the rule refuses.
    public init(_ text: String) throws {
        try Self.validate(text)
        exact = ExactString(text)
    }

    /// The rule every identity meets: 1 to ``maximumByteCount`` bytes of UTF-8, and no
    /// control character (Unicode general category Cc: U+0000–U+001F, U+007F–U+009F), so an
    /// identity can never hold the separators and markers the service uses inside keys.
    /// Normalisation is not applied and not required: two spellings are two identities.
    public static func validate(_ text: String) throws {
        let bytes = text.utf8.count
        guard bytes > 0, bytes <= maximumByteCount,
              !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw SyncError(.invalidValue, "an identity is 1 to \(maximumByteCount) bytes of UTF-8 with no control characters")
        }
    }

    /// Whether `text` meets ``validate(_:)``.
    public static func isValid(_ text: String) -> Bool { (try? validate(text)) != nil }

    /// Byte-for-byte equality.
    public static func == (lhs: Identity, rhs: Identity) -> Bool { lhs.exact == rhs.exact }

    /// Byte-wise (UTF-8) order, the order SQL stores sort identities in.
    public static func < (lhs: Identity, rhs: Identity) -> Bool { Value.utf8Less(lhs.text, rhs.text) }

    /// Whether this identity is exactly `text`, byte for byte (`false` for any other spelling).
    public func isExactly(_ text: String) -> Bool { ExactString.sameBytes(self.text, text) }

    /// Whether `value` is a string that is exactly this identity: how a grant compares a row's
    /// owner or identity field with the caller.
    public func isExactly(_ value: Value) -> Bool {
        guard case .string(let text) = value else { return false }
        return isExactly(text)
    }

    /// The identity's text.
    public var description: String { text }
}

extension Identity: ExpressibleByStringLiteral {
    /// An identity written in source. A literal the rule refuses is a programming error and
    /// stops the program; identities from outside go through ``init(_:)``. Note that Swift
    /// reads `Identity("…")` with a literal argument as this initialiser, not as the throwing
    /// one: validate text you did not write through a `String` value.
    public init(stringLiteral text: String) {
        do { try self.init(text) } catch { preconditionFailure("'\(text)' is not a valid identity: \(error)") }
    }
}

extension Identity: Codable {
    /// Decodes the text and validates it.
    public init(from decoder: any Decoder) throws {
        try self.init(decoder.singleValueContainer().decode(String.self))
    }

    /// Encodes the text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
