import Foundation
@testable import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// A subscriber of a context's events that stops reading costs a bounded buffer: progress
/// coalesces, other events stop at the limit behind one `eventsDropped` marker.
@Suite("Events: bounded buffers per subscriber")
struct EventBufferTests {
    static func enqueued(_ n: Int) -> SyncEvent {
        .outboxMutationEnqueued(table: "notes", record: Record(id: "r\(n)", fields: [:]), kind: .insert)
    }

    static func drain(_ events: SyncEvents) async -> [SyncEvent] {
        var all: [SyncEvent] = []
        for await event in events { all.append(event) }
        return all
    }

    @Test("past the limit, new events are dropped behind one marker that counts them; reading resumes after it")
    func dropsBehindAMarker() async {
        let hub = SyncEventHub(limit: 10)
        let events = hub.subscribe()
        for n in 0..<25 { hub.publish(Self.enqueued(n)) }
        var iterator = events.makeAsyncIterator()
        var first: [SyncEvent] = []
        for _ in 0..<11 { first.append(await iterator.next()!) }
        #expect(first == (0..<10).map(Self.enqueued) + [.eventsDropped(count: 15)])
        // Room again: the next event is kept, after the marker.
        hub.publish(Self.enqueued(99))
        #expect(await iterator.next() == Self.enqueued(99))
        hub.finish()
        #expect(await iterator.next() == nil)
    }

    @Test("drops between progress events add to one marker: the buffer stays bounded however long the run")
    func dropsInterleavedWithProgress() async {
        let hub = SyncEventHub(limit: 10)
        let events = hub.subscribe()
        for n in 0..<10 { hub.publish(Self.enqueued(n)) }
        // Full: every other event is dropped, each between two progress events.
        for n in 10..<10_010 {
            hub.publish(.pullProgress(table: "a", done: n, total: 10_010))
            hub.publish(Self.enqueued(n))
        }
        hub.finish()
        let held = await Self.drain(events)
        let markers = held.filter(\.isDropMarker)
        #expect(markers == [.eventsDropped(count: 10_000)], "\(markers.count) markers")
        #expect(held.count <= 10 + 1 + EventQueue.coalescingWindow + 1, "\(held.count) events held")
        #expect(held.last == .pullProgress(table: "a", done: 10_009, total: 10_010))
        #expect(Array(held.prefix(10)) == (0..<10).map(Self.enqueued))
    }

    @Test("a subscriber that keeps up never coalesces; one far behind holds one progress event per table")
    func progressCoalesces() async {
        let hub = SyncEventHub(limit: 1_000)
        let behind = hub.subscribe()
        let few = hub.subscribe()
        for done in 1...3 { hub.publish(.pullProgress(table: "a", done: done, total: 3)) }
        hub.finish()
        // Three waiting events are below the coalescing window: each is kept.
        #expect(await Self.drain(few).count == 3)
        let held = await Self.drain(behind)
        #expect(held.count == 3)

        let hub2 = SyncEventHub(limit: 1_000)
        let slow = hub2.subscribe()
        for n in 0..<EventQueue.coalescingWindow { hub2.publish(Self.enqueued(n)) }
        for done in 1...100_000 {
            hub2.publish(.pullProgress(table: "a", done: done, total: 100_000))
            hub2.publish(.pullProgress(table: "b", done: done, total: 100_000))
        }
        hub2.publish(.pushProgress(done: 7, total: 7))
        hub2.finish()
        let kept = await Self.drain(slow)
        #expect(kept.count == EventQueue.coalescingWindow + 3)
        #expect(Array(kept.suffix(3)) == [.pullProgress(table: "a", done: 100_000, total: 100_000),
                                         .pullProgress(table: "b", done: 100_000, total: 100_000),
                                         .pushProgress(done: 7, total: 7)])
    }

    @Test("a context's subscriber that reads nothing through a long pull and a long push holds at most the limit")
    func contextSubscriberIsBounded() async throws {
        let h = try await Harness(options: SyncOptions(pushBatchSize: 50, pullPageSize: 50, eventBufferLimit: 100))
        let other = try await h.otherDevice()
        try await other.transaction { tx in
            for i in 0..<2_000 { try tx.insert(Record(id: "o\(i)", fields: ["n": .int(Int64(i))]), into: "notes") }
        }
        try await other.push()
        let idle = h.client.events()
        // A reader whose buffer has no practical limit: it hears everything, however late it runs.
        let reader = h.client.broadcaster.subscribe(limit: .max)
        let all = Task { await Self.drain(reader) }
        try await h.client.pull("notes")
        for start in stride(from: 0, to: 500, by: 50) {
            try await h.client.transaction { tx in
                for i in start..<start + 50 { try tx.insert(Record(id: "c\(i)", fields: ["n": .int(Int64(i))]), into: "notes") }
            }
        }
        try await h.client.push()
        h.client.finishEvents()
        let held = await Self.drain(idle)
        let everything = await all.value
        let counted = held.filter { $0.coalescingKey == nil && !$0.isDropMarker }
        #expect(counted.count == 100)
        #expect(counted == Array(everything.filter { $0.coalescingKey == nil }.prefix(100)), "the oldest events are the ones kept")
        let dropped = held.reduce(0) { if case .eventsDropped(let n) = $1 { $0 + n } else { $0 } }
        #expect(dropped == everything.filter { $0.coalescingKey == nil }.count - 100)
        // The last progress of each kind is still there, whatever was coalesced before it.
        #expect(held.contains(.pushProgress(done: 500, total: 500)))
        #expect(held.contains(.pullProgress(table: "notes", done: 2_000, total: 2_000)))
        #expect(held.count <= 100 + EventQueue.coalescingWindow + 2)
    }

    @Test("a subscriber's loop ends when its context is released without being closed", .timeLimit(.minutes(sanitizerSlowdown)))
    func releasedContextEndsItsStreams() async throws {
        var context: SyncContext? = try await SyncContext(store: InMemoryStore(), remote: OfflineSyncService(store: InMemoryStore()).remote(for: "u"))
        let events = try #require(context).events()
        let reader = Task { await Self.drain(events) }
        context = nil
        // The reader's loop ends. Were it to wait forever, the time limit cancels this
        // test, which cancels the reader, and the test fails.
        let seen = await withTaskCancellationHandler { await reader.value } onCancel: { reader.cancel() }
        #expect(!seen.contains { if case .eventsDropped = $0 { true } else { false } })
    }

    @Test("a cancelled reader ends its subscription, and the context stops buffering for it")
    func cancelledReaderEnds() async throws {
        let hub = SyncEventHub(limit: 10)
        let started = AsyncStream.makeStream(of: Void.self)
        let task = Task {
            var iterator = hub.subscribe().makeAsyncIterator()
            started.continuation.yield()
            return await iterator.next()
        }
        await started.stream.first { _ in true }
        task.cancel()
        #expect(await task.value == nil)
        #expect(hub.subscriptionCount == 0)
    }
}
