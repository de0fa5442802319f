import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Swift Testing has an `Attachment` type of its own.
private typealias Attachment = OfflineSync.Attachment

/// A model with attachments: one optional, a list.
private struct Inspection: SyncModel, Equatable {
    static let tableName = "inspections"
    var id: String
    var site: String
    var photo: Attachment?
    var pages: [Attachment]
}

/// The reference shape, its checks, and how models and writes carry it.
@Suite("Attachments: the model")
struct AttachmentModelTests {
    static let hash = String(repeating: "0123456789abcdef", count: 4)

    @Test func valueShapeRoundTrips() throws {
        let plain = try Attachment(sha256: Self.hash, size: 10, contentType: "application/pdf")
        let named = try Attachment(sha256: Self.hash, size: 10, contentType: "application/pdf", fileName: "report.pdf")
        #expect(try Attachment(value: plain.value) == plain)
        #expect(try Attachment(value: named.value) == named)
        #expect(plain.value == .object(["$attachment": .string(Self.hash), "size": 10, "contentType": "application/pdf"]))
        #expect(try Attachment(value: .object(["title": "x"])) == nil)
        #expect(try Attachment(value: .string(Self.hash)) == nil)
    }

    @Test(arguments: [
        Value.object(["$attachment": "ABC", "size": 1, "contentType": "x"]),
        .object(["$attachment": .string(String(repeating: "A", count: 64)), "size": 1, "contentType": "x"]),
        .object(["$attachment": .string(String(repeating: "a", count: 64)), "size": -1, "contentType": "x"]),
        .object(["$attachment": .string(String(repeating: "a", count: 64)), "size": "1", "contentType": "x"]),
        .object(["$attachment": .string(String(repeating: "a", count: 64)), "size": 1]),
        .object(["$attachment": .string(String(repeating: "a", count: 64)), "size": 1, "contentType": "x", "fileName": 3]),
        .object(["$attachment": .string(String(repeating: "a", count: 64)), "size": 1, "contentType": "x", "extra": true]),
    ])
    func malformedReferenceIsInvalid(value: Value) throws {
        #expect(throws: SyncError.self) { _ = try Attachment(value: value) }
        #expect(throws: SyncError.self) { _ = try Attachment.references(in: Record(id: "r", fields: ["f": .array([value])])) }
    }

    @Test func referencesAreFoundAtAnyDepthOnce() throws {
        let a = try Attachment(sha256: Self.hash, size: 1, contentType: "x")
        let b = try Attachment(sha256: String(repeating: "f", count: 64), size: 2, contentType: "y")
        let record = Record(id: "r", fields: ["title": "t", "photo": a.value, "more": .array([.object(["inner": b.value]), a.value])])
        #expect(Set(try Attachment.references(in: record)) == [a, b])
        #expect(try Attachment.references(in: Record(id: "r", fields: ["n": 1])).isEmpty)
    }

    @Test func modelPropertiesRoundTripAndQueueUploads() async throws {
        let context = try await SyncContext(store: InMemoryStore(), remote: UnreachableRemote())
        try await context.defineTable(Inspection.schema)
        let photo = try await context.addAttachment(Array("front door".utf8), contentType: "image/jpeg", fileName: "door.jpg")
        let page = try await context.addAttachment(Array("page one".utf8), contentType: "application/pdf")
        let remoteOnly = try Attachment(sha256: Self.hash, size: 99, contentType: "image/png")
        let model = Inspection(id: "i1", site: "north", photo: photo, pages: [page, remoteOnly])
        try await context.table(Inspection.self).insert(model)
        #expect(try await context.table(Inspection.self).get("i1") == model)
        let record = try #require(try await context.table("inspections").get("i1"))
        #expect(record["photo"] == photo.value)
        #expect(try await context.attachmentState(photo) == .pendingUpload)
        #expect(try await context.attachmentState(page) == .pendingUpload)
        // Named but never stored here: the server's bytes, checked when the insert is pushed.
        #expect(try await context.attachmentState(remoteOnly) == .remote)
        #expect(try await context.attachmentData(page) == Data("page one".utf8))
        do {
            _ = try await context.attachmentData(remoteOnly)
            Issue.record("read an attachment that is nowhere")
        } catch let error as SyncError {
            #expect(error.code == .attachmentUnavailable, "\(error)")
        }
        try await context.close()
    }

    @Test func overTheLimitIsRefusedBeforeAnyByteIsKept() async throws {
        var options = SyncOptions()
        options.attachments.maximumSize = 1000
        let store = InMemoryStore()
        let context = try await SyncContext(store: store, remote: UnreachableRemote(), options: options)
        await #expect(throws: SyncError.self) {
            try await context.addAttachment([UInt8](repeating: 1, count: 1001), contentType: "x")
        }
        #expect(try store.attachmentFiles?.files().isEmpty == true)
        _ = try await context.addAttachment([UInt8](repeating: 1, count: 1000), contentType: "x")
        try await context.close()
    }

    @Test func addingAFileStreamsItIn() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("scan.bin")
            let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 101) }
            try Data(bytes).write(to: url)
            let context = try await SyncContext(store: InMemoryStore(), remote: UnreachableRemote())
            let scan = try await context.addAttachment(contentsOf: url, contentType: "application/octet-stream", fileName: "scan.bin")
            #expect(scan.size == 3_000_000)
            let same = try await context.attachmentData(scan) == Data(bytes)
            #expect(same, "the bytes read back")
            await #expect(throws: SyncError.self) {
                try await context.addAttachment(contentsOf: directory.appendingPathComponent("missing"), contentType: "x")
            }
            try await context.close()
        }
    }
}
