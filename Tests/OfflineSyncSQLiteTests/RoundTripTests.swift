import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

@Suite("SQLiteStore round trips")
struct RoundTripTests {
    static let schema = TableSchema("values", fields: [
        FieldDefinition("bool", .bool),
        FieldDefinition("int", .int, indexed: true),
        FieldDefinition("double", .double),
        FieldDefinition("string", .string, indexed: true),
        FieldDefinition("bytes", .bytes),
        FieldDefinition("date", .date),
        FieldDefinition("array", .array),
        FieldDefinition("object", .object),
        FieldDefinition("any", .any),
        FieldDefinition("é", .string),
    ])

    /// Every value kind and edge value, in declared columns and as undeclared fields.
    static func records() -> [Record] {
        let megabyte = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let doubles: [Double] = [-0.0, 0.0, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                                 .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude, 1.0 / 3.0, 1e-300]
        let strings = ["", "plain", "é", "e\u{301}", "a\u{0}b", "日本語", "🙂👍🏽", "'\"; DROP TABLE values; --", "\u{FEFF}bom", "  "]
        let nested: Value = .object(["list": [1, 2.5, "x", nil, true, .bytes([0, 255])],
                                     "é": .object(["e\u{301}": -0.0]), "": .array([])])
        var records: [Record] = []
        for (index, d) in doubles.enumerated() {
            records.append(Record(id: "double-\(index)", fields: ["double": .double(d), "u_double": .double(d)]))
        }
        for (index, s) in strings.enumerated() {
            records.append(Record(id: "string-\(index)", fields: ["string": .string(s), "u_string": .string(s)]))
        }
        records += [
            Record(id: "é", fields: ["é": "composed id"]),
            Record(id: "e\u{301}", fields: ["e\u{301}": "decomposed id, undeclared field"]),
            Record(id: "ints", fields: ["int": .int(Int64.min), "u_min": .int(Int64.min), "u_max": .int(Int64.max)]),
            Record(id: "int-max", fields: ["int": .int(Int64.max)]),
            Record(id: "bools", fields: ["bool": true, "u_true": true, "u_false": false]),
            Record(id: "bool-false", fields: ["bool": false]),
            Record(id: "bytes", fields: ["bytes": .bytes([]), "u_empty": .bytes([]), "u_zero": .bytes([0, 0])]),
            Record(id: "megabyte", fields: ["bytes": .bytes(megabyte), "u_megabyte": .bytes(megabyte)]),
            Record(id: "dates", fields: ["date": .date(Timestamp(millisecondsSince1970: -62_135_596_800_000)),
                                         "u_date": .date(Timestamp(millisecondsSince1970: 1_700_000_000_123))]),
            Record(id: "containers", fields: ["array": [1, "two", nil, [3.5]], "object": nested, "u_nested": nested,
                                              "u_empty_array": .array([]), "u_empty_object": .object([:])]),
            Record(id: "any-kinds", fields: ["any": .double(-0.0)]),
            Record(id: "any-string", fields: ["any": "text"]),
            Record(id: "any-object", fields: ["any": nested]),
            Record(id: "system", fields: [:], version: "v-é-1", updatedAt: Timestamp(millisecondsSince1970: -1),
                   deleted: true),
            Record(id: String(repeating: "x", count: Names.maxIdLength)),
            Record(id: "nothing"),
        ]
        return records
    }

    static func check(_ store: SQLiteStore, _ expected: [Record]) async throws {
        let stored = try await store.read { transaction in
            try expected.map { try transaction.record(in: "values", id: $0.id) }
        }
        for (want, got) in zip(expected, stored) {
            #expect(got == want, "record \(want.id) did not round-trip")
        }
        let all = try await store.read { try $0.records(in: "values", matching: .all) }
        #expect(all.count == expected.count)
        #expect(all == QueryEvaluator.apply(.all, to: expected))
    }

