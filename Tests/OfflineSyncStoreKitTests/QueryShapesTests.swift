import OfflineSync
import OfflineSyncStoreKit
import Testing

/// `SQLQueryShapes` answers from its few most recent shapes before its dictionary; whichever
/// answers, a shape gets the SQL last remembered for it, and only over the table object it
/// was translated for.
@Suite("SQLQueryShapes: the memo of translated query shapes")
struct QueryShapesTests {
    final class Table {}

    /// The shape of a query comparing `field` with a string, over `table`.
    func shape(_ field: String, on table: Table, limit: Int? = nil) throws -> SQLQueryShape {
        let query = Query(Field(field) == .string("x"), order: [SortKey(field)], limit: limit)
        let shaped = SQLQueryShape.of(query, table: table, column: { SQLColumn(sql: $0, type: .string) }, parameter: { $0 })
        return try #require(shaped).shape
    }

    @Test("more shapes than the recent few: each keeps its own SQL, found again in any order")
    func manyShapes() throws {
        let table = Table()
        var shapes = SQLQueryShapes<Table, String>(limit: 100)
        let names = (0..<10).map { "f\($0)" }
        for name in names { shapes.remember("SQL of \(name)", for: try shape(name, on: table), table: table) }
        for name in names.reversed() + names + names.shuffled() {
            #expect(shapes.sql(for: try shape(name, on: table), table: table) == "SQL of \(name)")
        }
        #expect(shapes.sql(for: try shape("f1", on: table, limit: 5), table: table) == nil, "a limit is another shape")
        #expect(shapes.sql(for: try shape("other", on: table), table: table) == nil)
    }

    @Test("a shape remembered again answers with its new SQL, recent or not")
    func rememberedAgain() throws {
        let table = Table()
        var shapes = SQLQueryShapes<Table, String>(limit: 100)
        let first = try shape("a", on: table)
        shapes.remember("old", for: first, table: table)
        #expect(shapes.sql(for: first, table: table) == "old")
        shapes.remember("new", for: first, table: table)
        #expect(shapes.sql(for: first, table: table) == "new")
        // Pushed out of the recent few, it is found in the dictionary with the same SQL.
        for name in ["b", "c", "d", "e", "f"] { shapes.remember(name, for: try shape(name, on: table), table: table) }
        #expect(shapes.sql(for: first, table: table) == "new")
    }

