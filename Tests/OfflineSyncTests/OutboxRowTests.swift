@testable import OfflineSync
import Testing

/// `__operations` rows are written and read by hand for speed; these tests hold the hand-written
/// path to the table's Codable declaration, ``OperationRow``, so the two cannot drift apart.
@Suite("The outbox's hand-written rows match their Codable declaration")
struct OutboxRowTests {
    static let operations: [QueuedOperation] = {
        let now = Timestamp(millisecondsSince1970: 1_700_000_000_123)
        let insert = QueuedOperation(id: "op-1", sequence: 1, table: "todos", itemId: "t1", kind: .insert,
                                     item: Record(id: "t1", fields: ["title": "milk", "n": 3, "tags": ["a", .null]]),
                                     baseVersion: nil, transaction: "tx-1", changedFields: ["n", "tags", "title"], now: now)
        var attempted = QueuedOperation(id: "op-2", sequence: 7, table: "日本", itemId: "a/b", kind: .update,
                                        item: Record(id: "a/b", fields: ["x": .bytes([0, 255])]), baseVersion: "v9",
                                        transaction: "tx-2", changedFields: ["x"], now: now)
        attempted.state = .attempted
        attempted.attempts = 2
        attempted.sendId = "resend-1"
        attempted.changedAt = Timestamp(millisecondsSince1970: 1_700_000_000_999)
        var failedDelete = QueuedOperation(id: "op-3", sequence: 9, table: "todos", itemId: "t2", kind: .delete, item: nil,
                                           baseVersion: "v1", transaction: "tx-3", changedFields: [], now: now)
        failedDelete.state = .failed
        return [insert, attempted, failedDelete]
    }()

    @Test("the hand-written row is the one RecordEncoder makes of the declaration, and both read back the same")
    func handWrittenRowMatchesTheDeclaration() throws {
        for operation in Self.operations {
            let byHand = operation.record()
            let encoded = try RecordEncoder().encode(OperationRow(operation))
            #expect(byHand == encoded)
            #expect(try QueuedOperation(row: encoded) == operation)
            #expect(try RecordEncoder().encode(OperationRow(row: byHand)) == byHand)
        }
    }

    @Test("rows queued before the later columns existed read with their defaults")
    func oldRowsReadWithDefaults() throws {
        var old = Self.operations[0].record()
        for column in [OperationRow.CodingKeys.changedAt, .transaction, .sendId, .changedFields] {
            old.fields[OperationRow.name(column)] = nil
        }
        let read = try QueuedOperation(row: old)
        #expect(read.changedAt == read.createdAt)
        #expect(read.transaction == "")
        #expect(read.sendId == read.id)
        #expect(read.changedFields == [])
    }

    @Test("a row without a kind or with an unknown state is corrupted, naming the row but no value")
    func damagedRowsAreCorrupted() {
        var noKind = Self.operations[0].record()
        noKind.fields[OperationRow.name(.kind)] = nil
        var oddState = Self.operations[0].record()
        oddState.fields[OperationRow.name(.state)] = "half-sent"
        for row in [noKind, oddState] {
            #expect {
                try QueuedOperation(row: row)
            } throws: { error in
                (error as? SyncError)?.code == .corrupted && "\(error)".contains("op-1") && !"\(error)".contains("milk")
            }
        }
    }
}
