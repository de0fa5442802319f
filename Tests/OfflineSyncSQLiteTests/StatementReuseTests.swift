import COfflineSyncSQLite3
import OfflineSync
@testable import OfflineSyncSQLite
import Testing

/// A cached statement keeps its bindings across a reset unless they are long (the reset no
/// longer clears them every time); these check what that must never change: a use that binds
/// fewer values than the statement has parameters sees NULL in the rest, never the values of
/// an earlier use, and a long text or blob is not held by the cache after its use.
@Suite("SQLite: a cached statement's bindings between uses")
struct StatementReuseTests {
    /// `withStatement` on a fresh in-memory connection, closed afterwards.
    func withConnection(_ body: (SQLiteConnection) throws -> Void) throws {
        let connection = try SQLiteConnection.open(path: ":memory:", flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                                   busyTimeoutMilliseconds: 1_000)
        defer { connection.close(checkpoint: false) }
        try body(connection)
    }

    /// The two columns of `SELECT ?1, ?2` bound with `values`, and the statement it ran on.
    func select(_ connection: SQLiteConnection, _ values: [SQLiteValue]) throws -> (String, String, SQLiteStatement) {
        try connection.withStatement("SELECT quote(?1), quote(?2)", values) { statement in
            let stepped = try statement.step()
            #expect(stepped)
            func text(_ column: Int32) -> String { String(cString: sqlite3_column_text(statement.handle, column)) }
            return (text(0), text(1), statement)
        }
    }

    /// The statement's SQL with the values bound to it now.
    func expanded(_ statement: SQLiteStatement) -> String {
        guard let text = sqlite3_expanded_sql(statement.handle) else { return "" }
        defer { sqlite3_free(text) }
        return String(cString: text)
    }

    @Test("a use with fewer values than parameters sees NULL after them, not the last use's values")
    func fewerValues() throws {
        try withConnection { connection in
            let (first, second, statement) = try select(connection, [.int(1), .text("kept")])
            #expect(first == "1" && second == "'kept'")
            // The short values stay bound between uses…
            #expect(expanded(statement) == "SELECT quote(1), quote('kept')")
            // …so a use binding only ?1 must clear ?2 first.
            let (again, missing, reused) = try select(connection, [.int(2)])
            #expect(reused === statement, "the cached statement was reused")
            #expect(again == "2" && missing == "NULL")
        }
    }

    @Test("a long text or blob is released at the reset", arguments: [false, true])
    func longValueReleased(blob: Bool) throws {
        try withConnection { connection in
            let long: SQLiteValue = blob ? .blob([UInt8](repeating: 7, count: 5_000)) : .text(String(repeating: "x", count: 5_000))
            let (_, second, statement) = try select(connection, [.int(1), long])
            #expect(second.count > 5_000)
            #expect(expanded(statement) == "SELECT quote(NULL), quote(NULL)")
            // A short value after it is kept as usual.
            _ = try select(connection, [.int(3), .text("short")])
            #expect(expanded(statement) == "SELECT quote(3), quote('short')")
        }
    }
}
