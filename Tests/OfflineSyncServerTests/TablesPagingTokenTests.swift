import OfflineSync
import OfflineSyncServer
import Testing

/// The tables API's keyset cursor: the row's keys, and the stamp bound its page read below.
@Suite("Tables API paging: a $skiptoken carries the stamp bound of its page")
struct TablesPagingTokenTests {
    static let order = [SortKey(SystemField.updatedAt), SortKey(SystemField.id)]

    @Test("the next page reads below the larger of the token's bound and just past the stamp it names")
    func floorFromToken() throws {
        let row = Record(id: "a", fields: [:], updatedAt: Timestamp(millisecondsSince1970: 1_000))
        let plain = TablesPaging.token(after: row, order: Self.order)
        #expect(try TablesPaging.stampFloor(in: plain, order: Self.order) == Timestamp(millisecondsSince1970: 1_001))
        let bounded = TablesPaging.token(after: row, order: Self.order, stampBound: Timestamp(millisecondsSince1970: 1_500))
        #expect(try TablesPaging.stampFloor(in: bounded, order: Self.order) == Timestamp(millisecondsSince1970: 1_500))
        // The bound is not a key: the rows after the token are the same with or without it.
        #expect(try TablesPaging.predicate(after: bounded, order: Self.order) == TablesPaging.predicate(after: plain, order: Self.order))
        // Ordered by id alone, only the bound says anything about stamps.
        let byId = [SortKey(SystemField.id)]
        #expect(try TablesPaging.stampFloor(in: TablesPaging.token(after: row, order: byId), order: byId) == nil)
        #expect(try TablesPaging.stampFloor(in: TablesPaging.token(after: row, order: byId, stampBound: Timestamp(millisecondsSince1970: 7)),
                                            order: byId) == Timestamp(millisecondsSince1970: 7))
    }

    @Test("a token with anything but a stamp after its keys, or too many values, is refused")
    func malformedBounds() {
        let row = Record(id: "a", fields: ["n": .int(1)], updatedAt: Timestamp(millisecondsSince1970: 1_000))
        // Three values for a two-key order whose third is not a stamp; four values.
        let notAStamp = TablesPaging.token(after: row, order: Self.order + [SortKey("n")])
        let tooMany = TablesPaging.token(after: row, order: Self.order + [SortKey("n")], stampBound: Timestamp(millisecondsSince1970: 1))
        for token in [notAStamp, tooMany] {
            #expect(throws: SyncError.self) { try TablesPaging.stampFloor(in: token, order: Self.order) }
            #expect(throws: SyncError.self) { try TablesPaging.predicate(after: token, order: Self.order) }
        }
    }
}
