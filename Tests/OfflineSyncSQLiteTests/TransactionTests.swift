import Dispatch
import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

struct AppError: Error, Equatable {}

@Suite("SQLiteStore transactions, concurrency, durability and close")
struct TransactionTests {
    static let counter = TableSchema("counter", fields: [FieldDefinition("value", .int)])

    @Test("a throwing write rolls back everything across tables and rethrows the error")
    func rollbackOnThrow() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("r.sqlite").path
            try await withStore(at: path) { store in
                try await store.defineTable(TableSchema("a"))
                try await store.defineTable(TableSchema("b"))
                try await store.write { try $0.upsert(Record(id: "kept", fields: ["v": 1]), in: "a") }
                await #expect(throws: AppError.self) {
                    try await store.write { transaction in
                        try transaction.upsert(Record(id: "new", fields: ["v": 2]), in: "a")
                        try transaction.upsert(Record(id: "kept", fields: ["v": 3]), in: "a")
                        try transaction.upsert(Record(id: "other"), in: "b")
                        _ = try transaction.delete(id: "kept", in: "a")
                        // Read-your-writes inside the transaction.
                        #expect(try transaction.count(in: "b", matching: .all) == 1)
                        throw AppError()
                    }
                }
                let (a, b) = try await store.read { transaction in
                    (try transaction.records(in: "a", matching: .all), try transaction.records(in: "b", matching: .all))
                }
                #expect(a == [Record(id: "kept", fields: ["v": 1])])
                #expect(b.isEmpty)
            }
            try await withStore(at: path) { store in
                let a = try await store.read { try $0.records(in: "a", matching: .all) }
                #expect(a == [Record(id: "kept", fields: ["v": 1])])
            }
        }
    }

    @Test("write and read return the closure's value; delete reports whether a row existed")
    func returnedValues() async throws {
        let store = try await SQLiteStore.inMemory()
        try await store.defineTable(Self.counter)
        let written = try await store.write { transaction -> [Bool] in
            try transaction.upsert(Record(id: "c", fields: ["value": 1]), in: "counter")
            return [try transaction.delete(id: "c", in: "counter"), try transaction.delete(id: "c", in: "counter")]
        }
        #expect(written == [true, false])
        let name = try await store.read { try $0.schema(of: "counter").name }
        #expect(name == "counter")
        try await store.close()
    }

    @Test("a transaction used after its closure returned throws storeClosed")
    func escapedTransaction() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(at: directory.appendingPathComponent("e.sqlite").path) { store in
                try await store.defineTable(Self.counter)
                let escapedWrite = UncheckedBox<(any LocalWriteTransaction)?>(nil)
                let escapedRead = UncheckedBox<(any LocalReadTransaction)?>(nil)
                try await store.write { transaction in
                    escapedWrite.value = transaction
                    _ = try transaction.schema(of: "counter")
                }
                try await store.read { transaction in
                    escapedRead.value = transaction
                    _ = try transaction.schema(of: "counter")
                }
                let write = try #require(escapedWrite.value)
                let read = try #require(escapedRead.value)
                #expect(await syncErrorCode { try write.upsert(Record(id: "x"), in: "counter") } == .storeClosed)
                #expect(await syncErrorCode { _ = try write.delete(id: "x", in: "counter") } == .storeClosed)
                #expect(await syncErrorCode { _ = try read.record(in: "counter", id: "x") } == .storeClosed)
                #expect(await syncErrorCode { _ = try read.tables() } == .storeClosed)
                #expect(await syncErrorCode { _ = try read.schema(of: "counter") } == .storeClosed)
                #expect(await syncErrorCode { _ = try write.schema(of: "counter") } == .storeClosed)
                #expect(await syncErrorCode { _ = try read.count(in: "counter", matching: .all) } == .storeClosed)
                // Also from inside a later transaction on the same connection.
                let inside = try await store.write { _ -> SyncError.Code? in
                    do { try escapedWrite.value?.upsert(Record(id: "x"), in: "counter"); return nil } catch let e as SyncError { return e.code }
                }
                #expect(inside == .storeClosed)
                let count = try await store.read { try $0.count(in: "counter", matching: .all) }
                #expect(count == 0)
            }
        }
    }

    @Test("close: later calls throw storeClosed, closing twice is harmless, data stays on disk")
    func closeSemantics() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("c.sqlite").path
            let store = try await SQLiteStore(path: path)
            try await store.defineTable(Self.counter)
            try await store.write { try $0.upsert(Record(id: "c", fields: ["value": 7]), in: "counter") }
            try await store.close()
            try await store.close()
            #expect(await syncErrorCode { try await store.defineTable(Self.counter) } == .storeClosed)
            #expect(await syncErrorCode { _ = try await store.read { try $0.tables() } } == .storeClosed)
            #expect(await syncErrorCode { try await store.write { _ in } } == .storeClosed)
            // Close checkpointed the WAL into the main file.
            #expect((fileBytes(path + "-wal")?.count ?? 0) == 0)
            let memory = try await SQLiteStore.inMemory()
            try await memory.close()
            #expect(await syncErrorCode { _ = try await memory.read { try $0.tables() } } == .storeClosed)
            let value = try await withStore(at: path) { reopened in
                try await reopened.read { try $0.record(in: "counter", id: "c")?["value"] }
            }
            #expect(value == 7)
        }
    }

    @Test("8 concurrent tasks × 50 read-modify-write increments lose no update", arguments: [false, true])
    func concurrentIncrements(inMemory: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let store = inMemory ? try await SQLiteStore.inMemory()
                                 : try await SQLiteStore(path: directory.appendingPathComponent("n.sqlite").path,
                                                         options: .init(synchronous: .normal))
            do {
                try await store.defineTable(Self.counter)
                try await store.write { try $0.upsert(Record(id: "c", fields: ["value": 0], version: "0"), in: "counter") }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<8 {
                        group.addTask {
                            for _ in 0..<50 {
                                try await store.write { transaction in
                                    let current = try transaction.record(in: "counter", id: "c")?["value"].intValue ?? -1_000_000
                                    try transaction.upsert(Record(id: "c", fields: ["value": .int(current + 1)], version: String(current + 1)), in: "counter")
                                }
                            }
                        }
                    }
                    // Readers run alongside and always see a consistent row.
                    for _ in 0..<4 {
                        group.addTask {
                            for _ in 0..<50 {
                                let record = try await store.read { try $0.record(in: "counter", id: "c") }
                                #expect(record?.version == record.map { String($0["value"].intValue ?? -1) })
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let final = try await store.read { try $0.record(in: "counter", id: "c")?["value"] }
                #expect(final == 400)
                try await store.close()
            } catch {
                try? await store.close()
                throw error
            }
        }
    }

    @Test("a read completes while a write transaction is in progress (WAL readers)")
    func readsRunDuringWrites() async throws {
        try await withTemporaryDirectory { directory in
            try await withStore(at: directory.appendingPathComponent("w.sqlite").path) { store in
                try await store.defineTable(Self.counter)
                try await store.write { try $0.upsert(Record(id: "c", fields: ["value": 1]), in: "counter") }
                let entered = DispatchSemaphore(value: 0)
                let release = DispatchSemaphore(value: 0)
                let writeTask = Task {
                    try await store.write { transaction in
                        try transaction.upsert(Record(id: "c", fields: ["value": 2]), in: "counter")
                        entered.signal()
                        // Hold the write open until the read below has finished (or give up).
                        guard release.wait(timeout: .now() + 20) == .success else { throw AppError() }
                    }
                }
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().async { entered.wait(); continuation.resume() }
                }
                let during = try await store.read { try $0.record(in: "counter", id: "c")?["value"] }
                release.signal()
                try await writeTask.value
                #expect(during == 1)
                let after = try await store.read { try $0.record(in: "counter", id: "c")?["value"] }
                #expect(after == 2)
            }
        }
    }

    @Test("another process holding the write lock past the busy timeout gives busy")
    func busyTimeout() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("b.sqlite").path
            try await withStore(at: path, options: .init(busyTimeout: .milliseconds(100))) { store in
                try await store.defineTable(Self.counter)
                let other = try RawDatabase(path: path)
                try other.exec("BEGIN IMMEDIATE;")
                let code = await syncErrorCode {
                    try await store.write { try $0.upsert(Record(id: "c", fields: ["value": 1]), in: "counter") }
                }
                #expect(code == .busy)
                // Reads are not blocked by the other writer.
                let count = try await store.read { try $0.count(in: "counter", matching: .all) }
                #expect(count == 0)
                try other.exec("ROLLBACK;")
                other.close()
                try await store.write { try $0.upsert(Record(id: "c", fields: ["value": 1]), in: "counter") }
            }
        }
    }

    @Test("committed writes survive reopening; options are honoured")
    func durability() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("d.sqlite").path
            for round in 0..<3 {
                let options = SQLiteStore.Options(synchronous: round == 1 ? .normal : .full, readerCount: round,
                                                  quickCheckOnOpen: round != 2)
                try await withStore(at: path, options: options) { store in
                    #expect(store.options == options)
                    try await store.defineTable(Self.counter)
                    let seen = try await store.read { try $0.count(in: "counter", matching: .all) }
                    #expect(seen == round)
                    try await store.write { try $0.upsert(Record(id: "r\(round)", fields: ["value": .int(Int64(round))]), in: "counter") }
                }
            }
            let all = try await withStore(at: path) { store in
                try await store.read { try $0.records(in: "counter", matching: Query(.all, order: [SortKey("value")])) }
            }
            #expect(all.map(\.id) == ["r0", "r1", "r2"])
        }
    }
}
