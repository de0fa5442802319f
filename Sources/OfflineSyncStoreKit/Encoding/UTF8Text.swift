/// Strings from stored or received bytes, refused unless they are valid UTF-8 (never
/// repaired: a damaged name must not turn into another name).
public enum UTF8Text {
    /// The string `bytes` encode, or `nil` when they are not valid UTF-8.
    ///
    /// ASCII — nearly every id, name and stored text in practice — is valid as it stands and
    /// goes through `String(decoding:as:)`, the standard library's fast path over a typed
    /// buffer; anything else goes through `String(validating:as:)`, a generic call that
    /// showed among the top symbols of a profile of pulling a million rows.
    public static func string(_ bytes: UnsafeRawBufferPointer) -> String? {
        if bytes.allSatisfy({ $0 < 0x80 }) {
            return bytes.withMemoryRebound(to: UInt8.self) { String(decoding: $0, as: UTF8.self) }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
