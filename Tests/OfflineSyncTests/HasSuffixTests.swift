import OfflineSync
import OfflineSyncStoreKit
import Testing

/// `hasSuffix`: its reference semantics and how the shared SQL translator treats it.
@Suite struct HasSuffixTests {
    static let record = Record(id: "r-1", fields: ["s": "e\u{301}", "t": "", "n": 3, "j": "日本語"], version: "v1")

    @Test func evaluatesByUTF8BytesWithThreeValuedLogic() {
        func truth(_ p: QueryPredicate) -> QueryEvaluator.Truth { QueryEvaluator.evaluate(Self.record, p) }
        // Bytes, not characters: a combining mark alone is a suffix of "e\u{301}".
        #expect(truth(Field("s").hasSuffix("\u{301}")) == .true)
        #expect(truth(Field("s").hasSuffix("e\u{301}")) == .true)
        #expect(truth(Field("s").hasSuffix("\u{E9}")) == .false)
        #expect(truth(Field("s").hasSuffix("xe\u{301}")) == .false)
        #expect(truth(Field("j").hasSuffix("本語")) == .true)
        #expect(truth(Field("j").hasSuffix("日本")) == .false)
        // The empty suffix ends every string, including the empty one.
        #expect(truth(Field("s").hasSuffix("")) == .true)
        #expect(truth(Field("t").hasSuffix("")) == .true)
        #expect(truth(Field("t").hasSuffix("a")) == .false)
        // Null or missing: unknown (so `not` is unknown too); another kind: false.
        #expect(truth(Field("missing").hasSuffix("")) == .unknown)
        #expect(truth(.not(Field("missing").hasSuffix("a"))) == .unknown)
        #expect(truth(Field("n").hasSuffix("3")) == .false)
        #expect(truth(.not(Field("n").hasSuffix("3"))) == .true)
        // System properties.
        #expect(truth(Field(SystemField.id).hasSuffix("-1")) == .true)
        #expect(truth(Field(SystemField.version).hasSuffix("1")) == .true)
        #expect(Field("s").hasSuffix("x").fieldNames == ["s"])
    }

    @Test func validationAcceptsOnlyStringFields() throws {
        let schema = TableSchema("t", fields: [FieldDefinition("s", .string), FieldDefinition("n", .int)])
        try Query(Field("s").hasSuffix("a")).validate(against: schema)
        try Query(Field("undeclared").hasSuffix("a")).validate(against: schema)
        try Query(Field(SystemField.id).hasSuffix("a")).validate(against: schema)
        for bad in [Field("n").hasSuffix("1"), Field(SystemField.updatedAt).hasSuffix("1"), Field(SystemField.deleted).hasSuffix("e")] {
            #expect { try Query(bad).validate(against: schema) } throws: { ($0 as? SyncError)?.code == .invalidQuery }
        }
    }

    /// A dialect written before `hasSuffix` existed: it compiles unchanged, and the translator
    /// leaves suffix tests to the evaluator.
    struct OldDialect: SQLDialect {
        func column(_ field: String) -> SQLColumn? { field == "s" || field == "id" ? SQLColumn(sql: "\"\(field)\"", type: .string) : nil }
        func parameter(_ literal: Value) -> Value? { literal }
        func placeholder(_ position: Int) -> String { "?" }
        var trueSQL: String { "1" }
        var falseSQL: String { "0" }
        var unknownSQL: String { "NULL" }
        func contains(_ column: SQLColumn, _ needle: String, bind: (Value) -> String) -> String { "instr(\(column.sql), \(bind(.string(needle))))" }
        func hasPrefix(_ column: SQLColumn, _ prefix: String, bind: (Value) -> String) -> String { "prefix(\(column.sql), \(bind(.string(prefix))))" }
        func orderTerm(_ column: SQLColumn, ascending: Bool) -> String { column.sql }
    }

    /// A dialect that writes suffix tests.
    struct NewDialect: SQLDialect {
        let old = OldDialect()
        func column(_ field: String) -> SQLColumn? { old.column(field) }
        func parameter(_ literal: Value) -> Value? { literal }
        func placeholder(_ position: Int) -> String { "?" }
        var trueSQL: String { "1" }
        var falseSQL: String { "0" }
        var unknownSQL: String { "NULL" }
        func contains(_ column: SQLColumn, _ needle: String, bind: (Value) -> String) -> String { old.contains(column, needle, bind: bind) }
        func hasPrefix(_ column: SQLColumn, _ prefix: String, bind: (Value) -> String) -> String { old.hasPrefix(column, prefix, bind: bind) }
        func hasSuffix(_ column: SQLColumn, _ suffix: String, bind: (Value) -> String) -> String? { "suffix(\(column.sql), \(bind(.string(suffix))))" }
        func orderTerm(_ column: SQLColumn, ascending: Bool) -> String { column.sql }
    }

    @Test func translatorUsesTheDialectOrLeavesSuffixTestsToTheEvaluator() {
        let predicate: QueryPredicate = Field("s").hasPrefix("a") && Field("s").hasSuffix("z") && .not(Field("id").hasSuffix("1"))
        var old = SQLPredicateTranslator(dialect: OldDialect(), maxParameters: 100)
        let (oldSQL, oldRest) = old.split(predicate)
        #expect(oldSQL == "prefix(\"s\", ?)")
        #expect(old.parameters == [.string("a")])
        #expect(oldRest == [Field("s").hasSuffix("z"), .not(Field("id").hasSuffix("1"))])

        var new = SQLPredicateTranslator(dialect: NewDialect(), maxParameters: 100)
        let (newSQL, newRest) = new.split(predicate)
        #expect(newSQL == "prefix(\"s\", ?) AND suffix(\"s\", ?) AND (NOT suffix(\"id\", ?))")
        #expect(new.parameters == [.string("a"), .string("z"), .string("1")])
        #expect(newRest.isEmpty)
        // An undeclared field stays with the evaluator either way.
        #expect(new.split(Field("u").hasSuffix("z")).rest == [Field("u").hasSuffix("z")])
    }
}
