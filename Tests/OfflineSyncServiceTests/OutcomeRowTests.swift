import Foundation
import OfflineSync
@testable import OfflineSyncService
import Testing

/// The outcome row is written once per pushed operation, so it spells its fields by hand
/// instead of going through `RecordEncoder`; the two must store the same record, and the row
/// must read back through `RecordDecoder` as it was.
@Suite("The service's outcome rows: written by hand, as the encoder would")
struct OutcomeRowTests {
    @Test("every kind of outcome is stored as RecordEncoder stores it, and reads back")
    func agreesWithTheEncoder() throws {
        let record = Record(id: "a", fields: ["title": .string("é"), "n": .int(-1)], version: "3", updatedAt: Timestamp(millisecondsSince1970: 7))
        let outcomes: [PushOutcome] = [
            .applied(record), .conflict(serverRecord: Record(id: "a", deleted: true)),
            .rejected(reason: "no", status: 403), .rejected(reason: "", status: nil),
        ]
        for (index, outcome) in outcomes.enumerated() {
            let row = OfflineSyncService.OutcomeRow(id: "op-\(index)", outcome: outcome,
                                                    createdAt: Timestamp(millisecondsSince1970: Int64(index) - 5))
            let byHand = row.record()
            #expect(byHand == (try RecordEncoder().encode(row)), "outcome \(index)")
            let back = try OfflineSyncService.OutcomeRow(row: byHand)
            #expect(try back.pushOutcome() == outcome, "outcome \(index)")
            #expect(back.createdAt == row.createdAt && back.id == row.id)
        }
    }
}
