import Foundation
import OfflineSync
import OfflineSyncStoreKit
import Testing

/// The building blocks every queued write uses — random ids, records' null fields, the value
/// codec's byte order and its refusal of NaN — keep their observable behaviour.
@Suite("Records, values and ids")
struct RecordValueTests {
    @Test func randomUUIDsAreVersion4AndDistinct() {
        var seen = Set<UUID>()
        for _ in 0..<2_000 {
            let uuid = UUID.random()
            let text = uuid.uuidString
            #expect(text.count == 36)
            let characters = Array(text)
            #expect(characters[14] == "4")
            #expect("89AB".contains(characters[19]))
            #expect(UUID(uuidString: text) == uuid)
            seen.insert(uuid)
        }
        #expect(seen.count == 2_000)
    }

    @Test func nullFieldsAreDroppedAndOthersKept() {
        let record = Record(id: "a", fields: ["x": 1, "y": .null, "z": "s"])
        #expect(record.fields == ["x": 1, "z": "s"])
        var copy = record
        copy.fields = ["q": .null, "r": 2]
        #expect(copy.fields == ["r": 2])
        let synced = Record(id: "a", fields: ["x": 1], version: "v1", updatedAt: Timestamp(millisecondsSince1970: 5), deleted: true)
        #expect(synced.withoutSystemProperties == Record(id: "a", fields: ["x": 1]))
        #expect(record.withoutSystemProperties == record)
    }

    @Test func objectsEncodeWithKeysInUTF8Order() throws {
        let object: Value = ["b": 1, "a": ["z": true, "é": 2.5, "Z": .null], "": "empty", "B": [1, "x"]]
        let bytes = ValueCodec.encode(object)
        #expect(try ValueCodec.decode(bytes) == object)
        // The same content built in another order encodes to the same bytes.
        let reordered: Value = ["B": [1, "x"], "": "empty", "a": ["Z": .null, "é": 2.5, "z": true], "b": 1]
        #expect(ValueCodec.encode(reordered) == bytes)
        // Keys appear in UTF-8 byte order: "B" < "a" < "b" < "é".
        let small: Value = ["b": 1, "é": false, "a": true, "B": .null]
        #expect(ValueCodec.encode(small) == [9, 4, 1, 0x42, 0, 1, 0x61, 2, 1, 0x62, 3, 2, 2, 0xC3, 0xA9, 1])
        let record = Record(id: "r", fields: ["n": 1, "m": "x"], version: "v", updatedAt: Timestamp(millisecondsSince1970: -3))
        #expect(try ValueCodec.decodeRecord(ValueCodec.encode(record)) == record)
    }

    @Test func nanIsRejectedWithItsPath() {
        let schema = TableSchema("t")
        let nested = Record(id: "a", fields: ["outer": ["list": [1, .double(.nan)]]])
        #expect {
            try schema.validate(nested)
        } throws: { error in
            (error as? SyncError)?.code == .invalidValue && "\(error)".contains("outer.list[1]")
        }
        #expect(throws: Never.self) { try schema.validate(Record(id: "a", fields: ["x": ["y": 1.5]])) }
    }
}
