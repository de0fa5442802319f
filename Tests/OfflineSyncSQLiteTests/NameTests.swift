import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

@Suite("SQLiteStore names")
struct NameTests {
    static let hostile = [
        "a\"b", "\"", "\"\"", "x;y", "\"; DROP TABLE x; --", "'; DROP TABLE x; --", "with space", " leading",
        "ünïcödé", "表", "🙂", "[bracket]", "back`tick", "main", "temp", "select", "x", "X.y", "a\\b", "?1", "$p",
        "__operations", "é", "e\u{301}", String(repeating: "n", count: 128), String(repeating: "é", count: 64),
    ]

    @Test("hostile table and field names are stored verbatim and never break other tables")
    func hostileNamesStored() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("names.sqlite").path
            try await withStore(at: path) { store in
                try await store.defineTable(TableSchema("victim", fields: [FieldDefinition("v", .int)]))
                try await store.write { try $0.upsert(Record(id: "keep", fields: ["v": 1]), in: "victim") }
                for name in Self.hostile {
                    let fieldName = name == "\"" ? "f\"" : name
                    let second = String(fieldName.prefix(16)) + " 2"
                    try await store.defineTable(TableSchema(name, fields: [FieldDefinition(fieldName, .string, indexed: true)],
                                                            indexes: [IndexDefinition([fieldName, "id"])]))
                    let record = Record(id: name, fields: [fieldName: .string(name), second: 7])
                    try await store.write { try $0.upsert(record, in: name) }
                    let (stored, matched, count) = try await store.read { transaction in
                        (try transaction.record(in: name, id: name),
                         try transaction.records(in: name, matching: Query(Field(fieldName) == .string(name))),
                         try transaction.count(in: name, matching: Field(second) == 7))
                    }
                    #expect(stored == record, "table \(name)")
                    #expect(matched == [record], "table \(name)")
                    #expect(count == 1, "table \(name)")
                }
            }
            // Migrate every hostile table (rebuild, drop, rename, new indexes) and keep its data.
            try await withStore(at: path) { store in
                for name in Self.hostile {
                    let fieldName = name == "\"" ? "f\"" : name
                    let second = String(fieldName.prefix(16)) + " 2"
                    try await store.defineTable(TableSchema(name, fields: [FieldDefinition(second, .int, indexed: true)]))
                    let (stored, matched) = try await store.read { transaction in
                        (try transaction.record(in: name, id: name),
                         try transaction.count(in: name, matching: Field(second) == 7 && Field(fieldName) == .string(name)))
                    }
                    #expect(stored == Record(id: name, fields: [fieldName: .string(name), second: 7]), "table \(name)")
                    #expect(matched == 1, "table \(name)")
                }
            }
            try await withStore(at: path) { store in
                let (victim, schemas) = try await store.read { transaction in
                    (try transaction.record(in: "victim", id: "keep"), try transaction.tables())
                }
                #expect(victim == Record(id: "keep", fields: ["v": 1]))
                let names = schemas.map(\.name)
                #expect(names.count == Self.hostile.count + 1)
                for name in Self.hostile {
                    #expect(names.contains { $0.utf8.elementsEqual(name.utf8) }, "table \(name) listed")
                }
                #expect(names == names.sorted(by: Value.utf8Less))
            }
        }
    }

    @Test("reserved, malformed and case-colliding table names are refused with invalidName")
    func refusedNames() async throws {
        let store = try await SQLiteStore.inMemory()
        try await store.defineTable(TableSchema("Users"))
        try await store.defineTable(TableSchema("Émile"))
        try await store.write { try $0.upsert(Record(id: "1", fields: ["a": 1]), in: "Users") }
        let refused = [
            "", String(repeating: "n", count: 129), "sqlite_master", "SQLITE_MASTER", "Sqlite_sequence", "sqlite_x",
            "__osync_catalog", "__OSYNC_anything", "a\nb", "tab\tname", "nul\u{0}", "users", "USERS", "uSeRs", "émile",
        ]
        for name in refused {
            let code = await syncErrorCode { try await store.defineTable(TableSchema(name)) }
            #expect(code == .invalidName, "table name \(name.debugDescription)")
        }
        let badFields: [TableSchema] = [
            TableSchema("t", fields: [FieldDefinition("id", .string)]),
            TableSchema("t", fields: [FieldDefinition("UpdatedAt", .date)]),
            TableSchema("t", fields: [FieldDefinition("a", .int), FieldDefinition("A", .int)]),
            TableSchema("t", fields: [FieldDefinition("", .int)]),
            TableSchema("t", fields: [FieldDefinition(String(repeating: "f", count: 129), .int)]),
        ]
        for schema in badFields {
            let code = await syncErrorCode { try await store.defineTable(schema) }
            #expect(code == .invalidName)
        }
        let (tables, users) = try await store.read { transaction in
            (try transaction.tables().map(\.name), try transaction.records(in: "Users", matching: .all))
        }
        #expect(tables == ["Users", "Émile"])
        #expect(users == [Record(id: "1", fields: ["a": 1])])
        let missing = await syncErrorCode { _ = try await store.read { try $0.schema(of: "users") } }
        #expect(missing == .tableNotDefined)
        try await store.close()
    }

    @Test("tables whose names differ only by Unicode normalisation are distinct, even with identical layouts")
    func normalisationDistinctTables() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(at: directory.appendingPathComponent("n.sqlite").path) { store in
                for name in ["é", "e\u{301}"] {
                    try await store.defineTable(TableSchema(name, fields: [FieldDefinition("n", .int)]))
                }
                try await store.write { transaction in
                    try transaction.upsert(Record(id: "1", fields: ["n": 1]), in: "é")
                    try transaction.upsert(Record(id: "2", fields: ["n": 2]), in: "e\u{301}")
                }
                let (composed, decomposed, lookups) = try await store.read { transaction in
                    (try transaction.records(in: "é", matching: .all),
                     try transaction.records(in: "e\u{301}", matching: Query(Field("n") > 0)),
                     [try transaction.record(in: "é", id: "2"), try transaction.record(in: "e\u{301}", id: "1")])
                }
                #expect(composed == [Record(id: "1", fields: ["n": 1])])
                #expect(decomposed == [Record(id: "2", fields: ["n": 2])])
                #expect(lookups == [nil, nil])
                let deleted = try await store.write { try $0.delete(id: "1", in: "e\u{301}") }
                #expect(!deleted)
                try await store.defineTable(TableSchema("e\u{301}", fields: [FieldDefinition("s", .string)]))
                let (schemaA, schemaB) = try await store.read { transaction in
                    (try transaction.schema(of: "é"), try transaction.schema(of: "e\u{301}"))
                }
                #expect(schemaA.fields.map(\.name) == ["n"])
                #expect(schemaB.fields.map(\.name) == ["s"])
            }
        }
    }
}
