import Foundation
@testable import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import Testing

/// A change whose record reached the store but whose queue entry failed must not commit, even
/// when the app's closure catches the error and returns: the record would sit in the store
/// with nothing queued to send it.
@Suite struct TornWriteTests {
    static let notes = TableSchema("notes", fields: [FieldDefinition("title", .string)])

    /// A context on a store the test can also write behind the queue's back, `notes` defined.
    static func open() async throws -> (InMemoryStore, SyncContext) {
        let store = InMemoryStore()
        let context = try await SyncContext(store: store, remote: OfflineSyncService(store: InMemoryStore()).remote(for: "u"))
        try await context.defineTable(notes)
        return (store, context)
    }

    static func isInvalidSequence(_ error: any Error) -> Bool {
        (error as? SyncError)?.code == .invalidOperationSequence
    }

    @Test("an insert whose queue entry fails rolls the transaction back though the closure caught it")
    func insert() async throws {
        let (store, context) = try await Self.open()
        try await context.table("notes").insert(Record(id: "x", fields: ["title": "queued"]))
        // The record leaves behind the queue's back, so its insert stays queued: a second
        // insert of x reaches the store, then cannot be queued after the pending one.
        try await store.write { tx in _ = try tx.delete(id: "x", in: "notes") }
        await #expect {
            try await context.transaction { tx in
                try tx.insert(Record(id: "other", fields: ["title": "beside it"]), into: "notes")
                #expect(throws: SyncError.self) { try tx.insert(Record(id: "x", fields: ["title": "again"]), into: "notes") }
            }
        } throws: { Self.isInvalidSequence($0) }
        #expect(try await context.table("notes").count() == 0)
        let queue = try await context.queuedOperations()
        #expect(queue.map(\.itemId) == ["x"])
        #expect(queue.first?.item?["title"] == "queued")
    }

    @Test("an update whose queue entry fails rolls the transaction back though the closure caught it")
    func update() async throws {
        let (store, context) = try await Self.open()
        try await context.table("notes").insert(Record(id: "y", fields: ["title": "pushed"]))
        try await context.push()
        try await context.table("notes").delete(id: "y")
        // The record comes back behind the queue's back: an update finds it, writes it, and
        // cannot be queued after the pending delete.
        try await store.write { tx in try tx.upsert(Record(id: "y", fields: ["title": "restored"]), in: "notes") }
        await #expect {
            try await context.transaction { tx in
                _ = try? tx.update(Record(id: "y", fields: ["title": "edited"]), in: "notes")
            }
        } throws: { Self.isInvalidSequence($0) }
        #expect(try await context.table("notes").get("y")?["title"] == "restored")
        #expect(try await context.queuedOperations().map(\.kind) == [.delete])
    }

    @Test("a refused duplicate insert leaves the transaction whole")
    func duplicate() async throws {
        let (_, context) = try await Self.open()
        try await context.transaction { tx in
            try tx.insert(Record(id: "z", fields: ["title": "first"]), into: "notes")
            #expect { try tx.insert(Record(id: "z", fields: ["title": "second"]), into: "notes") } throws: {
                ($0 as? SyncError)?.code == .duplicateId
            }
        }
        #expect(try await context.table("notes").get("z")?["title"] == "first")
        #expect(try await context.queuedOperations().map(\.kind) == [.insert])
    }
}
