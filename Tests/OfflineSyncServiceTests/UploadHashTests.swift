import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A server instance hashes an upload as its pieces commit, so finishing it needs no second
/// read of the bytes. That running hash must stand only for the bytes the store holds: these
/// uploads cross two service instances over one store (two servers over one database).
@Suite("Running hashes of uploads")
struct UploadHashTests {
    static let piece = OfflineSyncService.attachmentPiece
    static let bytes: [UInt8] = (0..<(3 * piece)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }
    static let hash = AttachmentHasher.hash(bytes)
    static let alice = Claims(identity: "alice")

    static func piece(_ number: Int, of bytes: [UInt8] = bytes) -> [UInt8] { Array(bytes[(number * piece)..<((number + 1) * piece)]) }

    /// Starts alice's upload of ``hash`` on `service`.
    static func begin(_ service: OfflineSyncService) async throws {
        _ = try await service.beginAttachmentUpload(claims: alice, hash: hash, length: Int64(bytes.count))
    }

    /// Sends piece `number` of `bytes` (the right bytes unless told) through `service`.
    static func send(_ number: Int, through service: OfflineSyncService, of bytes: [UInt8] = bytes) async throws {
        _ = try await service.appendAttachment(claims: alice, hash: hash, offset: Int64(number * piece), bytes: Self.piece(number, of: bytes))
    }

    static func withTwoInstances(_ body: (OfflineSyncService, OfflineSyncService) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let first = try await OfflineSyncService(store: store), second = try await OfflineSyncService(store: store)
            try await body(first, second)
            try await store.close()
        }
    }

    static func stored(_ service: OfflineSyncService) async throws -> [UInt8]? {
        var read: [UInt8] = []
        guard try await service.readAttachment(claims: alice, hash: hash, from: 0, { read += $0; return true }) else { return nil }
        return read
    }

    @Test("an upload one instance received whole finishes with the right bytes, and wrong bytes are refused")
    func followedWhole() async throws {
        try await Self.withTwoInstances { first, _ in
            var damaged = Self.bytes
            damaged[Self.piece + 7] ^= 0xff
            try await Self.begin(first)
            for number in 0..<3 { try await Self.send(number, through: first, of: damaged) }
            let refused = await #expect(throws: SyncError.self) { _ = try await first.finishAttachmentUpload(claims: Self.alice, hash: Self.hash) }
            #expect(refused?.code == .attachmentDamaged)
            #expect(try await Self.stored(first) == nil)

            try await Self.begin(first)
            for number in 0..<3 { try await Self.send(number, through: first) }
            #expect(try await first.finishAttachmentUpload(claims: Self.alice, hash: Self.hash).complete)
            #expect(try await Self.stored(first).map(AttachmentHasher.hash) == Self.hash)
        }
    }

    @Test("a piece stored by the other instance is not missed: the finish reads the bytes back")
    func pieceElsewhere() async throws {
        try await Self.withTwoInstances { first, second in
            try await Self.begin(first)
            try await Self.send(0, through: first)
            try await Self.send(1, through: second)
            try await Self.send(2, through: first)
            #expect(try await first.finishAttachmentUpload(claims: Self.alice, hash: Self.hash).complete)
            #expect(try await Self.stored(second).map(AttachmentHasher.hash) == Self.hash)
        }
    }

    @Test("an upload cancelled and sent again with other bytes through the other instance is checked against what is stored")
    func runStartedElsewhere() async throws {
        try await Self.withTwoInstances { first, second in
            try await Self.begin(first)
            try await Self.send(0, through: first)
            // The second instance cancels it and starts again with a wrong first piece; the
            // first instance, which hashed the right first piece, receives the rest.
            #expect(try await second.cancelAttachmentUpload(claims: Self.alice, hash: Self.hash))
            try await Self.begin(second)
            _ = try await second.appendAttachment(claims: Self.alice, hash: Self.hash, offset: 0, bytes: [UInt8](repeating: 0, count: Self.piece))
            try await Self.send(1, through: first)
            try await Self.send(2, through: first)
            let refused = await #expect(throws: SyncError.self) { _ = try await first.finishAttachmentUpload(claims: Self.alice, hash: Self.hash) }
            #expect(refused?.code == .attachmentDamaged)
            #expect(try await Self.stored(first) == nil)
            #expect(try await Self.stored(second) == nil)
        }
    }
}
