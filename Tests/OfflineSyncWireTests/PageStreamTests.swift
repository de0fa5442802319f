import OfflineSync
import OfflineSyncConformance
import OfflineSyncWire
import Testing

@Suite("Page stream: the binary pull pages of /v2/pull")
struct PageStreamTests {
    /// A random page: records with random fields and system properties, tombstones, removals.
    static func page(_ generator: inout SplitMix64, records: Int) -> PullPage {
        let items = (0..<records).map { i -> Record in
            var fields: [String: Value] = [:]
            for _ in 0..<generator.below(5) { fields[generator.string() + "f"] = generator.value() }
            return Record(id: "r\(i)-" + generator.string(), fields: fields,
                          version: generator.below(3) == 0 ? nil : "v" + generator.string(),
                          updatedAt: generator.below(3) == 0 ? nil : Timestamp(millisecondsSince1970: Int64(bitPattern: generator.next()) >> 12),
                          deleted: generator.below(5) == 0)
        }
        return PullPage(records: items, nextCursor: "1:\(generator.below(1_000_000))", remaining: generator.below(4) == 0 ? 0 : generator.below(10_000),
                        cursorReset: generator.below(4) == 0, removed: (0..<generator.below(3)).map { _ in generator.string() })
    }

    static func stream(_ pages: [PullPage], end: Bool = true) -> [UInt8] {
        var out = PageStream.header
        for page in pages { PageStream.write(page, into: &out) }
        if end { PageStream.writeEnd(into: &out) }
        return out
    }

    /// Feeds `bytes` in slices of the given sizes (cycled) and reads every frame.
    static func read(_ bytes: [UInt8], slices: [Int], maxFrameBytes: Int = PageStream.defaultMaxFrameBytes) throws -> [PageStream.Frame] {
        var decoder = PageStreamDecoder(maxFrameBytes: maxFrameBytes)
        var frames: [PageStream.Frame] = []
        var offset = 0, slice = 0
        while offset < bytes.count {
            let size = min(slices[slice % slices.count], bytes.count - offset)
            slice += 1
            bytes[offset..<(offset + size)].withUnsafeBytes { decoder.append($0) }
            offset += size
            while let frame = try decoder.next() { frames.append(frame) }
        }
        return frames
    }

    @Test("random pages survive the stream exactly, however the bytes are sliced")
    func roundTrip() throws {
        var generator = SplitMix64(seed: 20_261_126)
        for round in 0..<40 {
            let pages = (0..<(1 + generator.below(4))).map { _ in Self.page(&generator, records: generator.below(30)) }
            let bytes = Self.stream(pages)
            for slices in [[bytes.count], [1], [7, 1, 300], [4096]] {
                let frames = try Self.read(bytes, slices: slices)
                #expect(frames == pages.map { .page($0) } + [.end], "round \(round), slices \(slices)")
            }
        }
    }

