import OfflineSync
import OfflineSyncStoreKit
import OfflineSyncWire
import Testing

/// A rejected push result's code: typed in Swift (``PushResult/rejectionCode``), written as
/// the reason's `<code>: ` prefix exactly as servers always wrote it, and read from that
/// prefix or from a code sent apart, in the JSON answer and the binary one alike.
@Suite("Wire: rejection codes")
struct RejectionCodeTests {
    static let operation = PushOperation(id: "op1", table: "inspections", itemId: "i1", kind: .insert,
                                         item: Record(id: "i1", fields: ["site": "north"]), baseVersion: nil)
    static let reason = "attachment 3f1e is not on the server for this identity; upload it before the record"
    static let coded = PushResult(operationId: "op1", outcome: .rejected(reason: reason, status: 409), rejectionCode: .attachmentMissing)
    /// What a server wrote before codes had a type: the code inside the reason.
    static let prefixed = PushResult(operationId: "op1", outcome: .rejected(reason: "attachmentMissing: " + reason, status: 409))

    static func binary(_ results: [PushResult]) throws -> [PushResult] {
        try PushBatch.encode(results: results, answering: [operation]).withUnsafeBytes {
            try PushBatch.decodeResults($0, answering: [operation])
        }
    }

    /// One binary answer with one result frame whose payload is `head`, framed by hand.
    static func binaryAnswer(head: Value) -> [UInt8] {
        let payload = ValueCodec.encode(head)
        let count = UInt32(payload.count)
        var out = PushBatch.resultsHeader
        out.append(1)
        out += [UInt8(truncatingIfNeeded: count), UInt8(truncatingIfNeeded: count >> 8),
                UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 24)]
        out += payload
        out += [3, 0, 0, 0, 0]
        return out
    }

    // Against the code before: `PushResult` had no code, and the reason kept its prefix.
    @Test("the code goes as the reason's prefix, byte for byte as before, and comes back typed with the prefix off")
    func prefixOnTheWire() throws {
        // The bytes are those of a result whose reason carries the prefix: what older clients read.
        #expect(Wire.json(Self.coded).encoded == Wire.json(Self.prefixed).encoded)
        #expect(Wire.encode(results: [Self.coded]) == Wire.encode(results: [Self.prefixed]))
        #expect(PushBatch.encode(results: [Self.coded], answering: [Self.operation])
                == PushBatch.encode(results: [Self.prefixed], answering: [Self.operation]))
        let text = String(decoding: Wire.json(Self.coded).encoded, as: UTF8.self)
        #expect(text.contains(#""reason":"attachmentMissing: attachment 3f1e"#), "\(text)")
        // Read back: the code typed, the reason a sentence.
        #expect(try Wire.result(JSON.parse(Wire.json(Self.coded).encoded)) == Self.coded)
        #expect(try Self.binary([Self.coded]) == [Self.coded])
        // An older server's answer reads the same.
        #expect(try Wire.result(JSON.parse(Wire.json(Self.prefixed).encoded)) == Self.coded)
        #expect(try Self.binary([Self.prefixed]) == [Self.coded])
        // A forbidden write, as the rules refuse it.
        let refused = try Wire.result(JSON.parse(Array(#"{"operationId":"op2","outcome":"rejected","reason":"forbidden: no grant","status":403}"#.utf8)))
        #expect(refused == PushResult(operationId: "op2", outcome: .rejected(reason: "no grant", status: 403), rejectionCode: .forbidden))
    }

    @Test("a reason that only looks like it has a code keeps it: an unknown word, a code of the wire's own, no space")
    func notACode() throws {
        for reason in ["no: such table", "invalidJSON: a wire code with no SyncError twin", "forbidden:no space", "Forbidden: case",
                       "", "forbidden", ": nothing before"] {
            let result = PushResult(operationId: "op1", outcome: .rejected(reason: reason, status: 400))
            #expect(try Wire.result(JSON.parse(Wire.json(result).encoded)) == result, "\(reason)")
            #expect(try Self.binary([result]) == [result], "\(reason)")
        }
    }

    @Test("a code sent apart is read too: a JSON member or a fifth binary element; an unknown one falls back on the prefix")
    func codeSentApart() throws {
        let member = try Wire.result(JSON.parse(Array(
            #"{"operationId":"op1","outcome":"rejected","reason":"attachmentMissing: gone","status":409,"code":"attachmentMissing"}"#.utf8)))
        #expect(member == PushResult(operationId: "op1", outcome: .rejected(reason: "gone", status: 409), rejectionCode: .attachmentMissing))
        let bare = try Wire.result(JSON.parse(Array(#"{"operationId":"op1","outcome":"rejected","reason":"gone","status":409,"code":"attachmentMissing"}"#.utf8)))
        #expect(bare == member)
        let unknown = try Wire.result(JSON.parse(Array(#"{"operationId":"op1","outcome":"rejected","reason":"forbidden: no","status":403,"code":"someday"}"#.utf8)))
        #expect(unknown == PushResult(operationId: "op1", outcome: .rejected(reason: "no", status: 403), rejectionCode: .forbidden))
        #expect(throws: SyncError.self) {
            try Wire.result(JSON.parse(Array(#"{"operationId":"op1","outcome":"conflict","record":{"id":"i1"},"code":"conflict"}"#.utf8)))
        }

        let five = Self.binaryAnswer(head: .array(["op1", .int(3), "gone", .int(409), "attachmentMissing"]))
        let read = try five.withUnsafeBytes { try PushBatch.decodeResults($0, answering: [Self.operation]) }
        #expect(read == [PushResult(operationId: "op1", outcome: .rejected(reason: "gone", status: 409), rejectionCode: .attachmentMissing)])
        let four = Self.binaryAnswer(head: .array(["op1", .int(3), "attachmentMissing: gone", .int(409)]))
        #expect(try four.withUnsafeBytes { try PushBatch.decodeResults($0, answering: [Self.operation]) } == read)
        let wrong = Self.binaryAnswer(head: .array(["op1", .int(3), "gone", .int(409), .int(7)]))
        #expect(throws: SyncError.self) { try wrong.withUnsafeBytes { try PushBatch.decodeResults($0, answering: [Self.operation]) } }
    }

    @Test("every code round-trips through an error body, and the codes that are SyncError codes map both ways")
    func errorBodies() throws {
        #expect(Set(WireErrorCode.all.map(\.rawValue)).count == WireErrorCode.all.count)
        for code in WireErrorCode.all {
            let body = WireErrorBody(code: code, message: "why \"quoted\"")
            #expect(String(decoding: body.encoded, as: UTF8.self) == #"{"error":{"code":""# + code.rawValue + #"","message":"why \"quoted\""}}"#)
            let read = try #require(WireErrorBody(json: try JSON.parse(body.encoded)))
            #expect(read == body)
            #expect(read.code == code)
            #expect(WireErrorCode(rawValue: code.rawValue) == code)
            if let twin = code.syncErrorCode {
                #expect(twin.description == code.rawValue)
                #expect(WireErrorCode(syncErrorCode: twin) == code)
            }
        }
        #expect(WireErrorCode.internalError.rawValue == "internal")
        #expect(WireErrorCode(rawValue: "someday") == nil)
        let unknown = try #require(WireErrorBody(json: try JSON.parse(Array(#"{"error":{"code":"someday","message":"m"}}"#.utf8))))
        #expect(unknown.code == nil && unknown.rawCode == "someday")
        #expect(WireErrorBody(json: try JSON.parse(Array(#"{"message":"not ours"}"#.utf8))) == nil)
        #expect(WireErrorCode(syncErrorCode: .transient) == nil)
    }
}
