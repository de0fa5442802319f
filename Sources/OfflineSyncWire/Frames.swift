import OfflineSync

/// The framing the native binary formats share (the page stream and the binary push): a
/// frame is a type byte, its payload's length as a 4-byte little-endian integer, and the
/// payload.
enum Frames {
    /// Appends a frame of `type` whose payload `body` appends, then fills in its length.
    static func write(_ type: UInt8, into out: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        out.append(type)
        let lengthAt = out.count
        out.append(contentsOf: [0, 0, 0, 0])
        body(&out)
        let length = UInt32(out.count - lengthAt - 4)
        for i in 0..<4 { out[lengthAt + i] = UInt8(truncatingIfNeeded: length >> (8 * UInt32(i))) }
    }

    /// The payload length in a frame's head, the four bytes after its type byte at `head`
    /// (little-endian); the bytes must be there.
    static func payloadLength<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, head: Bytes.Index) -> Int {
        var length = 0
        var index = bytes.index(after: head)
        for shift in stride(from: 0, to: 32, by: 8) {
            length |= Int(bytes[index]) << shift
            index = bytes.index(after: index)
        }
        return length
    }

    /// The frames of a whole message held in memory (a push's body or its answer): its
    /// `header` (magic and version byte) is checked first, then each ``next()`` is one frame.
    /// Anything malformed is ``SyncError/Code/invalidValue`` naming `what` and the byte.
    struct Reader {
        let buffer: UnsafeRawBufferPointer
        private(set) var offset = 0
        let what: String

        /// Checks that `buffer` starts with `header`: its magic (all but the last byte), then
        /// the version (the last), so another version is named as such.
        init(_ buffer: UnsafeRawBufferPointer, header: [UInt8], what: String) throws {
            self.buffer = buffer
            self.what = what
            let magic = header.dropLast()
            guard buffer.count >= header.count, buffer.prefix(magic.count).elementsEqual(magic) else {
                throw SyncError(.invalidValue, "\(what), byte 0: the bytes are not \(what)")
            }
            let version = buffer[magic.count]
            guard version == header.last! else {
                throw SyncError(.invalidValue, "\(what), byte \(magic.count): format version \(version) is not the \(header.last!) this build reads")
            }
            offset = header.count
        }

        var atEnd: Bool { offset == buffer.count }

        /// The next frame: its type, its payload, and the byte it starts at; `nil` at the end
        /// of the bytes. A frame that runs past the end is refused.
        mutating func next() throws -> (type: UInt8, payload: UnsafeRawBufferPointer, at: Int)? {
            guard offset < buffer.count else { return nil }
            let at = offset
            guard buffer.count - offset >= 5 else { throw refused("a frame's head is cut short", at: at) }
            let length = Frames.payloadLength(buffer, head: offset)
            guard buffer.count - offset - 5 >= length else { throw refused("a frame of \(length) bytes runs past the end", at: at) }
            let type = buffer[offset]
            offset += 5 + length
            return (type, UnsafeRawBufferPointer(rebasing: buffer[(at + 5)..<offset]), at)
        }

        func refused(_ message: String, at offset: Int) -> SyncError {
            SyncError(.invalidValue, "\(what), byte \(offset): \(message)")
        }
    }
}