    @Test("every value kind keeps its type and bits (-0.0, Int64.min, bytes, dates, nested objects)")
    func values() throws {
        let fields: [String: Value] = [
            "i": .int(.min), "j": .int(.max), "d": .double(-0.0), "tiny": .double(.leastNonzeroMagnitude), "s": .string("é e\u{301} 😀 \u{0}"),
            "b": .bytes([0, 255]), "t": .date(Timestamp(millisecondsSince1970: -62_135_596_800_000)), "yes": .bool(true),
            "nested": .object(["$date": .int(3), "a": .array([.null, .double(1.0), .int(1)])]),
        ]
        let page = PullPage(records: [Record(id: "x", fields: fields, version: "7", updatedAt: Timestamp(millisecondsSince1970: 5))],
                            nextCursor: "1:1", remaining: 0)
        let frames = try Self.read(Self.stream([page]), slices: [3])
        guard case .page(let back)? = frames.first else { Issue.record("no page"); return }
        #expect(back == page)
        if case .double(let d)? = back.records.first?.fields["d"] { #expect(d.bitPattern == (-0.0).bitPattern) } else { Issue.record("d lost") }
    }

    @Test("a stream cut anywhere yields only whole pages, and says it was cut")
    func truncation() throws {
        var generator = SplitMix64(seed: 7)
        let pages = (0..<3).map { _ in Self.page(&generator, records: 4) }
        let bytes = Self.stream(pages)
        for cut in 0..<bytes.count {
            var decoder = PageStreamDecoder()
            bytes[0..<cut].withUnsafeBytes { decoder.append($0) }
            var read: [PageStream.Frame] = []
            while let frame = try decoder.next() { read.append(frame) }
            #expect(!decoder.isFinished, "cut at \(cut) of \(bytes.count)")
            #expect(read == Array(pages.prefix(read.count)).map { .page($0) }, "cut at \(cut)")
        }
    }

    @Test("a failure frame reads back with its status, code and message")
    func failureFrame() throws {
        var out = PageStream.header
        PageStream.write(PullPage(records: [], nextCursor: "1:0", remaining: 5), into: &out)
        PageStream.writeFailure(status: 503, error: "unavailable", message: "the server is busy; retry later", into: &out)
        let frames = try Self.read(out, slices: [2])
        #expect(frames.last == .failure(status: 503, error: "unavailable", message: "the server is busy; retry later"))
    }

    /// A frame of `type` with `payload`, as the server writes it.
    static func frame(_ type: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        return [type, UInt8(n & 0xFF), UInt8((n >> 8) & 0xFF), UInt8((n >> 16) & 0xFF), UInt8(n >> 24)] + payload
    }

    @Test("anything but a well-formed stream is invalidValue, saying what and where")
    func malformed() throws {
        var generator = SplitMix64(seed: 11)
        let good = Self.stream([Self.page(&generator, records: 2)])
        var pageFrame = PageStream.header
        PageStream.write(PullPage(records: [Record(id: "a")], nextCursor: "1:1", remaining: 0), into: &pageFrame)
        // The record's frame is what follows the page frame of the same page without records.
        var headerOnly = PageStream.header
        PageStream.write(PullPage(records: [], nextCursor: "1:1", remaining: 0), into: &headerOnly)
        let cases: [(String, [UInt8], String)] = [
            ("JSON instead of the stream", Array(#"{"records":[]}"#.utf8), "not a page stream"),
            ("another format version", Array("OSPS".utf8) + [2], "format version 2"),
            ("an unknown frame type", PageStream.header + Self.frame(9, []), "unknown frame type 9"),
            ("a record outside a page", PageStream.header + Array(pageFrame[(headerOnly.count)...]), "outside a page"),
            ("bytes after the end frame", good + Self.frame(3, []), "follow the end frame"),
            ("an end frame with a payload", PageStream.header + Self.frame(3, [1]), "end frame has a payload"),
            ("a page frame that is not an object", PageStream.header + Self.frame(1, [3, 2]), "exactly cursor"),
            ("a truncated value inside a frame", PageStream.header + Self.frame(1, [9, 5]), "does not decode"),
        ]
        for (what, bytes, expected) in cases {
            let error = #expect(throws: SyncError.self, "\(what)") { _ = try Self.read(bytes, slices: [bytes.count]) }
            #expect(error?.code == .invalidValue, "\(what)")
            #expect(error?.message.contains(expected) == true, "\(what): \(error?.message ?? "")")
            #expect(error?.message.hasPrefix("page stream, byte ") == true, "\(what)")
        }
        // A frame longer than the limit is refused from its header, before its bytes arrive.
        let big = PageStream.header + [1, 0, 0, 0, 1]
        let error = #expect(throws: SyncError.self) { _ = try Self.read(big, slices: [big.count], maxFrameBytes: 1 << 20) }
        #expect(error?.message.contains("exceeds the limit") == true)
    }

    @Test("a record holding NaN is refused; infinities, which JSON cannot carry, arrive")
    func notANumber() throws {
        var bytes = PageStream.header
        PageStream.write(PullPage(records: [Record(id: "a", fields: ["x": .double(.infinity), "y": .array([.double(-.infinity)])])],
                                  nextCursor: "1:1", remaining: 0), into: &bytes)
        let frames = try Self.read(bytes, slices: [bytes.count])
        guard case .page(let page)? = frames.first else { Issue.record("no page"); return }
        #expect(page.records.first?.fields["x"] == .double(.infinity))
        var nan = PageStream.header
        PageStream.write(PullPage(records: [Record(id: "a", fields: ["x": .array([.double(.nan)])])], nextCursor: "1:1", remaining: 0),
                         into: &nan)
        let error = #expect(throws: SyncError.self) { _ = try Self.read(nan, slices: [nan.count]) }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("NaN") == true, "\(error?.message ?? "")")
    }

    @Test("a record that is not valid UTF-8 is refused, not repaired")
    func invalidUTF8() throws {
        var bytes = PageStream.header
        PageStream.write(PullPage(records: [Record(id: "ab", fields: ["t": .string("xy")])], nextCursor: "1:1", remaining: 0), into: &bytes)
        // Replace the field value's "xy" with an invalid sequence of the same length.
        let at = bytes.lastIndex(of: UInt8(ascii: "x"))!
        bytes[at] = 0xC3
        bytes[at + 1] = 0x28
        let error = #expect(throws: SyncError.self) { _ = try Self.read(bytes, slices: [bytes.count]) }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("UTF-8") == true, "\(error?.message ?? "")")
    }
}