    @Test("every value kind round-trips exactly, and again after reopening")
    func everyValueRoundTrips() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("values.sqlite").path
            let records = Self.records()
            try await withStore(at: path) { store in
                try await store.defineTable(Self.schema)
                try await store.write { transaction in
                    for record in records { try transaction.upsert(record, in: "values") }
                }
                try await Self.check(store, records)
            }
            try await withStore(at: path) { store in
                try await Self.check(store, records)
                // -0.0 kept its sign in the REAL column.
                let zero = try await store.read { try $0.record(in: "values", id: "double-0") }
                #expect(zero?["double"].doubleValue?.sign == .minus)
            }
        }
    }

    @Test("values bound one after another through the same statements round-trip, whatever their sizes")
    func boundValuesOfChangingSizes() async throws {
        // Sizes that grow the statement's bind buffer, pass its limit (bound as SQLite's own
        // copies), then shrink again while older, longer bytes still lie in the buffer.
        let sizes = [0, 3, 300, 5_000, 40_000, 70_000, 1, 0, 65_536, 2, 20_000, 7]
        let records = sizes.enumerated().map { index, size in
            let text = String((0..<size).map { Character(Unicode.Scalar(UInt8(97 + ($0 + index) % 26))) })
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
            return Record(id: "r\(index)-\(size)", fields: [
                "string": .string(text), "bytes": .bytes(bytes), "u_string": .string(text + "\u{0}é"), "int": .int(Int64(size)),
            ])
        }
        let store = try await SQLiteStore.inMemory()
        try await store.defineTable(Self.schema)
        // One row to a transaction, so each is bound anew through the cached statements.
        for record in records { try await store.write { try $0.upsert(record, in: "values") } }
        // And all of them in one multi-row write over the same ids.
        try await store.write { try $0.upsert(records.reversed(), in: "values") }
        try await Self.check(store, records)
        let byString = try await store.read { transaction in
            try records.map { try transaction.records(in: "values", matching: Query(Field("string") == $0["string"])).map(\.id).sorted() }
        }
        #expect(byString == records.map { record in records.filter { $0["string"] == record["string"] }.map(\.id).sorted() })
        try await store.close()
    }

    @Test("the in-memory store round-trips every value kind")
    func inMemoryRoundTrips() async throws {
        let store = try await SQLiteStore.inMemory()
        let records = Self.records()
        try await store.defineTable(Self.schema)
        try await store.write { transaction in
            for record in records { try transaction.upsert(record, in: "values") }
        }
        try await Self.check(store, records)
        try await store.close()
    }

    @Test("ids that differ only by Unicode normalisation are distinct rows")
    func normalisationDistinctIds() async throws {
        let store = try await SQLiteStore.inMemory()
        try await store.defineTable(TableSchema("t", fields: [FieldDefinition("é", .int)]))
        try await store.write { transaction in
            try transaction.upsert(Record(id: "é", fields: ["é": 1]), in: "t")
            try transaction.upsert(Record(id: "e\u{301}", fields: ["e\u{301}": 2]), in: "t")
        }
        let (composed, decomposed, count) = try await store.read { transaction in
            (try transaction.record(in: "t", id: "é"), try transaction.record(in: "t", id: "e\u{301}"),
             try transaction.count(in: "t", matching: .all))
        }
        #expect(count == 2)
        #expect(composed == Record(id: "é", fields: ["é": 1]))
        #expect(decomposed == Record(id: "e\u{301}", fields: ["e\u{301}": 2]))
        #expect(Array(decomposed?.fields.keys.first?.utf8 ?? "".utf8) == Array("e\u{301}".utf8))
        let deleted = try await store.write { try $0.delete(id: "e\u{301}", in: "t") }
        #expect(deleted)
        let remaining = try await store.read { try $0.records(in: "t", matching: .all) }
        #expect(remaining.map(\.id) == ["é"])
        try await store.close()
    }

    @Test("upsert replaces a row, including fields moving between columns and extra")
    func upsertReplaces() async throws {
        let store = try await SQLiteStore.inMemory()
        try await store.defineTable(TableSchema("t", fields: [FieldDefinition("a", .int)]))
        let second = Record(id: "1", fields: ["b": "only undeclared"], version: "2")
        try await store.write { transaction in
            try transaction.upsert(Record(id: "1", fields: ["a": 1, "c": true], version: "1", deleted: true), in: "t")
            try transaction.upsert(second, in: "t")
        }
        let stored = try await store.read { try $0.record(in: "t", id: "1") }
        #expect(stored == second)
        try await store.close()
    }

    @Test("invalid records are typed errors and write nothing; messages hold no values")
    func invalidRecords() async throws {
        let store = try await SQLiteStore.inMemory()
        try await store.defineTable(TableSchema("t", fields: [FieldDefinition("n", .int)]))
        try await store.defineTable(TableSchema("strict", undeclaredFields: .reject))
        let cases: [(Record, String, SyncError.Code)] = [
            (Record(id: "1", fields: ["n": .double(.nan)]), "t", .invalidValue),
            (Record(id: "1", fields: ["x": [1, .double(.nan)]]), "t", .invalidValue),
            (Record(id: "1", fields: ["n": "SECRET-VALUE-1234"]), "t", .typeMismatch),
            (Record(id: "1", fields: ["x": "SECRET-VALUE-1234"]), "strict", .typeMismatch),
            (Record(id: "", fields: [:]), "t", .invalidName),
            (Record(id: "1", fields: ["Version": 1]), "t", .invalidName),
            (Record(id: "1"), "missing", .tableNotDefined),
        ]
        for (record, table, code) in cases {
            let error = await syncError {
                try await store.write { transaction in
                    try transaction.upsert(Record(id: "ok"), in: "t")
                    try transaction.upsert(record, in: table)
                }
            }
            #expect(error?.code == code)
            #expect(error?.description.contains("SECRET") == false)
        }
        let count = try await store.read { try $0.count(in: "t", matching: .all) }
        #expect(count == 0)
        try await store.close()
    }
}
