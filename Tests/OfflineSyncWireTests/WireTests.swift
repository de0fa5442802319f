import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncWire
import Testing

/// Encodes to bytes, parses them back and decodes: what crosses the network.
private func roundTrip(_ value: Value) throws -> Value {
    try Wire.value(try JSON.parse(Wire.json(value).encoded))
}

/// Random values from the conformance suite's seeded generator.
extension SplitMix64 {
    mutating func string() -> String {
        let pieces = ["a", "Z", "$", "$$", "\"", "\\", "\u{0}", "\n", "\u{1F}", "é", "e\u{301}", "😀", "中", "/", " ", "\u{7F}", "\u{FFFF}"]
        return (0..<below(6)).map { _ in pieces[below(pieces.count)] }.joined()
    }

    mutating func value(depth: Int = 0) -> Value {
        switch below(depth > 3 ? 7 : 9) {
        case 0: return .null
        case 1: return .bool(below(2) == 0)
        case 2: return .int(Int64(bitPattern: next()) >> UInt64(below(64)))
        case 3:
            let d = Double(bitPattern: next())
            return .double(d.isFinite ? d : Double(below(1000)) / 7)
        case 4: return .string(string())
        case 5: return .bytes((0..<below(9)).map { _ in UInt8(truncatingIfNeeded: next()) })
        case 6: return .date(Timestamp(millisecondsSince1970: Int64(bitPattern: next()) >> 12))
        case 7: return .array((0..<below(4)).map { _ in value(depth: depth + 1) })
        default:
            var object: [String: Value] = [:]
            for _ in 0..<below(4) { object[string()] = value(depth: depth + 1) }
            return .object(object)
        }
    }
}

@Suite("Wire JSON: lossless values and protocol messages")
struct WireTests {
    @Test("every edge value round-trips exactly", arguments: [
        Value.null, .bool(true), .bool(false), .int(0), .int(-1), .int(Int64.max), .int(Int64.min),
        .double(0.0), .double(-0.0), .double(1.0), .double(-1.5), .double(0.1), .double(1e300), .double(-1e-300),
        .double(Double.leastNonzeroMagnitude), .double(Double.greatestFiniteMagnitude), .double(9_007_199_254_740_993.0), .double(1e16),
        .double(.infinity), .double(-.infinity), .object(["$double": .double(-.infinity)]),
        .string(""), .string("quote \" backslash \\ slash / nul \u{0} bell \u{7} del \u{7F}"), .string("é e\u{301} 😀 中"),
        .bytes([]), .bytes([0, 255, 1, 254]), .date(Timestamp(millisecondsSince1970: 0)),
        .date(Timestamp(millisecondsSince1970: -62_135_596_800_000)), .date(Timestamp(millisecondsSince1970: Int64.max)),
        .array([]), .array([.int(1), .double(1.0), .null]), .object([:]),
        .object(["$bytes": .string("not bytes"), "$date": .int(3), "$$x": .bool(true), "$": .null, "plain": .array([.bytes([1])])]),
    ])
    func edgeValues(value: Value) throws {
        let back = try roundTrip(value)
        #expect(back == value)
        if case .double(let d) = value, case .double(let e) = back {
            #expect(d.bitPattern == e.bitPattern)
        }
    }

    @Test func randomValuesRoundTrip() throws {
        var generator = SplitMix64(seed: 20_261_123)
        for _ in 0..<2_000 {
            let value = generator.value()
            #expect(try roundTrip(value) == value, "\(value)")
        }
    }

    @Test("an infinity travels as {\"$double\": …}; NaN and other $double forms are refused")
    func nonFiniteDoubles() throws {
        #expect(String(decoding: Wire.json(.double(-.infinity)).encoded, as: UTF8.self) == #"{"$double":"-Infinity"}"#)
        #expect(try Wire.value(JSON.parse(Array(#"{"$double":"Infinity"}"#.utf8))) == .double(.infinity))
        for refused in [#"{"$double":"NaN"}"#, #"{"$double":1.0}"#, #"{"$double":"inf"}"#, #"{"$double":"Infinity","x":1}"#] {
            let error = #expect(throws: SyncError.self, "\(refused)") { try Wire.value(JSON.parse(Array(refused.utf8))) }
            #expect(error?.code == .invalidValue, "\(refused)")
        }
        // A record pushed with an infinite field keeps it (it was written as null: the field was lost).
        let record = Record(id: "r", fields: ["x": .double(.infinity)])
        #expect(try Wire.record(JSON.parse(Wire.json(record).encoded)) == record)
    }

