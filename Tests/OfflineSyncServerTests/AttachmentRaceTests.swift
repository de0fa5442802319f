import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Synchronization
import Testing

/// An upload's steps racing each other, driven through the in-process service over a store
/// that runs a step of the test's own just before a chosen write: an append between a finish's
/// hash and its completing write, an append between a removal's steps, a new run of an upload
/// while the old run's pieces are being removed.
@Suite("Attachment uploads: races between their steps")
struct AttachmentRaceTests {
    static let alice = Claims(identity: "alice")
    static let bytes: [UInt8] = (0..<1000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7) }
    static let hash = sha256Hex(bytes)

    /// Runs `body` with two services over one SQLite store behind a ``WriteHookStore``.
    static func withServices(_ body: (WriteHookStore, OfflineSyncService, OfflineSyncService) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let sqlite = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let store = WriteHookStore(sqlite)
            do {
                let first = try await OfflineSyncService(store: store), second = try await OfflineSyncService(store: store)
                try await body(store, first, second)
                try await sqlite.close()
            } catch {
                try? await sqlite.close()
                throw error
            }
        }
    }

    /// The bytes the caller reads of ``hash``, or `nil` when it may read no such file.
    static func read(_ service: OfflineSyncService) async throws -> [UInt8]? {
        var read: [UInt8] = []
        guard try await service.readAttachment(claims: alice, hash: hash, from: 0, { read += $0; return true }) else { return nil }
        return read
    }

    /// The stored pieces: how many, and under which names.
    static func pieces(_ store: any LocalStore) async throws -> [String] {
        try await store.read { txn in
            try txn.records(in: "__srv_att_chunks", matching: .all).map { $0["upload"].stringValue ?? "" }
        }
    }

    @Test("an append that lands between a finish's hash and its completing write is refused as a conflict: no file is ever longer than the bytes its name hashes",
          arguments: [true, false])
    func appendDuringFinish(followedByTheFinishingInstance: Bool) async throws {
        try await Self.withServices { store, first, second in
            // With `false`, the bytes arrive through the other instance: the finishing one has
            // no running hash and reads the pieces back.
            let receiver = followedByTheFinishingInstance ? first : second
            _ = try await receiver.beginAttachmentUpload(claims: Self.alice, hash: Self.hash, length: nil)
            _ = try await receiver.appendAttachment(claims: Self.alice, hash: Self.hash, offset: 0, bytes: Self.bytes)
            let appended = Box<Int64?>(nil)
            store.before(write: 1) {
                appended.value = try? await second.appendAttachment(claims: Self.alice, hash: Self.hash, offset: Int64(Self.bytes.count),
                                                                    bytes: Array(repeating: 0xEE, count: 10))
            }
            let refused = await #expect(throws: SyncError.self) { _ = try await first.finishAttachmentUpload(claims: Self.alice, hash: Self.hash) }
            #expect(refused?.code == .conflict)
            #expect(appended.value == Int64(Self.bytes.count + 10), "the racing append did not land")
            #expect(try await Self.read(first) == nil, "a file was made of bytes that were not hashed")
            // The upload holds bytes that do not hash to its name: its next finish removes it.
            let state = try await first.attachmentUploadState(claims: Self.alice, hash: Self.hash)
            #expect(state?.offset == Int64(Self.bytes.count + 10) && state?.complete == false)
            let damaged = await #expect(throws: SyncError.self) { _ = try await first.finishAttachmentUpload(claims: Self.alice, hash: Self.hash) }
            #expect(damaged?.code == .attachmentDamaged)
            // An honest upload of the bytes makes the file, exactly them.
            _ = try await first.beginAttachmentUpload(claims: Self.alice, hash: Self.hash, length: nil)
            _ = try await first.appendAttachment(claims: Self.alice, hash: Self.hash, offset: 0, bytes: Self.bytes)
            #expect(try await first.finishAttachmentUpload(claims: Self.alice, hash: Self.hash).complete)
            #expect(try await Self.read(second) == Self.bytes)
        }
    }

    @Test("an append that comes while a cancelled upload is being removed finds no upload, and leaves no piece that nothing owns")
    func appendDuringRemoval() async throws {
        try await Self.withServices { store, first, second in
            _ = try await first.beginAttachmentUpload(claims: Self.alice, hash: Self.hash, length: nil)
            _ = try await first.appendAttachment(claims: Self.alice, hash: Self.hash, offset: 0, bytes: Self.bytes)
            #expect(try await Self.pieces(store).count == 1)
            // The removal's third write: its last look for pieces (the row went first). Before
            // the row went first, this was the row's deletion, and the append landed a piece no
            // row owned, outside every quota, for good.
            let outcome = Box<SyncError.Code?>(nil)
            store.before(write: 3) {
                do {
                    _ = try await second.appendAttachment(claims: Self.alice, hash: Self.hash, offset: Int64(Self.bytes.count), bytes: [1, 2, 3])
                } catch let error as SyncError {
                    outcome.value = error.code
                } catch {}
            }
            #expect(try await first.cancelAttachmentUpload(claims: Self.alice, hash: Self.hash))
            #expect(outcome.value == .notFound, "the append found the upload being removed")
            #expect(try await Self.pieces(store) == [], "a piece outlived its upload")
            #expect(try await first.attachmentUploadState(claims: Self.alice, hash: Self.hash) == nil)
        }
    }

    @Test("an upload created anew while its cancelled run's pieces are being removed keeps its own pieces and finishes whole")
    func newRunDuringRemoval() async throws {
        try await Self.withServices { store, first, second in
            _ = try await first.beginAttachmentUpload(claims: Self.alice, hash: Self.hash, length: nil)
            _ = try await first.appendAttachment(claims: Self.alice, hash: Self.hash, offset: 0, bytes: Array(repeating: 7, count: 500))
            // After the row's deletion, before its pieces go: the client starts again.
            let started = Box<Int64?>(nil)
            store.before(write: 2) {
                _ = try? await second.beginAttachmentUpload(claims: Self.alice, hash: Self.hash, length: Int64(Self.bytes.count))
                started.value = try? await second.appendAttachment(claims: Self.alice, hash: Self.hash, offset: 0, bytes: Self.bytes)
            }
            #expect(try await first.cancelAttachmentUpload(claims: Self.alice, hash: Self.hash))
            #expect(started.value == Int64(Self.bytes.count), "the new run could not start")
            #expect(try await Self.pieces(store).count == 1, "the old run's removal took the new run's piece")
            #expect(try await first.finishAttachmentUpload(claims: Self.alice, hash: Self.hash).complete)
            #expect(try await Self.read(first) == Self.bytes)
        }
    }

    @Test("the count of unfinished uploads is taken from the uploads when the store kept none (a store of an earlier version)")
    func openUploadsCountedFromAnOlderStore() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            try await withClosing(store) { store in
                let service = try await OfflineSyncService(store: store, attachmentLimits: AttachmentLimits(maximumOpenUploads: 3))
                func begin(_ digit: Character) async throws {
                    _ = try await service.beginAttachmentUpload(claims: Self.alice, hash: String(repeating: digit, count: 64), length: nil)
                }
                try await begin("1")
                try await begin("2")
                // As an earlier version left it: the bytes, and no count.
                try await store.write { txn in
                    guard let usage = try txn.record(in: "__srv_att_usage", id: "alice") else { throw SyncError(.notFound, "no usage row") }
                    try txn.upsert(Record(id: "alice", fields: ["bytes": usage["bytes"]]), in: "__srv_att_usage")
                }
                try await begin("3")
                let refused = await #expect(throws: SyncError.self) { try await begin("4") }
                #expect(refused?.code == .limitExceeded)
                #expect(try await service.cancelAttachmentUpload(claims: Self.alice, hash: String(repeating: "1", count: 64)))
                try await begin("4")
            }
        }
    }

    @Test("a table the service will not serve refuses its operations with the refusal's code, stored with the outcome so a replay gets it too")
    func tableRefusalsCarryTheirCode() async throws {
        let rules = SyncRules(defaultAccess: .deny, tables: ["todos": .ownerOnly])
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            try await withClosing(store) { store in
                let service = try await OfflineSyncService(store: store, rules: rules)
                let operation = PushOperation(id: "s1", table: "secrets", itemId: "s1", kind: .insert, item: Record(id: "s1"), baseVersion: nil)
                for attempt in ["first", "replay"] {
                    let result = try #require(try await service.push(claims: Self.alice, [operation]).first)
                    guard case .rejected(_, let status) = result.outcome else { Issue.record("\(attempt): not refused"); continue }
                    #expect(status == 403, "\(attempt)")
                    #expect(result.rejectionCode == .forbidden, "\(attempt)")
                }
                // Undeclared tables refused: a table the rules allow but the service does not serve.
                let strict = try await OfflineSyncService(store: store, allowUndeclaredTables: false)
                let unserved = PushOperation(id: "u1", table: "notes", itemId: "n1", kind: .insert, item: Record(id: "n1"), baseVersion: nil)
                for attempt in ["first", "replay"] {
                    let result = try #require(try await strict.push(claims: Self.alice, [unserved]).first)
                    guard case .rejected(_, let status) = result.outcome else { Issue.record("\(attempt): not refused"); continue }
                    #expect(status == 404, "\(attempt)")
                    #expect(result.rejectionCode == .rejected, "\(attempt)")
                }
            }
        }
    }
}

/// A real store that runs a step of the test's own just before one of its next writes (the
/// `number`th from the arming), once. The step's own writes pass straight through.
final class WriteHookStore: LocalStore {
    private struct Hook {
        var remaining: Int
        let step: @Sendable () async -> Void
    }

    let inner: any LocalStore
    private let hook = Mutex<Hook?>(nil)

    init(_ inner: any LocalStore) { self.inner = inner }

    /// Runs `step` before the `number`th write from now.
    func before(write number: Int, _ step: @escaping @Sendable () async -> Void) {
        hook.withLock { $0 = Hook(remaining: max(1, number), step: step) }
    }

    func defineTable(_ schema: TableSchema) async throws { try await inner.defineTable(schema) }

    func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try await inner.read(body)
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        let step = hook.withLock { hook -> (@Sendable () async -> Void)? in
            guard var current = hook else { return nil }
            current.remaining -= 1
            guard current.remaining == 0 else {
                hook = current
                return nil
            }
            hook = nil
            return current.step
        }
        if let step { await step() }
        return try await inner.write(body)
    }

    func close() async throws { try await inner.close() }
}
