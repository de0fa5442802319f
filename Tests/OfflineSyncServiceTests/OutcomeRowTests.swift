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
            let operation = PushOperation(id: "op-\(index)", table: "t", itemId: "a", kind: .delete, item: nil, baseVersion: nil)
            #expect(try back.pushOutcome(answering: operation) == outcome, "outcome \(index)")
            #expect(back.createdAt == row.createdAt && back.id == row.id)
        }
    }

    @Test("an applied insert or update keeps only what the service added, and is rebuilt from the same operation sent again")
    func appliedItemsAreKeptWithoutTheirFields() throws {
        let title = "e\u{301}: a title only the item holds"
        let item = Record(id: "a", fields: ["title": .string(title), "n": .int(-1), "tags": .array([.null, .bytes([1])])])
        let stored = Record(id: "a", fields: item.fields, version: "v-3", updatedAt: Timestamp(millisecondsSince1970: 7))
        for kind in [OperationKind.insert, .update] {
            let operation = PushOperation(id: "op", table: "t", itemId: "a", kind: kind, item: item, baseVersion: nil)
            let row = OfflineSyncService.OutcomeRow(id: "u/op", outcome: .applied(stored), answering: operation, createdAt: Timestamp(millisecondsSince1970: 1))
            let whole = OfflineSyncService.OutcomeRow(id: "u/op", outcome: .applied(stored), createdAt: Timestamp(millisecondsSince1970: 1))
            #expect(!row.outcome.contains(Data(title.utf8)) && whole.outcome.contains(Data(title.utf8)), "the fields are not stored again")
            #expect(row.record() == (try RecordEncoder().encode(row)))
            let back = try OfflineSyncService.OutcomeRow(row: row.record())
            #expect(try back.pushOutcome(answering: operation) == .applied(stored))
            // The id sent again as something else is refused, never told it was applied.
            for other in [PushOperation(id: "op", table: "t", itemId: "b", kind: kind, item: Record(id: "b", fields: item.fields), baseVersion: nil),
                          PushOperation(id: "op", table: "t", itemId: "a", kind: .delete, item: nil, baseVersion: nil)] {
                guard case .rejected(_, 409) = try back.pushOutcome(answering: other) else {
                    Issue.record("\(other.kind) of \(other.itemId) was answered as applied"); continue
                }
            }
        }
        // A delete's applied record is the server's last copy: kept whole.
        let tombstone = Record(id: "a", fields: ["title": .string("x")], version: "v-4", deleted: true)
        let delete = PushOperation(id: "op", table: "t", itemId: "a", kind: .delete, item: nil, baseVersion: nil)
        let row = OfflineSyncService.OutcomeRow(id: "u/op", outcome: .applied(tombstone), answering: delete, createdAt: Timestamp(millisecondsSince1970: 1))
        #expect(try OfflineSyncService.OutcomeRow(row: row.record()).pushOutcome(answering: delete) == .applied(tombstone))
    }

    // Against the code before: a replayed refusal came back without its code (the code was
    // inside the stored reason).
    @Test("a rejection keeps its code in the stored outcome, and a replay answers with it; one stored without a code has none")
    func rejectionCodeIsKept() throws {
        let operation = PushOperation(id: "op", table: "t", itemId: "a", kind: .delete, item: nil, baseVersion: nil)
        let refused = PushOutcome.rejected(reason: "attachment 3f1e is not on the server for this identity", status: 409)
        let coded = OfflineSyncService.OutcomeRow(id: "u/op", outcome: refused, code: .attachmentMissing, createdAt: Timestamp(millisecondsSince1970: 1))
        let back = try OfflineSyncService.OutcomeRow(row: coded.record()).pushAnswer(answering: operation)
        #expect(back.outcome == refused)
        #expect(back.code == .attachmentMissing)
        let plain = OfflineSyncService.OutcomeRow(id: "u/op", outcome: refused, createdAt: Timestamp(millisecondsSince1970: 1))
        #expect(try OfflineSyncService.OutcomeRow(row: plain.record()).pushAnswer(answering: operation).code == nil)
    }
}

@Suite("Service: row versions")
struct VersionTests {
    @Test("a version is the epoch's first eight characters and the sequence number in base 36, as String(_:radix:) writes it")
    func baseThirtySix() {
        let epoch = "0123456789abcdef"
        for sequence: Int64 in [0, 1, 9, 10, 35, 36, 1_295, 1_296, 123_456_789, Int64(Int32.max), .max, -1, -36, .min] {
            #expect(OfflineSyncService.version(epoch: epoch, sequence: sequence) == "01234567-" + String(sequence, radix: 36))
        }
        #expect(OfflineSyncService.version(epoch: "é😀", sequence: 71) == "é😀-1z")
    }

    @Test("a group-log entry, in its group or after it left, is stored as RecordEncoder stores it, and reads back")
    func groupLogEntriesAgreeWithTheEncoder() throws {
        let key = OfflineSyncService.Group.member("lists", .string("é")).key
        var open = OfflineSyncService.Spans()
        open.open(at: 3)
        var closed = open
        closed.close(at: 9)
        for spans in [open, closed, OfflineSyncService.Spans()] {
            let id = OfflineSyncService.GroupLogRow.id(group: key, table: "todos", item: "t/1")
            let row = OfflineSyncService.GroupLogRow(id: id, key: key, table: "todos", item: "t/1", sequence: 9, spans: spans)
            let byHand = try row.record()
            #expect(byHand == (try RecordEncoder().encode(row)))
            let back = try OfflineSyncService.GroupLogRow(row: byHand)
            #expect(back.key == key && back.inGroup == spans.isOpen && back.sequence == 9 && back.item == "t/1")
            #expect(try OfflineSyncService.Spans(back.spans) == spans)
        }
    }
}