    @Test func integersAndDoublesStayApart() throws {
        #expect(try Wire.value(JSON.parse(Array("1".utf8))) == .int(1))
        #expect(try Wire.value(JSON.parse(Array("1.0".utf8))) == .double(1.0))
        #expect(try Wire.value(JSON.parse(Array("1e2".utf8))) == .double(100))
        #expect(try Wire.value(JSON.parse(Array("-9223372036854775808".utf8))) == .int(Int64.min))
        #expect(String(decoding: Wire.json(.double(2.0)).encoded, as: UTF8.self) == "2.0")
        #expect(String(decoding: Wire.json(.int(2)).encoded, as: UTF8.self) == "2")
        for outOfRange in ["9223372036854775808", "-9223372036854775809", "1e400"] {
            let error = #expect(throws: SyncError.self) { try Wire.value(JSON.parse(Array(outOfRange.utf8))) }
            #expect(error?.code == .invalidValue)
        }
    }

    @Test("malformed JSON is a typed error naming the offset", arguments: [
        "", " ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", ".5", "-", "1e", "+1", "tru", "nul", "\"abc",
        "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\u{1}b\"", "[1] 2", "{\"a\":1,\"a\":2}",
        "NaN", "Infinity", "[" + String(repeating: "[", count: 300) + String(repeating: "]", count: 301),
    ])
    func malformed(text: String) {
        let error = #expect(throws: SyncError.self) { try JSON.parse(Array(text.utf8)) }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("at byte") == true)
    }

    @Test func invalidUTF8IsRefused() {
        for bytes: [UInt8] in [[0x22, 0xC3, 0x22], [0x22, 0xFF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22]] {
            #expect(throws: SyncError.self) { try JSON.parse(bytes) }
        }
    }

