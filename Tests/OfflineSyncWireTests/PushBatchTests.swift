import OfflineSync
import OfflineSyncConformance
import OfflineSyncStoreKit
import OfflineSyncWire
import Testing

@Suite("Binary push: the batches and answers of /v2/push")
struct PushBatchTests {
    /// A random batch: every kind, with and without items and base versions, random fields.
    static func operations(_ generator: inout SplitMix64, count: Int) -> [PushOperation] {
        (0..<count).map { i in
            let kind = [OperationKind.insert, .update, .delete][generator.below(3)]
            var fields: [String: Value] = [:]
            for _ in 0..<generator.below(5) { fields[generator.string() + "f"] = generator.value() }
            let item = kind == .delete && generator.below(2) == 0 ? nil : Record(id: "item-\(i)", fields: fields)
            return PushOperation(id: "op-\(i)-" + generator.string(), table: "t" + generator.string(), itemId: "item-\(i)",
                                 kind: kind, item: item, baseVersion: generator.below(2) == 0 ? nil : "v" + generator.string())
        }
    }

    static func decode(_ bytes: [UInt8]) throws -> [PushOperation] {
        try bytes.withUnsafeBytes { try PushBatch.decodeOperations($0) }
    }

    static func decode(_ bytes: [UInt8], answering operations: [PushOperation]) throws -> [PushResult] {
        try bytes.withUnsafeBytes { try PushBatch.decodeResults($0, answering: operations) }
    }

    /// Every outcome, for `operations`: applied as sent (echoed), applied otherwise (a delete's
    /// tombstone, a record that differs from the item), conflicts, rejections with and without
    /// a status.
    static func results(_ generator: inout SplitMix64, answering operations: [PushOperation]) -> [PushResult] {
        operations.map { operation in
            let stamp = Timestamp(millisecondsSince1970: Int64(generator.below(1 << 40)))
            let server = Record(id: operation.itemId, fields: ["server": .int(Int64(generator.below(100)))],
                                version: "s" + generator.string(), updatedAt: stamp, deleted: generator.below(4) == 0)
            switch generator.below(5) {
            case 0 where operation.item != nil && operation.kind != .delete:
                return PushResult(operationId: operation.id, outcome: .applied(operation.storedRecord(
                    version: generator.below(4) == 0 ? nil : "v2", updatedAt: generator.below(4) == 0 ? nil : stamp, deleted: false)!))
            case 0, 1: return PushResult(operationId: operation.id, outcome: .applied(server))
            case 2: return PushResult(operationId: operation.id, outcome: .conflict(serverRecord: server))
            case 3: return PushResult(operationId: operation.id, outcome: .rejected(reason: "no: " + generator.string(), status: 403))
            default: return PushResult(operationId: operation.id, outcome: .rejected(reason: "", status: nil))
            }
        }
    }

    @Test("random batches and their answers survive the binary form exactly, and the JSON form agrees")
    func roundTrip() throws {
        var generator = SplitMix64(seed: 20_261_127)
        for round in 0..<60 {
            let operations = Self.operations(&generator, count: generator.below(40))
            #expect(try Self.decode(PushBatch.encode(operations: operations)) == operations, "round \(round)")
            let results = Self.results(&generator, answering: operations)
            let answer = PushBatch.encode(results: results, answering: operations)
            #expect(try Self.decode(answer, answering: operations) == results, "round \(round)")
            // The JSON form's minimal answer, decoded, is the same results.
            let json = try JSON.parse(Wire.encode(results: results, minimalFor: operations))
            guard case .array(let items)? = json["results"] else { Issue.record("no results"); return }
            let fromJSON = try items.enumerated().map { try Wire.result($1, answering: operations[$0]) }
            #expect(fromJSON == results, "round \(round)")
        }
    }