    @Test("another table object, a full memo, removeAll: no stale SQL")
    func staleness() throws {
        let table = Table(), other = Table()
        var shapes = SQLQueryShapes<Table, String>(limit: 3)
        let onTable = try shape("a", on: table)
        shapes.remember("for table", for: onTable, table: table)
        #expect(shapes.sql(for: try shape("a", on: other), table: other) == nil, "the shape names its table")
        #expect(shapes.sql(for: onTable, table: other) == nil, "the SQL was written for another table object")
        // Filling past the limit forgets the dictionary; what is still answered is still right.
        for name in ["b", "c", "d", "e"] { shapes.remember("SQL \(name)", for: try shape(name, on: table), table: table) }
        for name in ["b", "c", "d", "e"] {
            let answer = shapes.sql(for: try shape(name, on: table), table: table)
            #expect(answer == nil || answer == "SQL \(name)")
        }
        shapes.removeAll()
        for name in ["a", "b", "c", "d", "e"] { #expect(shapes.sql(for: try shape(name, on: table), table: table) == nil) }
    }

    @Test("a copy answers from its own memo, and a memo held in a let can be asked")
    func copies() throws {
        let table = Table()
        var first = SQLQueryShapes<Table, String>(limit: 100)
        let shape = try shape("a", on: table)
        first.remember("SQL of a", for: shape, table: table)
        let copy = first // a `let`: asking it must not need `mutating`
        first.removeAll()
        #expect(first.sql(for: shape, table: table) == nil, "forgotten by the memo that removed everything")
        #expect(copy.sql(for: shape, table: table) == "SQL of a", "the copy still knows it")
        // The copy's find is noted in the recent few they share: the first may answer it
        // again, never with other SQL.
        #expect([nil, "SQL of a"].contains(first.sql(for: shape, table: table)))
        #expect(copy.sql(for: try self.shape("b", on: table), table: table) == nil)
    }

    /// Every column named here is a string column, but `n`, which is an integer one.
    static func column(_ name: String) -> SQLColumn? {
        SQLColumn(sql: name, type: name == "n" ? .int : .string)
    }

    /// Remembers `query`'s shape over `table` as "SQL" with `query` as its sample.
    func rememberSample(_ query: Query, on table: Table, in shapes: inout SQLQueryShapes<Table, String>) throws {
        let shaped = try #require(SQLQueryShape.of(query, table: table, column: Self.column, parameter: { $0 }))
        shapes.remember("SQL", for: shaped.shape, table: table, query: query)
    }

    @Test("a query with a remembered query's structure gets its SQL and its own literals, in order")
    func reuse() throws {
        let table = Table()
        var shapes = SQLQueryShapes<Table, String>(limit: 100)
        let sample = Query(Field("a") == .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1)
        try rememberSample(sample, on: table, in: &shapes)
        let asked = Query(Field("a") == .string("other") && Field("n") > .int(-9), order: [SortKey("a", ascending: false)], limit: 50)
        let hit = try #require(shapes.sql(reusing: asked, table: table, parameter: { $0 }))
        #expect(hit.sql == "SQL")
        #expect(hit.parameters == [.string("other"), .int(-9)])
        // The shape found the usual way notes its query too.
        let other = Table()
        let onOther = Query(Field("b") == .string("y"))
        let shaped = try #require(SQLQueryShape.of(onOther, table: other, column: Self.column, parameter: { $0 }))
        shapes.remember("SQL of b", for: shaped.shape, table: other)
        #expect(shapes.sql(reusing: onOther, table: other, parameter: { $0 }) == nil, "remembered without a sample")
        #expect(shapes.sql(for: shaped.shape, table: other, query: onOther) == "SQL of b")
        #expect(shapes.sql(reusing: Query(Field("b") == .string("z")), table: other, parameter: { $0 })?.parameters == [.string("z")])
    }

    @Test("anything but the literals and the page's values differs: no reuse",
          arguments: [
              Query(Field("b") == .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1),
              Query(Field("a") != .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1),
              Query(Field("a") == .int(1) && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1),
              Query(Field("a") == .string("x") && Field("n") > .double(3), order: [SortKey("a", ascending: false)], limit: 1),
              Query(Field("a") == .null && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1),
              Query(Field("a") == .string("x") && Field("n") > .int(3), order: [SortKey("a")], limit: 1),
              Query(Field("a") == .string("x") && Field("n") > .int(3), order: [SortKey("n", ascending: false)], limit: 1),
              Query(Field("a") == .string("x") && Field("n") > .int(3), order: [], limit: 1),
              Query(Field("a") == .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)]),
              Query(Field("a") == .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: -1),
              Query(Field("a") == .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1, offset: 2),
              Query(Field("a") == .string("x"), order: [SortKey("a", ascending: false)], limit: 1),
              Query(.and([Field("a") == .string("x"), Field("n") > .int(3), .all]), order: [SortKey("a", ascending: false)], limit: 1),
              Query(Field("a") == .string("x") || Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1),
              Query(Field("a") == .string("x") && Field("n").isIn([3]), order: [SortKey("a", ascending: false)], limit: 1),
              // "é" composed and decomposed: canonically equal names are different fields.
              Query(Field("e\u{301}") == .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1),
          ])
    func noReuse(asked: Query) throws {
        let table = Table()
        var shapes = SQLQueryShapes<Table, String>(limit: 100)
        try rememberSample(Query(Field("a") == .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1),
                           on: table, in: &shapes)
        try rememberSample(Query(Field("\u{e9}") == .string("x") && Field("n") > .int(3), order: [SortKey("a", ascending: false)], limit: 1),
                           on: table, in: &shapes)
        #expect(shapes.sql(reusing: asked, table: table, parameter: { $0 }) == nil)
        #expect(shapes.sql(reusing: asked, table: Table(), parameter: { $0 }) == nil, "another table object")
    }
}
