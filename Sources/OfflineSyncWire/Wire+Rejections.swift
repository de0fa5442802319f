import OfflineSync

// How a rejected push result's code travels (Docs/Protocol.md, "Rejections and their codes").
//
// In Swift the code is ``PushResult/rejectionCode``, apart from the reason. On the wire it is
// written as the reason's prefix, `<code>: <reason>` ("forbidden: no grant of the sync rules
// on table 'announcements' lets this identity insert item 'A1'"), byte for byte what servers
// sent before codes had a type: a reader of an earlier version refuses a rejected result with
// a member (JSON) or an element (binary) it does not know, so the code cannot travel apart
// without breaking it. Readers of this version also take the code apart, as a `code` member
// of a JSON result or a fifth element of a binary one, so a later server may move it there
// once no older client is left. The prefix is read here, at the edge, once; nothing past it
// looks into a reason.

extension Wire {
    /// The reason a rejected result carries on the wire: `reason` itself, or `<code>: reason`
    /// when the rejection has a code that travels (one ``WireErrorCode`` names).
    package static func wireReason(_ reason: String, code: SyncError.Code?) -> String {
        guard let code, let wire = WireErrorCode(syncErrorCode: code) else { return reason }
        return wire.rawValue + ": " + reason
    }

    /// A rejected result's reason and code as read: the code sent apart (`explicit`) when it
    /// names a ``SyncError/Code``, the reason's `<code>: ` prefix otherwise — taken off the
    /// reason in both cases — and no code when there is neither. A prefix is a code only when
    /// it is exactly a known ``WireErrorCode`` that names a ``SyncError/Code``, followed by a
    /// colon and one space; a reason that merely begins with a word and a colon keeps it.
    package static func rejection(reason: String, code explicit: String?) -> (reason: String, code: SyncError.Code?) {
        let prefixed = codePrefix(of: reason)
        if let explicit, let sent = WireErrorCode(rawValue: explicit), let code = sent.syncErrorCode {
            if let prefixed, prefixed.code == sent { return (prefixed.rest, code) }
            return (reason, code)
        }
        if let prefixed, let code = prefixed.code.syncErrorCode { return (prefixed.rest, code) }
        return (reason, nil)
    }

    /// `<code>: <rest>`, when `reason` begins with a known code, a colon and a space.
    private static func codePrefix(of reason: String) -> (code: WireErrorCode, rest: String)? {
        let bytes = reason.utf8
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let space = bytes.index(after: colon)
        guard space < bytes.endIndex, bytes[space] == UInt8(ascii: " "),
              let code = WireErrorCode(rawValue: String(decoding: bytes[bytes.startIndex..<colon], as: UTF8.self)) else {
            return nil
        }
        return (code, String(decoding: bytes[bytes.index(after: space)...], as: UTF8.self))
    }
}