    @Test("an applied result as sent travels without its record, which the client rebuilds from its operation")
    func echoIsSmall() throws {
        let item = Record(id: "a", fields: ["note": .string(String(repeating: "x", count: 500))])
        let operation = PushOperation(id: "op", table: "t", itemId: "a", kind: .insert, item: item, baseVersion: nil)
        let applied = PushResult(operationId: "op", outcome: .applied(operation.storedRecord(
            version: "v1", updatedAt: Timestamp(millisecondsSince1970: 5), deleted: false)!))
        let answer = PushBatch.encode(results: [applied], answering: [operation])
        #expect(answer.count < 60, "\(answer.count) bytes")
        #expect(try Self.decode(answer, answering: [operation]) == [applied])
        // It answers only the operation at its place: another id there, or a delete, is refused.
        let other = PushOperation(id: "other", table: "t", itemId: "a", kind: .insert, item: item, baseVersion: nil)
        #expect(throws: SyncError.self) { try Self.decode(answer, answering: [other]) }
        #expect(throws: SyncError.self) { try Self.decode(answer, answering: []) }
        let delete = PushOperation(id: "op", table: "t", itemId: "a", kind: .delete, item: item, baseVersion: nil)
        #expect(throws: SyncError.self) { try Self.decode(answer, answering: [delete]) }
    }

    @Test("a body or answer cut anywhere is refused, never read as a shorter batch")
    func truncated() throws {
        var generator = SplitMix64(seed: 7)
        let operations = Self.operations(&generator, count: 6)
        let body = PushBatch.encode(operations: operations)
        for length in 0..<body.count {
            #expect(throws: SyncError.self, "cut at \(length)") { try Self.decode(Array(body.prefix(length))) }
        }
        let answer = PushBatch.encode(results: Self.results(&generator, answering: operations), answering: operations)
        for length in 0..<answer.count {
            #expect(throws: SyncError.self, "cut at \(length)") { try Self.decode(Array(answer.prefix(length)), answering: operations) }
        }
    }

    @Test("malformed bodies are refused with a typed error naming what and where")
    func malformed() throws {
        let item = Record(id: "a", fields: ["n": .int(1)])
        let insert = PushOperation(id: "op", table: "t", itemId: "a", kind: .insert, item: item, baseVersion: nil)
        let body = PushBatch.encode(operations: [insert])
        func refusal(_ bytes: [UInt8]) -> String {
            do {
                _ = try Self.decode(bytes)
                return "accepted"
            } catch let error as SyncError {
                #expect(error.code == .invalidValue)
                return error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal(Array("OSPS".utf8) + [1] + body.dropFirst(5)).contains("not the push body"))
        #expect(refusal(Array(body.prefix(4)) + [2] + body.dropFirst(5)).contains("format version 2"))
        #expect(refusal(body + [3, 0, 0, 0, 0]).contains("bytes follow the end frame"))
        #expect(refusal(Array(body.dropLast(5))).contains("without its end frame"))
        #expect(refusal(Array(body.prefix(5)) + [9, 0, 0, 0, 0]).contains("unknown frame type 9"))
        // The operation without its item, and an item with no operation.
        let headLength = Int(body[6])
        let head = Array(body[5..<(10 + headLength)]), itemFrame = Array(body[(10 + headLength)..<(body.count - 5)])
        let end: [UInt8] = [3, 0, 0, 0, 0]
        #expect(refusal(Array(body.prefix(5)) + head + end).contains("does not follow"))
        #expect(refusal(Array(body.prefix(5)) + itemFrame + end).contains("follows no operation"))
        // An unknown kind, a head of the wrong shape, a NaN in an item.
        func headFrame(_ value: Value) -> [UInt8] {
            let payload = ValueCodec.encode(value)
            return [1] + withUnsafeBytes(of: UInt32(payload.count).littleEndian, Array.init) + payload
        }
        let upsert = headFrame(.array([.string("op"), .string("t"), .string("a"), .string("upsert"), .null, .bool(false)]))
        #expect(refusal(Array(body.prefix(5)) + upsert + end).contains("unknown kind 'upsert'"))
        let short = headFrame(.array([.string("op"), .string("t")]))
        #expect(refusal(Array(body.prefix(5)) + short + end).contains("an operation is an array"))
        let number = headFrame(.array([.string("op"), .string("t"), .string("a"), .string("insert"), .int(3), .bool(false)]))
        #expect(refusal(Array(body.prefix(5)) + number + end).contains("baseVersion must be a string or null"))
        let nan = PushBatch.encode(operations: [PushOperation(id: "op", table: "t", itemId: "a", kind: .insert,
                                                              item: Record(id: "a", fields: ["x": .double(.nan)]), baseVersion: nil)])
        #expect(refusal(nan).contains("NaN"))
    }
}
