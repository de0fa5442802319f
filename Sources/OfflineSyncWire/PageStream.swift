import OfflineSync
import OfflineSyncStoreKit

/// The binary page stream that answers `POST /v2/pull` (Docs/Protocol.md, "The page stream"):
/// many pull pages in one response, written by the server as it reads them and read by the
/// client as they arrive, so the server reads the next page while the client stores this one.
///
/// A stream is the five bytes `OSPS` and ``version``, then frames. A frame is a type byte, its
/// payload's length as a 4-byte little-endian integer, and the payload, which is always one
/// item of ``ValueCodec`` — the same lossless binary encoding of values and records the stores
/// use, so a value crosses the wire without a text form:
///
/// | type | payload |
/// |---|---|
/// | 1 page | an object: `cursor` (string), `remaining` (int ≥ 0), `reset` (bool), `removed` ([string]), `records` (int ≥ 0) |
/// | 2 record | one record (``ValueCodec/encode(_:)-(Record)``); exactly `records` of them follow their page frame |
/// | 3 end | empty: the response is complete |
/// | 4 failure | an object: `status` (int), `error` (string), `message` (string): the server failed after the stream began |
///
/// A stream that stops before its end frame was cut short, not finished: the client keeps the
/// pages it stored (each with its cursor) and asks again from the last cursor.
public enum PageStream {
    /// The media type a client accepts and the server answers with; the version goes in its
    /// `version` parameter (`application/vnd.offlinesync.pages; version=1`).
    public static let mediaType = "application/vnd.offlinesync.pages"
    /// The format version this build writes and reads.
    public static let version: UInt8 = 1
    /// The request header by which a client asks the server to end a response once it has
    /// written this many bytes (after the page that reaches it; every response carries at
    /// least one page): for a client that cannot pause a response it reads, so what it holds
    /// unread stays bounded. The client asks again from the last page's cursor.
    public static let responseBytesHeader = "X-OfflineSync-Stream-Bytes"
    /// The first bytes of every stream.
    public static let header: [UInt8] = Array("OSPS".utf8) + [version]
    /// The largest frame a decoder accepts by default: far above a page of records at the
    /// service's page-size cap, far below what would let a broken stream exhaust memory.
    public static let defaultMaxFrameBytes = 64 << 20

    /// What a client reads off a stream.
    public enum Frame: Sendable, Equatable {
        /// A whole page: its header frame and all its record frames.
        case page(PullPage)
        /// The server ended the response cleanly.
        case end
        /// The server failed after the stream began (an HTTP-like status, an error code, a message).
        case failure(status: Int, error: String, message: String)
    }

    enum FrameType: UInt8 {
        case page = 1, record = 2, end = 3, failure = 4
    }

    /// Appends `page`'s frames to `out`.
    public static func write(_ page: PullPage, into out: inout [UInt8]) {
        frame(.page, into: &out) { out in
            out += ValueCodec.encode(.object([
                "cursor": .string(page.nextCursor), "remaining": .int(Int64(page.remaining)),
                "reset": .bool(page.cursorReset), "removed": .array(page.removed.map(Value.string)),
                "records": .int(Int64(page.records.count)),
            ]))
        }
        for record in page.records {
            frame(.record, into: &out) { ValueCodec.write(record, into: &$0) }
        }
    }

    /// Appends the end frame to `out`.
    public static func writeEnd(into out: inout [UInt8]) {
        frame(.end, into: &out) { _ in }
    }

    /// Appends a failure frame to `out`. `message` must be fit for the caller to read: it goes
    /// out as written.
    public static func writeFailure(status: Int, error: String, message: String, into out: inout [UInt8]) {
        frame(.failure, into: &out) { out in
            out += ValueCodec.encode(.object(["status": .int(Int64(status)), "error": .string(error), "message": .string(message)]))
        }
    }

    /// Writes a frame whose payload `body` appends.
    private static func frame(_ type: FrameType, into out: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        Frames.write(type.rawValue, into: &out, body)
    }
}

/// Reads a ``PageStream`` from bytes as they arrive, in any slicing.
///
/// Feed it with ``append(_:)``; ``next()`` returns each complete page or end/failure frame
/// and `nil` while it needs more bytes. Anything that is not a well-formed stream — a wrong
/// header, an unknown frame type, a record frame outside a page, a page with missing or extra
/// members, a frame over the size limit, bytes after the end frame, an undecodable value — is
/// ``SyncError/Code/invalidValue`` saying what and at which byte of the stream; the decoder
/// is then spent.
public struct PageStreamDecoder {
    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes of the stream consumed before `buffer[start]`, for error offsets.
    private var consumed = 0
    private var sawHeader = false
    private var ended = false
    private var open: (page: PullPage, expected: Int)?
    private let maxFrameBytes: Int

    /// A decoder that refuses frames longer than `maxFrameBytes`.
    public init(maxFrameBytes: Int = PageStream.defaultMaxFrameBytes) {
        self.maxFrameBytes = maxFrameBytes
    }

    /// `true` when the stream's end (or failure) frame has been read; a response that stops
    /// before it was cut short, wherever it stopped.
    public var isFinished: Bool { ended }