    @Test func escapesAndSurrogatePairsDecode() throws {
        let parsed = try JSON.parse(Array(#""\u00e9\ud83d\ude00\n\t\/\"""#.utf8))
        #expect(parsed == .string("é😀\n\t/\""))
        #expect(try JSON.parse(Array(" [ 1 , { \"k\" : null } ] \n".utf8)) == .array([.number("1"), .object([("k", .null)])]))
    }

    @Test("values that are not the encoding are refused", arguments: [
        #"{"$bytes": 3}"#, #"{"$bytes": "@@@"}"#, #"{"$date": 1.5}"#, #"{"$date": "x"}"#, #"{"$other": 1}"#,
        #"{"$bytes": "AA==", "x": 1}"#,
    ])
    func badTaggedValues(text: String) {
        let error = #expect(throws: SyncError.self) { try Wire.value(JSON.parse(Array(text.utf8))) }
        #expect(error?.code == .invalidValue)
    }

    static let record = Record(id: "r1 \u{0} é", fields: ["n": .int(3), "$tag": .string("x"), "blob": .bytes([9])],
                               version: "v-7", updatedAt: Timestamp(millisecondsSince1970: 1_700_000_000_123), deleted: false)

    @Test func recordsAndTombstonesRoundTrip() throws {
        for record in [Self.record, Record(id: "gone", version: "v2", deleted: true), Record(id: "bare")] {
            #expect(try Wire.record(JSON.parse(Wire.json(record).encoded)) == record)
        }
        let error = #expect(throws: SyncError.self) { try Wire.record(JSON.parse(Array(#"{"id":"a","extra":1}"#.utf8))) }
        #expect(error?.message.contains("unknown member 'extra'") == true)
        #expect(throws: SyncError.self) { try Wire.record(JSON.parse(Array(#"{"id":"a","fields":[1]}"#.utf8))) }
        #expect(throws: SyncError.self) { try Wire.record(JSON.parse(Array(#"{"fields":{}}"#.utf8))) }
    }

    @Test func predicatesRoundTrip() throws {
        let predicates: [QueryPredicate] = [
            .all, .compare("n", .greaterOrEqual, .double(-0.0)), .isIn("s", [.string("a"), .null, .int(2)]), .isNull("x"),
            .contains("s", "é\u{0}"), .hasPrefix("id", ""), .hasSuffix("s", "語\u{0}"), .and([]), .or([]),
            .not(.and([.compare("b", .equal, .bytes([1])), .or([.isNull("a"), .not(.compare("t", .less, .date(Timestamp(millisecondsSince1970: 5))))])])),
            .compareExpressions(.call(.lowercased, [.field("s")]), .equal, .literal("a")),
            .not(.isNullExpression(.call(.substring, [.field("s"), .literal(.int(1)), .call(.add, [.field("n"), .literal(.double(0.5))])]))),
        ]
        for predicate in predicates {
            #expect(try Wire.predicate(JSON.parse(Wire.json(predicate).encoded)) == predicate)
        }
        for bad in [#"{"op":"xor"}"#, #"{"op":"compare","field":"a","cmp":"~","value":1}"#, #"{"op":"in","field":"a","values":1}"#,
                    #"{"op":"all","extra":1}"#, #"[]"#, #"{"op":"not"}"#,
                    #"{"op":"isNullExpression","of":{"call":"frobnicate","args":[]}}"#,
                    #"{"op":"compareExpressions","left":{"field":"a"},"cmp":"==","right":{"nothing":1}}"#] {
            #expect(throws: SyncError.self) { try Wire.predicate(JSON.parse(Array(bad.utf8))) }
        }
    }

    @Test func pushAndPullMessagesRoundTrip() throws {
        let operations = [
            PushOperation(id: "op1", table: "todos", itemId: "t1", kind: .insert, item: Self.record, baseVersion: nil),
            PushOperation(id: "op2", table: "todos", itemId: "t1", kind: .delete, item: nil, baseVersion: "v-7"),
        ]
        for operation in operations {
            #expect(try Wire.operation(JSON.parse(Wire.json(operation).encoded)) == operation)
        }
        let results = [
            PushResult(operationId: "op1", outcome: .applied(Self.record)),
            PushResult(operationId: "op2", outcome: .conflict(serverRecord: Record(id: "t1", version: "v9"))),
            PushResult(operationId: "op3", outcome: .rejected(reason: "no such table", status: 404)),
            PushResult(operationId: "op4", outcome: .rejected(reason: "bad", status: nil)),
        ]
        for result in results {
            #expect(try Wire.result(JSON.parse(Wire.json(result).encoded)) == result)
        }
        let request = PullRequest(table: "todos", predicate: .compare("done", .equal, .bool(false)), cursor: "e:12", limit: 250)
        #expect(try Wire.pullRequest(JSON.parse(Wire.json(request).encoded)) == request)
        #expect(try Wire.pullRequest(JSON.parse(Array(#"{"table":"t"}"#.utf8))) == PullRequest(table: "t"))
        #expect(throws: SyncError.self) { try Wire.pullRequest(JSON.parse(Array(#"{"table":"t","limit":-1}"#.utf8))) }
        let page = PullPage(records: [Self.record, Record(id: "x", deleted: true)], nextCursor: "e:14", remaining: 3, cursorReset: true)
        #expect(try Wire.pullPage(JSON.parse(Wire.json(page).encoded)) == page)
        #expect(throws: SyncError.self) { try Wire.operation(JSON.parse(Array(#"{"id":"a","table":"t","itemId":"i","kind":"upsert"}"#.utf8))) }
    }

    @Test func outputIsDeterministicAndCompact() {
        let value: Value = .object(["b": .int(1), "a": .array([.string("x\ny")]), "$c": .null])
        #expect(String(decoding: Wire.json(value).encoded, as: UTF8.self) == #"{"$$c":null,"a":["x\ny"],"b":1}"#)
    }
}

@Suite("Wire: direct writers")
struct WireWriterTests {
    @Test("the direct writers produce exactly the bytes of the JSON trees")
    func sameBytes() throws {
        var rng = SplitMix64(seed: 42)
        let values: [Value] = [
            .null, true, false, .int(0), .int(.min), .int(.max), .double(0.5), .double(-0.0), .double(1e300), .double(.nan),
            .double(.infinity), .double(-.infinity),
            "", "plain", "quote \" backslash \\ newline \n tab \t cr \r nul \u{0} bell \u{7} é 😀", .bytes([]), .bytes([0, 255, 7]),
            .date(Timestamp(millisecondsSince1970: -1)), .array([1, "a", .null, .array([])]),
            .object(["$x": 1, "$$y": 2, "b": .object(["z": .bytes([1])]), "a": .array([.date(Timestamp(millisecondsSince1970: 5))])]),
        ]
        for value in values {
            var out: [UInt8] = []
            Wire.write(value, into: &out)
            #expect(out == Wire.json(value).encoded, "\(value)")
        }
        var records: [Record] = []
        for i in 0..<50 {
            // NaN is written so that reading it is refused (values never hold one).
            let finite = values.filter { if case .double(let d) = $0 { return !d.isNaN } else { return true } }
            let fields = Dictionary(uniqueKeysWithValues: (0..<Int(rng.next() % 6)).map { ("f\($0)", finite[Int(rng.next() % UInt64(finite.count))]) })
            records.append(Record(id: "r\(i) \"é\"", fields: fields, version: i % 2 == 0 ? "v\(i)" : nil,
                                  updatedAt: i % 3 == 0 ? Timestamp(millisecondsSince1970: Int64(i)) : nil, deleted: i % 5 == 0))
        }
        for record in records {
            var out: [UInt8] = []
            Wire.write(record, into: &out)
            #expect(out == Wire.json(record).encoded)
        }
        let page = PullPage(records: records, nextCursor: "e:9", remaining: 3, cursorReset: true)
        #expect(Wire.encode(page) == Wire.json(page).encoded)
        #expect(try Wire.pullPage(JSON.parse(Wire.encode(page))) == page)
        // Ids that left the view under sync rules: written only when there are some.
        let withRemovals = PullPage(records: Array(records.prefix(2)), nextCursor: "e:v:12", remaining: 0,
                                    removed: ["gone", "quote \" é", ""])
        #expect(Wire.encode(withRemovals) == Wire.json(withRemovals).encoded)
        #expect(try Wire.pullPage(JSON.parse(Wire.encode(withRemovals))) == withRemovals)
        #expect(!String(decoding: Wire.encode(page), as: UTF8.self).contains("removed"))
        #expect(throws: SyncError.self) { try Wire.pullPage(JSON.parse(Array(#"{"records":[],"nextCursor":"c","removed":[1]}"#.utf8))) }
        let operations = records.map { PushOperation(id: "op-\($0.id)", table: "t", itemId: $0.id, kind: $0.deleted ? .delete : .update,
                                                     item: $0.deleted ? nil : $0, baseVersion: $0.version) }
        #expect(Wire.encode(operations: operations) == JSON.object([("operations", .array(operations.map(Wire.json)))]).encoded)
        let results = records.enumerated().map { index, record in
            PushResult(operationId: "op-\(index)", outcome: index % 3 == 0 ? .applied(record)
                       : index % 3 == 1 ? .conflict(serverRecord: record) : .rejected(reason: "no \"way\"", status: index % 2 == 0 ? 400 : nil))
        }
        #expect(Wire.encode(results: results) == JSON.object([("results", .array(results.map(Wire.json)))]).encoded)
    }

    @Test("return=minimal: an applied insert or update that echoes its item is sent without it and rebuilt exactly; nothing else is")
    func minimalResults() throws {
        let item = Record(id: "t1", fields: ["title": .string("é"), "n": .int(3), "tags": .array([.string("a")])])
        let stored = Record(id: "t1", fields: item.fields, version: "v-1", updatedAt: Timestamp(millisecondsSince1970: 1_795_443_753_777))
        let operations = [
            PushOperation(id: "insert", table: "t", itemId: "t1", kind: .insert, item: item, baseVersion: nil),
            PushOperation(id: "update", table: "t", itemId: "t1", kind: .update, item: item, baseVersion: "v-0"),
            PushOperation(id: "delete", table: "t", itemId: "t1", kind: .delete, item: nil, baseVersion: "v-1"),
            PushOperation(id: "replayed", table: "t", itemId: "t1", kind: .update, item: Record(id: "t1", fields: ["title": .string("e\u{301}")]), baseVersion: nil),
            PushOperation(id: "conflict", table: "t", itemId: "t1", kind: .insert, item: item, baseVersion: nil),
            PushOperation(id: "rejected", table: "t", itemId: "t1", kind: .insert, item: item, baseVersion: nil),
            PushOperation(id: "unversioned", table: "t", itemId: "t1", kind: .insert, item: item, baseVersion: nil),
        ]
        let results = [
            PushResult(operationId: "insert", outcome: .applied(stored)),
            PushResult(operationId: "update", outcome: .applied(stored)),
            PushResult(operationId: "delete", outcome: .applied(Record(id: "t1", fields: item.fields, version: "v-2", deleted: true))),
            // A stored outcome whose fields are not what this attempt sent (é composed, not
            // decomposed): the client could not rebuild it, so it is sent whole.
            PushResult(operationId: "replayed", outcome: .applied(Record(id: "t1", fields: ["title": .string("é")], version: "v-3"))),
            PushResult(operationId: "conflict", outcome: .conflict(serverRecord: stored)),
            PushResult(operationId: "rejected", outcome: .rejected(reason: "no", status: 400)),
            PushResult(operationId: "unversioned", outcome: .applied(Record(id: "t1", fields: item.fields))),
        ]
        let minimal = Wire.encode(results: results, minimalFor: operations)
        guard case .array(let items)? = try JSON.parse(minimal)["results"] else { Issue.record("no results"); return }
        let withRecord = items.map { $0["record"] != nil }
        #expect(withRecord == [false, false, true, true, true, false, false])
        #expect(minimal.count < Wire.encode(results: results).count)
        let decoded = try items.enumerated().map { try Wire.result($1, answering: operations[$0]) }
        #expect(decoded == results, "every result as the whole answer would carry it")
        // Without the operation, or against another one, a minimal result cannot be read.
        #expect(throws: SyncError.self) { try Wire.result(items[0]) }
        #expect(throws: SyncError.self) { try Wire.result(items[0], answering: operations[2]) }
        #expect(throws: SyncError.self) { try Wire.result(items[0], answering: operations[1]) }
        // The minimal members belong only to an applied result without its record.
        for text in [#"{"operationId":"x","outcome":"applied","record":{"id":"t1"},"version":"v"}"#,
                     #"{"operationId":"x","outcome":"rejected","reason":"no","deleted":false}"#,
                     #"{"operationId":"insert","outcome":"applied","version":"v"}"#] {
            #expect(throws: SyncError.self) { try Wire.result(JSON.parse(Array(text.utf8)), answering: operations[0]) }
        }
        // Without the preference the answer is as it always was.
        #expect(Wire.encode(results: results, minimalFor: nil) == Wire.encode(results: results))
    }
}

@Suite("WireDate: ISO 8601 and HTTP-dates")
struct WireDateTests {
    @Test("ISO 8601 and HTTP-dates read back what they write; malformed text is nil")
    func roundTrips() {
        for ms: Int64 in [0, -1, 1_795_443_753_777, 951_782_400_000 /* 2000-02-29 */, 253_402_300_799_999] {
            let t = Timestamp(millisecondsSince1970: ms)
            #expect(WireDate.parseISO8601(WireDate.iso8601(t)) == t)
            #expect(WireDate.parseHTTPDate(WireDate.httpDate(t)) == (ms - ((ms % 1000) + 1000) % 1000))
        }
        #expect(WireDate.iso8601(Timestamp(millisecondsSince1970: 1_795_443_753_777)) == "2026-11-23T14:22:33.777Z")
        #expect(WireDate.httpDate(Timestamp(millisecondsSince1970: 1_795_443_753_777)) == "Mon, 23 Nov 2026 14:22:33 GMT")
        #expect(WireDate.parseISO8601("2026-11-23T15:22:33.7+01:00") == Timestamp(millisecondsSince1970: 1_795_443_753_700))
        for bad in ["", "2026-11-23", "2026-11-23T14:22:33", "2026-02-30T00:00:00Z", "2026-11-23T14:22:33Zx"] {
            #expect(WireDate.parseISO8601(bad) == nil, "\(bad)")
        }
        for bad in ["", "Mon, 31 Nov 2026 00:00:00 GMT", "Monday, 23-Nov-26 14:22:33 GMT", "Mon, 23 Nov 2026 25:00:00 GMT"] {
            #expect(WireDate.parseHTTPDate(bad) == nil, "\(bad)")
        }
    }
}
