import Foundation
@testable import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

private struct Board: SyncModel, Equatable {
    static let tableName = "boards"
    var id: UUID
    var name: String
    enum Columns { static let name = Column(\Board.name, CodingKeys.name) }
}

private struct Card: SyncModel, Equatable {
    static let tableName = "cards"
    var id: Int
    var boardId: UUID
    var done: Bool
    enum Columns {
        static let boardId = Column(\Card.boardId, CodingKeys.boardId)
        static let done = Column(\Card.done, CodingKeys.done)
    }
}

/// A board with its open card count: a read over two tables, done in Swift.
private struct BoardSummary: Equatable, Sendable {
    var name: String
    var open: Int
}

@Suite("Observing any read: several tables, learned from the reads")
struct ObserveAnyReadTests {
    static func context() async throws -> SyncContext {
        let context = try await SyncContext(store: InMemoryStore(), remote: OfflineSyncService(store: InMemoryStore()).remote(for: "u"))
        try await context.defineTable(Board.self)
        try await context.defineTable(Card.self)
        try await context.defineTable(TableSchema("other", fields: [FieldDefinition("n", .int)]))
        return context
    }

    @Test("a list with its open count is read again when either table changes, and not for another table")
    func listWithCount() async throws {
        let context = try await Self.context()
        let board = Board(id: UUID(), name: "Home")
        try await context.table(Board.self).insert(board)
        let summaries = context.observe { reader in
            try reader.query(Board.order(Board.Columns.name.ascending)).map { board in
                BoardSummary(name: board.name, open: try reader.count(Card.self, Card.Columns.boardId == board.id && Card.Columns.done == false))
            }
        }
        var values = summaries.makeAsyncIterator()
        #expect(try await values.next() == [BoardSummary(name: "Home", open: 0)])
        try await context.table(Card.self).insert(Card(id: 1, boardId: board.id, done: false))
        #expect(try await values.next() == [BoardSummary(name: "Home", open: 1)])
        var renamed = board
        renamed.name = "House"
        try await context.table(Board.self).update(renamed)
        #expect(try await values.next() == [BoardSummary(name: "House", open: 1)])
        // A commit to a table the read does not read is not a change; the next value is the
        // next card's, with nothing in between.
        _ = try await context.table("other").insert(Record(id: "x", fields: ["n": .int(1)]))
        #expect(!context.observer.isDue(values.id), "the commit to another table did not concern it")
        try await context.table(Card.self).insert(Card(id: 2, boardId: board.id, done: false))
        #expect(try await values.next() == [BoardSummary(name: "House", open: 2)])
        // An equal result is skipped: a done card changes no count, the next value is the delete's.
        try await context.table(Card.self).insert(Card(id: 3, boardId: board.id, done: true))
        try await context.table(Card.self).delete(id: 1)
        #expect(try await values.next() == [BoardSummary(name: "House", open: 1)])
    }

    @Test("a read that takes another branch watches the tables of its last run")
    func tablesFollowTheLastRead() async throws {
        let context = try await Self.context()
        let summaries = context.observe { reader -> Int in
            // Reads cards only once a board exists.
            guard let first = try reader.query(Board.self).first else { return -1 }
            return try reader.count(Card.self, Card.Columns.boardId == first.id)
        }
        var values = summaries.makeAsyncIterator()
        #expect(try await values.next() == -1)
        let board = Board(id: UUID(), name: "b")
        try await context.table(Board.self).insert(board)
        #expect(try await values.next() == 0)
        try await context.table(Card.self).insert(Card(id: 7, boardId: board.id, done: false))
        #expect(try await values.next() == 1)
    }

    @Test("UUID and integer ids: stored as their record ids, found by their own type")
    func typedIds() async throws {
        let context = try await Self.context()
        let id = UUID()
        try await context.table(Board.self).insert(Board(id: id, name: "b"))
        try await context.table(Card.self).insert(Card(id: 42, boardId: id, done: false))
        #expect(try await context.table(Board.self).get(id)?.name == "b")
        #expect(try await context.table("boards").get(id.uuidString) != nil)
        #expect(try await context.table("cards").get("42") != nil)
        #expect(try await context.table(Card.self).get(42)?.boardId == id)
        let read = try await context.read { reader in try reader.get(Card.self, id: 42) }
        #expect(read?.id == 42)
        try await context.transaction { txn in try txn.delete(id: 42, from: Card.self) }
        #expect(try await context.table(Card.self).get(42) == nil)
    }

    @Test("the context's read refuses system tables; close() closes the store, so a write then throws storeClosed")
    func readAndClose() async throws {
        let context = try await Self.context()
        await #expect(throws: SyncError.self) { try await context.read { try $0.records(in: "__operations") } }
        var boards = context.table(Board.self).observe().makeAsyncIterator()
        #expect(try await boards.next() == [])
        try await context.close()
        await #expect { try await context.table(Board.self).insert(Board(id: UUID(), name: "late")) } throws: {
            ($0 as? SyncError)?.code == .storeClosed
        }
    }
}