    /// Adds the next bytes of the stream.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame, or `nil` until more bytes arrive.
    public mutating func next() throws -> PageStream.Frame? {
        if !sawHeader {
            let header = PageStream.header
            guard buffer.count - start >= header.count else {
                // Refuse a wrong prefix as soon as it shows, not only once five bytes arrived.
                guard buffer[start...].elementsEqual(header.prefix(buffer.count - start)) else { throw refused("the response is not a page stream", at: 0) }
                return nil
            }
            guard buffer[start..<(start + header.count - 1)].elementsEqual(header.dropLast()) else {
                throw refused("the response is not a page stream", at: 0)
            }
            let version = buffer[start + header.count - 1]
            guard version == PageStream.version else {
                throw refused("the page stream's format version \(version) is not the \(PageStream.version) this client reads", at: 4)
            }
            advance(header.count)
            sawHeader = true
        }
        while true {
            guard buffer.count - start >= 5 else { return nil }
            let at = consumed
            guard !ended else { throw refused("bytes follow the end frame", at: at) }
            let typeByte = buffer[start]
            guard let type = PageStream.FrameType(rawValue: typeByte) else { throw refused("unknown frame type \(typeByte)", at: at) }
            let length = Frames.payloadLength(buffer, head: start)
            guard length <= maxFrameBytes else { throw refused("a frame of \(length) bytes exceeds the limit of \(maxFrameBytes)", at: at) }
            guard buffer.count - start - 5 >= length else { return nil }
            let payloadStart = start + 5
            advance(5 + length)
            let frame = try buffer.withUnsafeBytes { raw in
                try decode(type, UnsafeRawBufferPointer(rebasing: raw[payloadStart..<(payloadStart + length)]), at: at)
            }
            if let frame { return frame }
        }
    }

    private mutating func advance(_ count: Int) {
        start += count
        consumed += count
    }

    /// Decodes one frame's payload; `nil` for a record that does not yet complete its page.
    private mutating func decode(_ type: PageStream.FrameType, _ payload: UnsafeRawBufferPointer, at offset: Int) throws -> PageStream.Frame? {
        switch type {
        case .page:
            guard open == nil else { throw refused("a page frame arrived before the previous page's records", at: offset) }
            let header = try members(payload, at: offset, "page", ["cursor", "remaining", "reset", "removed", "records"])
            guard case .string(let cursor)? = header["cursor"], case .int(let remaining)? = header["remaining"], remaining >= 0,
                  case .bool(let reset)? = header["reset"], case .array(let removedValues)? = header["removed"],
                  case .int(let count)? = header["records"], count >= 0, count <= Int64(maxFrameBytes)
            else { throw refused("a page frame's members have the wrong types", at: offset) }
            var removed: [String] = []
            removed.reserveCapacity(removedValues.count)
            for value in removedValues {
                guard case .string(let id) = value else { throw refused("a page frame's 'removed' holds a non-string", at: offset) }
                removed.append(id)
            }
            var page = PullPage(records: [], nextCursor: cursor, remaining: Int(remaining), cursorReset: reset, removed: removed)
            if count == 0 { return .page(page) }
            page.records.reserveCapacity(Int(count))
            open = (page, Int(count))
            return nil
        case .record:
            guard let expected = open?.expected else { throw refused("a record frame arrived outside a page", at: offset) }
            var page = open.take()!.page   // taken out, so appending does not copy its records
            do {
                let record = try ValueCodec.decodeRecord(payload)
                // The codec keeps every bit pattern; a value may not be NaN (no store keeps one).
                for (name, value) in record.fields { try value.validate(path: name) }
                page.records.append(record)
            } catch let error as SyncError {
                throw refused("a record does not decode: \(error.message)", at: offset)
            }
            if page.records.count == expected { return .page(page) }
            open = (page, expected)
            return nil
        case .end:
            guard open == nil else { throw refused("the end frame arrived inside a page", at: offset) }
            guard payload.isEmpty else { throw refused("the end frame has a payload", at: offset) }
            ended = true
            return .end
        case .failure:
            let body = try members(payload, at: offset, "failure", ["status", "error", "message"])
            guard case .int(let status)? = body["status"], case .string(let error)? = body["error"],
                  case .string(let message)? = body["message"], let code = Int(exactly: status)
            else { throw refused("a failure frame's members have the wrong types", at: offset) }
            open = nil
            ended = true
            return .failure(status: code, error: error, message: message)
        }
    }

    /// The object a payload encodes, which must have exactly `names` as its members.
    private func members(_ payload: UnsafeRawBufferPointer, at offset: Int, _ what: String, _ names: Set<String>) throws -> [String: Value] {
        let value: Value
        do {
            value = try ValueCodec.decode(payload)
        } catch let error as SyncError {
            throw refused("a \(what) frame does not decode: \(error.message)", at: offset)
        }
        guard case .object(let object) = value, Set(object.keys) == names else {
            throw refused("a \(what) frame must hold an object with exactly \(names.sorted().joined(separator: ", "))", at: offset)
        }
        return object
    }

    private func refused(_ message: String, at offset: Int) -> SyncError {
        SyncError(.invalidValue, "page stream, byte \(offset): \(message)")
    }
}
