import Foundation
import Observation
import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import OfflineSyncTestSupport
import Testing

/// Every value an observation yields, in order: a task keeps iterating it and forwards each
/// value, so a change that showed twice (or showed a half-applied state) is in the stream.
private func forwarded<Element: Sendable>(_ observed: ObservedValue<Element>) -> (AsyncStream<Element>, Task<Void, any Error>) {
    let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
    let task = Task {
        defer { continuation.finish() }
        for try await value in observed { continuation.yield(value) }
    }
    return (stream, task)
}

private func titles(_ records: [Record]?) -> [String] {
    guard let records else { return ["<ended>"] }
    return records.map { record in
        if case .string(let title) = record["title"] { return "\(record.id):\(title)" }
        return "\(record.id):?"
    }
}

@Suite("Observations under sync: pulled pages, conflict resolutions, purges, move-outs")
struct ObservationSyncTests {
    @Test("a pulled page, a conflict resolution, a purge and a move-out each show exactly once")
    func syncChangesShowOnce() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore(), rules: sharedListsRules(ownerReadsMembers: false))
        let alice = try await SharedDataTests.client(service, "alice"), bob = try await SharedDataTests.client(service, "bob")
        _ = try await alice.table("lists").insert(Record(id: "L1", fields: ["name": "groceries"]))
        for member in ["alice", "bob"] {
            _ = try await alice.table("list_members").insert(Record(id: "m-\(member)", fields: ["list_id": "L1", "user_id": .string(member)]))
        }
        _ = try await alice.table("todos").insert(Record(id: "t1", fields: ["list_id": "L1", "title": "milk"]))
        _ = try await alice.table("todos").insert(Record(id: "t2", fields: ["list_id": "L1", "title": "eggs"]))
        try await sharedListsSync(alice)

        let (stream, task) = forwarded(bob.table("todos").observe(Query(order: [SortKey(SystemField.id)])))
        defer { task.cancel() }
        var values = stream.makeAsyncIterator()
        #expect(titles(await values.next()) == [])

        try await sharedListsSync(bob)
        #expect(titles(await values.next()) == ["t1:milk", "t2:eggs"], "the pulled page, once")

        _ = try await bob.table("todos").update(Record(id: "t1", fields: ["list_id": "L1", "title": "bob's milk"]))
        #expect(titles(await values.next()) == ["t1:bob's milk", "t2:eggs"], "the local edit")
        _ = try await alice.table("todos").update(Record(id: "t1", fields: ["list_id": "L1", "title": "alice's milk"]))
        try await sharedListsSync(alice)
        let pushed = try await bob.push()
        #expect(pushed.conflictsResolved == 1)
        #expect(titles(await values.next()) == ["t1:alice's milk", "t2:eggs"], "the conflict resolution (server wins), once")

        try await bob.purge("todos", query: Query(Field("title") == "eggs"))
        #expect(titles(await values.next()) == ["t1:alice's milk"], "the purge, once")
        try await sharedListsSync(bob)
        #expect(titles(await values.next()) == ["t1:alice's milk", "t2:eggs"], "the purged row pulled again, once")

        try await alice.table("list_members").delete(id: "m-bob")
        try await sharedListsSync(alice)
        try await sharedListsSync(bob)
        #expect(titles(await values.next()) == [], "the move-out, once")

        // A last, local write: had any step above shown twice, this would not be next.
        _ = try await bob.table("todos").insert(Record(id: "t9", fields: ["list_id": "L9", "title": "marker"]))
        #expect(titles(await values.next()) == ["t9:marker"])
    }

    @Test("sync status: isSynced after a complete pull, not while a change is queued, not after a purge")
    func syncStatus() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let client = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: "u"))
        try await client.defineTable(TableSchema("notes", fields: [FieldDefinition("title", .string)]))
        let notes = client.table("notes")
        let (statuses, statusTask) = forwarded(notes.observeSyncStatus())
        let (outbox, outboxTask) = forwarded(client.observeOutbox())
        defer { statusTask.cancel(); outboxTask.cancel() }
        var status = statuses.makeAsyncIterator(), queue = outbox.makeAsyncIterator()

        var first = await status.next()
        #expect(first?.isSynced == false && first?.lastPulledAt == nil, "never pulled")
        #expect(await queue.next()?.isEmpty == true)
        try await notes.pull(queryId: "all")
        first = await status.next()
        #expect(first?.isSynced == true && first?.lastPulledAt != nil, "pulled to the end")

        _ = try await notes.insert(Record(id: "n1", fields: ["title": "a"]))
        let queued = await status.next()
        #expect(queued?.pending == 1 && queued?.isSynced == false, "a queued change")
        #expect(await queue.next() == OutboxStatus(pending: 1, failed: 0))
        _ = try await client.push()
        #expect(await status.next()?.isSynced == true, "pushed")
        #expect(await queue.next()?.isEmpty == true)

        try await notes.purge()
        let purged = await status.next()
        #expect(purged?.isSynced == false && purged?.lastPulledAt == nil, "a purge forgets the pull")
    }

    @Test("LiveValue keeps a query's latest result for the main actor, observably")
    @MainActor
    func liveValue() async throws {
        let client = try await SyncContext(store: InMemoryStore(), remote: OfflineSyncService(store: InMemoryStore()).remote(for: "u"))
        try await client.defineTable(TableSchema("notes", fields: [FieldDefinition("title", .string)]))
        let live = LiveValue(client.table("notes").observe(), initial: [])
        try await Self.changed(live) { live.isLoaded }
        #expect(live.value.isEmpty)
        _ = try await client.table("notes").insert(Record(id: "n1", fields: ["title": "a"]))
        try await Self.changed(live) { live.value.count == 1 }
        #expect(titles(live.value) == ["n1:a"])
        live.stop()
    }

    @Test("LiveValue changes its query in place: the new query's rows replace the old ones, and the old one is not heard again")
    @MainActor
    func liveValueChangesQuery() async throws {
        let client = try await SyncContext(store: InMemoryStore(), remote: OfflineSyncService(store: InMemoryStore()).remote(for: "u"))
        try await client.defineTable(TableSchema("notes", fields: [FieldDefinition("title", .string)]))
        let notes = client.table("notes")
        _ = try await notes.insert(Record(id: "n1", fields: ["title": "a"]))
        _ = try await notes.insert(Record(id: "n2", fields: ["title": "b"]))
        let live = LiveValue(notes.observe(Query(Field("title") == "a")), initial: [])
        try await Self.changed(live) { live.isLoaded }
        #expect(titles(live.value) == ["n1:a"])
        live.observe(notes.observe(Query(Field("title") == "b")))
        #expect(!live.isLoaded, "not loaded until the new query's first value")
        try await Self.changed(live) { live.isLoaded }
        #expect(titles(live.value) == ["n2:b"])
        // A row only the old query shows, then one the new query shows: the value changes once,
        // to the second, since the old observation is gone.
        _ = try await notes.insert(Record(id: "n3", fields: ["title": "a"]))
        _ = try await notes.insert(Record(id: "n4", fields: ["title": "b"]))
        try await Self.changed(live) { live.value.count == 2 }
        #expect(titles(live.value) == ["n2:b", "n4:b"])
        #expect(client.observer.observationCount == 1)
        live.stop()
    }

    /// Waits, on `withObservationTracking`'s change signal, until `done` holds.
    @MainActor
    static func changed(_ live: LiveValue<[Record]>, until done: @MainActor () -> Bool) async throws {
        while !done() {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                withObservationTracking {
                    _ = live.value
                    _ = live.isLoaded
                } onChange: {
                    continuation.resume()
                }
            }
        }
    }
}
