import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Swift Testing has an `Attachment` type of its own.
private typealias Attachment = OfflineSync.Attachment

/// A record the server refuses because it lacks the record's file: its own code, and a
/// recovery that works (Docs/Attachments.md, "A record refused for its file").
@Suite("Attachments: a record refused for its file")
struct AttachmentRecoveryTests {
    static let schema = TableSchema("inspections", fields: [FieldDefinition("site", .string)])
    static let photo: [UInt8] = (0..<300_000).map { UInt8(truncatingIfNeeded: ($0 &* 7_919) >> 3) }

    // Against the code before typed rejection codes: the error's code was `conflict` (every
    // 409 was), adding the bytes left the attachment `remote`, so the retry uploaded nothing
    // and was refused again.
    @Test("a record whose file the server lacks is attachmentMissing, not a conflict; adding the bytes again and retrying uploads the file and applies the record")
    func refusedForItsFileThenRecovered() async throws {
        try await LiveServer.with { live in
            let device = try await SyncContext(store: InMemoryStore(), remote: try await live.remote("alice"))
            try await device.defineTable(Self.schema)
            // A reference written without its file on this device (named by hand, or its file
            // lost): the row is `remote`, so the push uploads nothing before the record.
            let reference = try Attachment(sha256: sha256Hex(Self.photo), size: Int64(Self.photo.count), contentType: "image/jpeg")
            try await device.table("inspections").insert(Record(id: "i1", fields: ["site": "north", "photo": reference.value]))
            #expect(try await device.attachmentState(reference) == .remote)
            _ = try await device.push()

            let errors = try await device.operationErrors()
            #expect(errors.count == 1)
            let refused = try #require(errors.first)
            #expect(refused.code == .attachmentMissing, "\(refused.code): \(refused.message)")
            #expect(refused.status == 409)
            #expect(refused.serverRecord == nil)
            #expect(!refused.message.hasPrefix("attachmentMissing"), "the code is not in the message: \(refused.message)")
            // The code survives a read of `__operation_errors` by a later call.
            #expect(try await device.operationErrors().map(\.code) == [.attachmentMissing])

            // The recovery: the bytes again, then a retry.
            let added = try await device.addAttachment(Self.photo, contentType: "image/jpeg")
            #expect(added == reference)
            #expect(try await device.attachmentState(reference) == .pendingUpload)
            try await device.resolve(refused, with: .retry)
            _ = try await device.push()
            #expect(try await device.operationErrors().isEmpty)
            #expect(try await device.queuedOperationCount() == 0)
            #expect(try await device.attachmentState(reference) == .local)

            // The server holds the record and its file: another device of alice's reads both.
            let other = try await SyncContext(store: InMemoryStore(), remote: try await live.remote("alice"))
            try await other.defineTable(Self.schema)
            try await other.table("inspections").pull()
            let pulled = try #require(try await other.table("inspections").get("i1"))
            let back = try #require(try Attachment(value: pulled["photo"]))
            #expect(back == reference)
            #expect(try await other.attachmentData(reference) == Data(Self.photo))
            try await device.close()
            try await other.close()
        }
    }

    // Against the code before: the error's code was `conflict`, and the file stayed `local`,
    // so the retry uploaded nothing and was refused again.
    @Test("a file the server collected while this device still holds it goes up again when the refused record is retried")
    func collectedFileGoesUpAgain() async throws {
        try await LiveServer.with { live in
            let device = try await SyncContext(store: InMemoryStore(), remote: try await live.remote("alice"))
            try await device.defineTable(Self.schema)
            let photo = try await device.addAttachment(Self.photo, contentType: "image/jpeg")
            try await device.table("inspections").insert(Record(id: "i1", fields: ["photo": photo.value]))
            _ = try await device.push()
            #expect(try await device.attachmentState(photo) == .local)
            // The record goes, and the server collects the file no row references any more
            // (a day's grace, passed here by asking as of two days on).
            try await device.table("inspections").delete(id: "i1")
            _ = try await device.push()
            let later = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 2 * 86_400_000)
            #expect(try await live.server.service.pruneAttachments(now: later) == 1)

            // A new record references the file this device still holds as `local`.
            try await device.table("inspections").insert(Record(id: "i2", fields: ["photo": photo.value]))
            _ = try await device.push()
            let refused = try #require(try await device.operationErrors().first)
            #expect(refused.code == .attachmentMissing, "\(refused.code): \(refused.message)")
            #expect(try await device.attachmentState(photo) == .pendingUpload, "the refusal marks the file to go up again")
            try await device.resolve(refused, with: .retry)
            _ = try await device.push()
            #expect(try await device.operationErrors().isEmpty)
            #expect(try await device.queuedOperationCount() == 0)
            #expect(try await device.attachmentState(photo) == .local)
            let other = try await SyncContext(store: InMemoryStore(), remote: try await live.remote("alice"))
            #expect(try await other.attachmentData(photo) == Data(Self.photo))
            try await device.close()
            try await other.close()
        }
    }

    @Test("adding the bytes of an attachment the device already has, or that no record references, changes no state")
    func addingAgainLeavesOtherStatesAlone() async throws {
        let device = try await SyncContext(store: InMemoryStore(), remote: NoRemote())
        try await device.defineTable(Self.schema)
        let unreferenced = try await device.addAttachment(Self.photo, contentType: "image/jpeg")
        #expect(try await device.attachmentState(unreferenced) == nil)
        try await device.table("inspections").insert(Record(id: "i1", fields: ["photo": unreferenced.value]))
        #expect(try await device.attachmentState(unreferenced) == .pendingUpload)
        _ = try await device.addAttachment(Self.photo, contentType: "image/jpeg")
        #expect(try await device.attachmentState(unreferenced) == .pendingUpload)
        try await device.close()
    }
}

/// A remote that is never reached: the test above only writes locally.
private struct NoRemote: RemoteStore {
    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        throw SyncError(.transient, "no remote in this test")
    }

    func pull(_ request: PullRequest) async throws -> PullPage {
        throw SyncError(.transient, "no remote in this test")
    }
}
