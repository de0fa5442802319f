import OfflineSync
import Testing

/// Rows checked against a schema as they are added, laid out by it.
@Suite("ValidatedRows: checked once, laid out by position")
struct ValidatedRowsTests {
    static let schema = TableSchema("t", fields: [FieldDefinition("name", .string), FieldDefinition("n", .int)])

    @Test("each declared value sits at its field's position, undeclared ones beside them, and records come back whole")
    func layout() throws {
        var rows = ValidatedRows(schema: Self.schema)
        try rows.append(Record(id: "a", fields: ["n": 1, "note": "x"], version: "v", updatedAt: Timestamp(millisecondsSince1970: 9)))
        try rows.append(id: "b", fields: ["name": "old", "gone": .null], positioned: [(0, "new")], version: nil, updatedAt: nil,
                        deleted: true)
        #expect(rows.count == 2)
        #expect(Array(rows[0].declared) == [.null, .int(1)])
        #expect(rows[0].undeclared.map(\.key) == ["note"])
        #expect(Array(rows[1].declared) == [.string("new"), .null], "a positioned value replaces the field of its name")
        #expect(rows[1].undeclared.isEmpty, "a null undeclared field is left out, as a record leaves it out")
        #expect(rows.records == [
            Record(id: "a", fields: ["n": 1, "note": "x"], version: "v", updatedAt: Timestamp(millisecondsSince1970: 9)),
            Record(id: "b", fields: ["name": "new"], deleted: true),
        ])
        rows.removeLast()
        #expect(rows.records.map(\.id) == ["a"])
        try rows.append(Record(id: "c", fields: ["other": 2]))
        #expect(rows[1].undeclared.map(\.key) == ["other"], "a removed row's undeclared fields are gone with it")
    }

    @Test("a row the schema refuses is not added, and the rows before it stay as they were")
    func refusals() throws {
        var rows = ValidatedRows(schema: TableSchema("t", fields: Self.schema.fields, undeclaredFields: .reject))
        try rows.append(Record(id: "ok", fields: ["n": 1]))
        let refused: [(String, SyncError.Code, () throws -> Void)] = [
            ("a string in an int field", .typeMismatch, { [rows] in var r = rows; try r.append(Record(id: "x", fields: ["n": "1"])) }),
            ("an undeclared field", .typeMismatch, { [rows] in var r = rows; try r.append(Record(id: "x", fields: ["other": 1])) }),
            ("a NaN", .invalidValue, { [rows] in var r = rows; try r.append(Record(id: "x", fields: ["n": .null, "name": .null, "z": .double(.nan)])) }),
            ("an empty id", .invalidName, { [rows] in var r = rows; try r.append(Record(id: "", fields: [:])) }),
            ("a positioned value of the wrong type", .typeMismatch, { [rows] in
                var r = rows
                try r.append(id: "x", fields: [:], positioned: [(1, "1")], version: nil, updatedAt: nil, deleted: false)
            }),
            ("a position past the fields", .schemaMismatch, { [rows] in
                var r = rows
                try r.append(id: "x", fields: [:], positioned: [(2, 1)], version: nil, updatedAt: nil, deleted: false)
            }),
        ]
        for (what, code, body) in refused {
            #expect(throws: SyncError.self, "\(what)") { try body() }
            do { try body() } catch let error as SyncError { #expect(error.code == code, "\(what)") }
        }
        var kept = rows
        #expect(throws: SyncError.self) {
            try kept.append(id: "x", fields: ["n": 2, "other": 1], version: nil, updatedAt: nil, deleted: false)
        }
        #expect(kept.count == 1 && Array(kept[0].declared) == [.null, .int(1)], "a refused row leaves no value behind")
        try kept.append(Record(id: "y", fields: ["n": 3]))
        #expect(kept.records.map(\.id) == ["ok", "y"])
    }

    @Test("a layout is the same only for the same fields byte for byte, types, order and policy")
    func sameLayout() {
        let base = Self.schema
        #expect(base.hasSameLayout(as: TableSchema("other", fields: base.fields, indexes: [IndexDefinition(["n"])])))
        #expect(!base.hasSameLayout(as: TableSchema("t", fields: base.fields.reversed())))
        #expect(!base.hasSameLayout(as: TableSchema("t", fields: [FieldDefinition("name", .string), FieldDefinition("n", .double)])))
        #expect(!base.hasSameLayout(as: TableSchema("t", fields: base.fields, undeclaredFields: .reject)))
        let composed = TableSchema("t", fields: [FieldDefinition("jos\u{E9}", .string)])
        let decomposed = TableSchema("t", fields: [FieldDefinition("jose\u{301}", .string)])
        #expect(!composed.hasSameLayout(as: decomposed), "names equal under Unicode equivalence are different columns")
    }
}
