import Foundation
import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Synchronization
import Testing

/// A commit can land while an observation reads: before the read's snapshot (the read
/// holds it) or after (it does not). Either way the observation must show it, once, and a
/// patch after the read must not lose it. A real store whose reads can be held at either
/// point makes both orders happen on purpose. The time limit guards against a hang only (see
/// ObservationPatchTests: awaits in sequence are slow while the whole binary runs).
@Suite("Observations: commits that land during a read", .timeLimit(.minutes(10 * sanitizerSlowdown)))
struct ObservationReadRaceTests {
    @Test("a commit after the read's snapshot is shown next, also when a later commit patches", arguments: ["memory", "sqlite"])
    func afterSnapshot(_ kind: String) async throws {
        try await withHeldStore(kind) { store, observer, values in
            try await Self.insert("r2", observer)
            // A change whose rows are unknown: the observation must read, not patch.
            let hold = store.holdNextRead(.afterSnapshot)
            observer.announce([TableChange(table: "items", ids: nil)])
            values.request()
            await hold.reached.first { _ in true }
            try await Self.insert("r3", observer)
            hold.release.yield()
            #expect(try await values.receive() == ["r1", "r2"])
            try await Self.insert("r4", observer)
            #expect(try await Self.ids(&values) == ["r1", "r2", "r3", "r4"])
        }
    }

    @Test("a commit before the read's snapshot is shown by the read, and not again", arguments: ["memory", "sqlite"])
    func beforeSnapshot(_ kind: String) async throws {
        try await withHeldStore(kind) { store, observer, values in
            let hold = store.holdNextRead(.beforeSnapshot)
            observer.announce([TableChange(table: "items", ids: nil)])
            values.request()
            await hold.reached.first { _ in true }
            try await Self.insert("r2", observer)
            hold.release.yield()
            #expect(try await values.receive() == ["r1", "r2"])
            // The patch that replays r2 onto a result holding it changes nothing: the next
            // value is r3's, not r2's again.
            try await Self.insert("r3", observer)
            #expect(try await Self.ids(&values) == ["r1", "r2", "r3"])
        }
    }

    @Test("a write that commits after another and announces before it does not leave the older row shown",
          arguments: ["memory", "sqlite"])
    func announcedOutOfCommitOrder(_ kind: String) async throws {
        try await withHeldStore(kind) { _, observer, values in
            let (paused, pausedContinuation) = AsyncStream.makeStream(of: Void.self)
            let (resume, resumeContinuation) = AsyncStream.makeStream(of: Void.self)
            let isFirst = Mutex(true)
            // The first write stops between its commit and its announcement.
            observer.beforeAnnouncing {
                guard isFirst.withLock({ first in defer { first = false }; return first }) else { return }
                pausedContinuation.yield()
                for await _ in resume { break }
            }
            let older = Task { try await Self.set("r1", 2, observer) }
            await paused.first { _ in true }
            try await Self.set("r1", 3, observer)
            resumeContinuation.yield()
            try await older.value
            // A later write alone: once its row shows, every earlier commit has been looked at.
            try await Self.insert("r2", observer)
            var shown: [Record] = []
            while !shown.contains(where: { $0.id == "r2" }) {
                values.request()
                shown = try #require(try await values.values.next())
            }
            let first = shown.first { $0.id == "r1" }
            #expect(first?["n"] == .int(3), "the observation shows r1 as the later commit left it")
        }
    }

    static func set(_ id: String, _ n: Int64, _ observer: StoreObserver) async throws {
        try await observer.write { try $0.upsert(Record(id: id, fields: ["n": .int(n)]), in: "items") }
    }

    static func insert(_ id: String, _ observer: StoreObserver) async throws {
        try await observer.write { try $0.upsert(Record(id: id, fields: ["n": .int(1)]), in: "items") }
    }

    /// An observation iterated on its own task, one value per ``next()``: between two calls
    /// the observation does not look at the store, so commits meanwhile pile up for it.
    struct Values {
        let demand: AsyncStream<Void>.Continuation
        var values: AsyncThrowingStream<[Record], any Error>.Iterator

        /// Lets the observation look for its next value.
        func request() { demand.yield() }

        /// The ids of the value requested.
        mutating func receive() async throws -> [String]? {
            try await values.next()?.map(\.id)
        }
    }

    static func ids(_ values: inout Values) async throws -> [String]? {
        values.request()
        return try await values.receive()
    }

    /// Runs `body` with a held-read store holding `r1`, its observer, and the values of an
    /// observation of every row after the first (`[r1]`).
    func withHeldStore(_ kind: String, _ body: (HeldReadStore, StoreObserver, inout Values) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let inner: any LocalStore = kind == "memory" ? InMemoryStore()
                : try await SQLiteStore(path: directory.appendingPathComponent("app.db").path)
            let store = HeldReadStore(inner)
            try await store.defineTable(TableSchema("items", fields: [FieldDefinition("n", .int)]))
            let observer = StoreObserver(store: store)
            try await Self.insert("r1", observer)
            let (stream, continuation) = AsyncThrowingStream.makeStream(of: [Record].self)
            let (demand, demandContinuation) = AsyncStream.makeStream(of: Void.self)
            let consumer = Task {
                do {
                    var iterator = observer.observe("items", Query(order: [SortKey("id")])).makeAsyncIterator()
                    for await _ in demand {
                        guard let value = try await iterator.next() else { break }
                        continuation.yield(value)
                    }
                    continuation.finish()
                } catch { continuation.finish(throwing: error) }
            }
            var values = Values(demand: demandContinuation, values: stream.makeAsyncIterator())
            #expect(try await Self.ids(&values) == ["r1"])
            try await body(store, observer, &values)
            demandContinuation.finish()
            consumer.cancel()
            await consumer.value
            try await store.close()
        }
    }
}

/// A real store whose next read can be held before or after it reads, until released.
final class HeldReadStore: LocalStore {
    enum Point: Sendable { case beforeSnapshot, afterSnapshot }

    struct Hold: Sendable {
        let point: Point
        /// Yields once the read is held.
        let reached: AsyncStream<Void>
        let reachedContinuation: AsyncStream<Void>.Continuation
        let released: AsyncStream<Void>
        /// Yield to let the read go on.
        let release: AsyncStream<Void>.Continuation
    }

    let inner: any LocalStore
    private let next = Mutex<Hold?>(nil)

    init(_ inner: any LocalStore) { self.inner = inner }

    /// Holds the next read at `point`.
    func holdNextRead(_ point: Point) -> Hold {
        let (reached, reachedContinuation) = AsyncStream.makeStream(of: Void.self)
        let (released, release) = AsyncStream.makeStream(of: Void.self)
        let hold = Hold(point: point, reached: reached, reachedContinuation: reachedContinuation, released: released, release: release)
        next.withLock { $0 = hold }
        return hold
    }

    func defineTable(_ schema: TableSchema) async throws { try await inner.defineTable(schema) }

    func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        let hold = next.withLock { hold in defer { hold = nil }; return hold }
        if hold?.point == .beforeSnapshot { await Self.wait(hold!) }
        let value = try await inner.read(body)
        if hold?.point == .afterSnapshot { await Self.wait(hold!) }
        return value
    }

    private static func wait(_ hold: Hold) async {
        hold.reachedContinuation.yield()
        _ = await hold.released.first { _ in true }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try await inner.write(body)
    }

    func close() async throws { try await inner.close() }
}
