import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// An app and its extension writing one store (issue 21, item 2): each process is
/// `offline-sync-harness shared-store-writer` or this test, each with its own SyncContext.
@Suite("Observations across processes")
struct SharedStoreProcessTests {
    /// The table `shared-store-writer` defines.
    static let table = TableSchema("notes", fields: [FieldDefinition("writer", .string), FieldDefinition("n", .int)])

    static func url(_ kind: String, in directory: URL) -> String {
        kind == "sqlite" ? "sqlite://\(directory.path)/app.db" : "lmdb://\(directory.path)/app-env"
    }

    static func open(_ url: String) async throws -> any LocalStore {
        var registry = StoreRegistry()
        registry.register(.sqlite)
        registry.register(.lmdb)
        return try await registry.open(url)
    }

    static func writer(_ url: String, name: String, count: Int, observe: Bool = false) throws -> HarnessChild {
        try HarnessChild(["shared-store-writer", "--store", url, "--name", name, "--count", String(count)] + (observe ? ["--observe"] : []))
    }

    /// Waits until every child printed `ready` (opened the store), then lets them all write.
    static func start(_ children: [HarnessChild]) async throws {
        for child in children {
            let ready = await eventually(timeout: .seconds(60)) { child.lines.contains("ready") || child.ended }
            try #require(ready && child.lines.contains("ready"), "the child did not open the store: \(child.lines)")
        }
        for child in children { child.send("go") }
    }

    /// The ids a child printed as committed.
    static func acknowledged(_ child: HarnessChild) -> [String] {
        child.lines.compactMap { $0.hasPrefix("wrote ") ? String($0.dropFirst(6)) : nil }
    }

    @Test("another process's commits reach this process's observation; every insert of both is queued once",
          arguments: ["sqlite", "lmdb"])
    func otherProcessReachesObservation(_ kind: String) async throws {
        try await withTemporaryDirectory { directory in
            let url = Self.url(kind, in: directory)
            let store = try await Self.open(url)
            let context = try await SyncContext(store: store, remote: NeverRemote(),
                                                options: SyncOptions(externalChangeInterval: .milliseconds(20)))
            try await context.defineTable(Self.table)
            let latest = Box<[Record]?>(nil)
            let values = Box(0)
            let observing = Task {
                for try await rows in context.table("notes").observe() {
                    latest.value = rows
                    values.withLock { $0 += 1 }
                }
            }
            #expect(await eventually { latest.value != nil })

            // The other process alone writes: only polling the store can wake this observation.
            let other = try Self.writer(url, name: "b", count: 100)
            try await Self.start([other])
            #expect(await eventually(timeout: .seconds(60)) { latest.value?.count == 100 })
            #expect(Set(latest.value?.map(\.id) ?? []) == Set((0..<100).map { "b-\($0)" }))
            try await offThePool { other.process.waitUntilExit() }
            #expect(other.process.terminationStatus == 0)
            // Coalesced: far fewer values than commits is allowed, more than one per commit is not.
            #expect(values.value <= 101)

            // Both write at once.
            let third = try Self.writer(url, name: "c", count: 100)
            try await Self.start([third])
            for i in 0..<100 {
                _ = try await context.transaction { txn in
                    try txn.insert(Record(id: "a-\(i)", fields: ["writer": "a", "n": .int(Int64(i))]), into: "notes")
                }
            }
            #expect(await eventually(timeout: .seconds(60)) { latest.value?.count == 300 })
            try await offThePool { third.process.waitUntilExit() }
            observing.cancel()

            let operations = try await context.queuedOperations()
            #expect(operations.count == 300)
            #expect(Set(operations.map(\.itemId)) == Set(["a", "b", "c"].flatMap { w in (0..<100).map { "\(w)-\($0)" } }))
            #expect(Set(operations.map(\.sequence)).count == 300)
            #expect(operations.allSatisfy { $0.kind == .insert && $0.table == "notes" })
            try await store.close()
        }
    }

    @Test("kill -9 of either writer mid-write loses no acknowledged insert and queues none twice",
          arguments: ["sqlite", "lmdb"])
    func killEitherProcessMidWrite(_ kind: String) async throws {
        try await withTemporaryDirectory { directory in
            let url = Self.url(kind, in: directory)
            // Created here first, so both children open an existing store.
            let created = try await Self.open(url)
            _ = try await SyncContext(store: created, remote: NeverRemote())
            try await created.close()

            let app = try Self.writer(url, name: "a", count: 1_000_000, observe: true)
            let widget = try Self.writer(url, name: "w", count: 1_000_000)
            try await Self.start([app, widget])
            // The app's observation shows the widget's rows while both write.
            let sawWidget = await eventually(timeout: .seconds(60)) {
                app.lines.contains { $0.hasPrefix("seen ") && !$0.hasSuffix(" others=0") }
            }
            #expect(sawWidget)
            #expect(await eventually(timeout: .seconds(60)) { Self.acknowledged(widget).count >= 40 })
            widget.kill()
            let widgetAcknowledged = Self.acknowledged(widget)
            // The app keeps writing and observing after the widget died holding (or not) the lock.
            let before = Self.acknowledged(app).count
            #expect(await eventually(timeout: .seconds(60)) { Self.acknowledged(app).count >= before + 40 })
            app.kill()
            let appAcknowledged = Self.acknowledged(app)

            let store = try await Self.open(url)
            let context = try await SyncContext(store: store, remote: NeverRemote())
            let rows = try await context.table("notes").query()
            let ids = Set(rows.map(\.id))
            // Nothing acknowledged is lost; at most the insert in flight at the kill was committed
            // without being acknowledged; each writer's rows are a gapless prefix.
            for (name, acknowledged) in [("a", appAcknowledged), ("w", widgetAcknowledged)] {
                let mine = rows.filter { $0.id.hasPrefix(name + "-") }
                #expect(Set(acknowledged).isSubset(of: ids), "\(name): an acknowledged insert was lost")
                #expect(mine.count == acknowledged.count || mine.count == acknowledged.count + 1)
                #expect(Set(mine.map(\.id)) == Set((0..<mine.count).map { "\(name)-\($0)" }))
            }
            // Each row is queued exactly once, and nothing else is.
            let operations = try await context.queuedOperations()
            #expect(operations.count == rows.count)
            #expect(Set(operations.map(\.itemId)) == ids)
            #expect(Set(operations.map(\.sequence)).count == operations.count)
            try await store.close()
        }
    }
}

/// The tests never sync: a call would be a bug.
struct NeverRemote: RemoteStore {
    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        throw SyncError(.unsupported, "this test does not push")
    }
    func pull(_ request: PullRequest) async throws -> PullPage {
        throw SyncError(.unsupported, "this test does not pull")
    }
}
