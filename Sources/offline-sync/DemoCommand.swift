import ArgumentParser
import Foundation
import Synchronization
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncDatasets
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncServer

/// `offline-sync demo`: a sync server (this tool's `serve`, as a child process on a loopback
/// port, over a SQLite file, with sync rules) and clients with their own SQLite files talking
/// to it over HTTP; one works offline, both edit the same record, a policy resolves it, and
/// the other client hears of the changes through the server's notification channel. Then
/// datasets, and a list shared between two people under the rules.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "A live sync server, two offline-capable clients over HTTP, a conflict resolved by policy.")

    @Option(help: "Where to keep the SQLite files (default: a fresh temporary directory, removed afterwards).")
    var directory: String?

    @Option(help: "Conflict policy: serverWins, clientWins, lastWriterWins or fieldLevelMerge.")
    var policy: String = "fieldLevelMerge"

    func run() async throws {
        guard let policy = ConflictPolicy(rawValue: policy) else {
            throw ValidationError("unknown policy '\(self.policy)'; use one of \(ConflictPolicy.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let keep = directory != nil
        let root = URL(fileURLWithPath: directory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("offline-sync-demo-\(UUID().uuidString)").path)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { if !keep { try? FileManager.default.removeItem(at: root) } }
        let ok = try await Demo(root: root, policy: policy).run()
        if !ok { throw ExitCode.failure }
    }
}

/// A switchable network between a client and the service: the demo pulls the plug on it.
final class DemoNetwork: RemoteStore, Sendable {
    private let online = Mutex(true)
    let base: any RemoteStore
    init(_ base: any RemoteStore) { self.base = base }
    func setOnline(_ value: Bool) { online.withLock { $0 = value } }
    private func check() throws {
        if !online.withLock({ $0 }) { throw SyncError(.transient, "no network (the demo unplugged it)") }
    }
    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        try check()
        return try await base.push(operations)
    }
    func pull(_ request: PullRequest) async throws -> PullPage {
        try check()
        return try await base.pull(request)
    }
}

extension DemoNetwork: AttachmentRemote {
    private var files: any AttachmentRemote {
        get throws {
            guard let files = base as? any AttachmentRemote else { throw SyncError(.unsupported, "the demo's remote moves no files") }
            return files
        }
    }
    func attachmentUploadState(_ sha256: String) async throws -> AttachmentUploadState? {
        try check()
        return try await files.attachmentUploadState(sha256)
    }
    func appendAttachment(_ attachment: Attachment, offset: Int64, bytes: [UInt8], complete: Bool) async throws -> AttachmentUploadState {
        try check()
        return try await files.appendAttachment(attachment, offset: offset, bytes: bytes, complete: complete)
    }
    func readAttachment(_ sha256: String, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        try check()
        return try await files.readAttachment(sha256, from: offset, body)
    }
}

struct Demo {
    let root: URL
    let policy: ConflictPolicy
    static let todos = TableSchema("todos", fields: [
        FieldDefinition("title", .string), FieldDefinition("done", .bool),
        FieldDefinition("note", .string), FieldDefinition("due", .date),
    ])

    func say(_ text: String) { print(text) }
    func step(_ text: String) { print("\n== \(text)") }

    func show(_ who: String, _ context: SyncContext) async throws {
        for todo in try await context.table("todos").query() {
            let done = todo["done"].boolValue == true ? "x" : " "
            let note = todo["note"].stringValue.map { " — \($0)" } ?? ""
            say("   \(who) [\(done)] \(todo.id): \(todo["title"].stringValue ?? "")\(note)  (version \(todo.version ?? "none"))")
        }
        let pending = try await context.queuedOperationCount()
        say("   \(who) queue: \(pending) pending operation\(pending == 1 ? "" : "s")")
    }

    /// Prints a context's events as they come, each prefixed with the client's name.
    func watch(_ name: String, _ context: SyncContext) -> Task<Void, Never> {
        let stream = context.events()
        return Task {
            for await event in stream { print("   \(name) event: \(Demo.describe(event))") }
        }
    }

    static func describe(_ event: SyncEvent) -> String {
        switch event {
        case .networkStatus(let active): return "networkStatus(active: \(active))"
        case .subscriptionsEstablished: return "subscriptionsEstablished"
        case .syncQueriesStarted(let tables): return "syncQueriesStarted(\(tables.joined(separator: ", ")))"
        case .modelSynced(let m):
            return "modelSynced(\(m.table), \(m.isFullSync ? "full" : "delta"), added \(m.added), updated \(m.updated), deleted \(m.deleted), removed from view \(m.removedFromView))"
        case .syncQueriesReady: return "syncQueriesReady"
        case .ready: return "ready"
        case let .outboxMutationEnqueued(table, record, kind): return "outboxMutationEnqueued(\(table), \(kind.rawValue) \(record.id))"
        case let .outboxMutationProcessed(table, record, kind):
            return "outboxMutationProcessed(\(table), \(kind.rawValue) \(record.id), version \(record.version ?? "-"), deleted \(record.deleted))"
        case let .outboxMutationFailed(table, _, kind, error):
            return "outboxMutationFailed(\(table), \(kind.rawValue) \(error.itemId): \(error.message))"
        case .outboxStatus(let isEmpty): return "outboxStatus(isEmpty: \(isEmpty))"
        case let .pushProgress(done, total): return "pushProgress(\(done)/\(total))"
        case let .pullProgress(table, done, total): return "pullProgress(\(table) \(done)/\(total))"
        case let .conflictResolved(table, itemId, resolution): return "conflictResolved(\(table), \(itemId), \(resolution.name))"
        case let .removedFromView(table, ids): return "removedFromView(\(table), \(ids.count) rows)"
        case let .syncFailed(error, willRetry): return "syncFailed(\(error.code): \(error.message), \(willRetry ? "will retry" : "stopped"))"
        case .eventsDropped(let count): return "eventsDropped(\(count))"
        case let .attachmentProgress(sha256, direction, done, total):
            return "attachmentProgress(\(sha256.prefix(12))… \(direction.rawValue) \(done)/\(total))"
        }
    }

    /// Lets the event printers catch up before the next step's header.
    func settle() async { try? await Task.sleep(nanoseconds: 50_000_000) }

    func run() async throws -> Bool {
        let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max)) }.joined()
        let rules = root.appendingPathComponent("rules.yaml")
        try Demo.rulesDocument.write(to: rules, atomically: true, encoding: .utf8)
        let server = try ServerProcess.start(data: root.appendingPathComponent("server"), secret: secret,
                                             extraArguments: ["--rules", rules.path])
        do {
            let ok = try await run(server: server, secret: secret)
            say("\n== Stopping the server (SIGTERM: requests in flight finish first)")
            let status = server.stop()
            say("   the server exited with status \(status)")
            return ok && status == 0
        } catch {
            _ = server.stop()
            throw error
        }
    }

    /// The two demo clients: A behind a network it can cut, B listening to notifications.
    struct Clients {
        let a: SyncContext
        let b: SyncContext
        let networkA: DemoNetwork
        let remoteB: HTTPRemoteStore
        let storeA: SQLiteStore
        let storeB: SQLiteStore
        let token: String
    }

    func run(server: ServerProcess, secret: String) async throws -> Bool {
        say("OfflineSync demo: a sync server at \(server.baseURL) (offline-sync serve, on SQLite in \(root.path)/server)")
        say("and two clients, A and B, each with its own SQLite file, syncing over HTTP. Conflict policy: \(policy.rawValue).")
        let clients = try await makeClients(server: server, secret: secret)
        let watchers = [watch("A", clients.a), watch("B", clients.b)]
        guard let listener = await listen(clients.remoteB) else { return false }
        guard try await rowScenario(clients) else { return false }
        listener.cancel()
        let ok = try await summarize(clients)
        for watcher in watchers { watcher.cancel() }
        let shared = try await sharingScenario(server: server, secret: secret)
        step("Sharing summary")
        say("   shared lists behaved as the rules say: \(shared ? "yes" : "NO")")
        let status = try await statusScenario(server: server, secret: secret)
        let files = try await attachmentScenario(server: server, secret: secret)
        return ok && shared && status && files
    }

    /// Opens both clients' stores and sync contexts over HTTP, with one identity's token.
    func makeClients(server: ServerProcess, secret: String) async throws -> Clients {
        let tokens = try await TokenAuthority(secret: Array(secret.utf8))
        let token = try await tokens.mint(identity: "demo-user")
        let remoteA = HTTPRemoteStore(baseURL: server.baseURL, token: { token })
        let remoteB = HTTPRemoteStore(baseURL: server.baseURL, token: { token })
        let networkA = DemoNetwork(remoteA)
        let storeA = try await SQLiteStore(path: root.appendingPathComponent("client-a.sqlite").path)
        let storeB = try await SQLiteStore(path: root.appendingPathComponent("client-b.sqlite").path)
        let options = SyncOptions(conflictResolver: policy)
        let a = try await SyncContext(store: storeA, remote: networkA, options: options)
        let b = try await SyncContext(store: storeB, remote: remoteB, options: options)
        try await a.defineTable(Demo.todos)
        try await b.defineTable(Demo.todos)
        return Clients(a: a, b: b, networkA: networkA, remoteB: remoteB, storeA: storeA, storeB: storeB, token: token)
    }

    /// B listens to the server's change notifications for its identity and prints them;
    /// `nil` when the channel did not open.
    func listen(_ remoteB: HTTPRemoteStore) async -> Task<Void, Never>? {
        var notifications = remoteB.changes().makeAsyncIterator()
        guard await notifications.next() == .subscribed else {
            say("   unexpected: B's notification channel did not open")
            return nil
        }
        say("   B subscribed to the server's change notifications (WebSocket)")
        return Task {
            while let event = await notifications.next() {
                if case .changed(let table) = event { print("   B notified: '\(table)' changed on the server") }
            }
        }
    }

    /// Steps 1 to 6: todos created, synced, edited offline on A and concurrently on B, the
    /// conflict resolved by the policy. `false` when something unexpected happened.
    func rowScenario(_ clients: Clients) async throws -> Bool {
        let a = clients.a, b = clients.b, networkA = clients.networkA
        step("1. A creates three todos in one local transaction and syncs")
        let due = Timestamp(millisecondsSince1970: 1_790_000_000_000)
        try await a.transaction { tx in
            try tx.insert(Record(id: "todo-1", fields: ["title": "Buy milk", "done": false, "due": .date(due)]), into: "todos")
            try tx.insert(Record(id: "todo-2", fields: ["title": "Call the plumber", "done": false]), into: "todos")
            try tx.insert(Record(id: "todo-3", fields: ["title": "Book flights", "done": false]), into: "todos")
        }
        try await a.sync(["todos"])
        await settle()

        step("2. B syncs and receives them")
        try await b.sync(["todos"])
        await settle()
        try await show("B", b)

        step("3. A goes offline and keeps working")
        networkA.setOnline(false)
        try await a.table("todos").update(Record(id: "todo-1", fields: ["title": "Buy oat milk", "done": false, "due": .date(due)]))
        try await a.table("todos").update(Record(id: "todo-2", fields: ["title": "Call the plumber", "done": true]))
        try await a.table("todos").delete(id: "todo-3")
        do {
            try await a.push()
            say("   unexpected: the push succeeded while offline")
            return false
        } catch let error as SyncError {
            await settle()
            say("   A's push failed as expected (\(error.code)); its queue is kept")
        }
        try await show("A", a)

        step("4. Meanwhile B edits the same todo (todo-1) and pushes")
        try await b.table("todos").update(Record(id: "todo-1", fields: ["title": "Buy milk", "done": false, "due": .date(due),
                                                                    "note": "the blue carton"]))
        try await b.push()
        await settle()

        step("5. A comes back online and syncs: the conflict on todo-1 is resolved by \(policy.rawValue)")
        networkA.setOnline(true)
        let summary = try await a.push()
        await settle()
        say("   A pushed \(summary.sent) operations in \(summary.batches) batches: \(summary.applied) applied, \(summary.conflictsResolved) conflicts resolved, \(summary.failed) failed")
        try await a.sync(["todos"])
        await settle()

        step("6. B syncs again; both clients and the server now agree")
        try await b.sync(["todos"])
        await settle()
        try await show("A", a)
        try await show("B", b)

        return true
    }

    /// Compares A, B and the server, runs the dataset scenario, prints the summary and
    /// closes the stores; `true` when everything converged with no operation error.
    func summarize(_ clients: Clients) async throws -> Bool {
        let a = clients.a, b = clients.b
        let recordsA = try await a.table("todos").query()
        let recordsB = try await b.table("todos").query()
        let server = try await clients.remoteB.pull(PullRequest(table: "todos", limit: 100))
            .records.filter { !$0.deleted }.sorted { $0.id < $1.id }
        let datasetsConverged = try await datasetScenario(baseURL: clients.remoteB.baseURL, token: clients.token,
                                                          storeA: clients.storeA, storeB: clients.storeB)
        let converged = recordsA == recordsB && recordsA == server
        let errors = try await a.operationErrors().count + b.operationErrors().count
        a.finishEvents()
        b.finishEvents()

        step("Summary")
        say("   conflict policy:      \(policy.rawValue)")
        say("   todo-1 at the end:    \(recordsA.first { $0.id == "todo-1" }.map { "\($0["title"].stringValue ?? ""), note: \($0["note"].stringValue ?? "none")" } ?? "missing")")
        say("   records on A / B / server: \(recordsA.count) / \(recordsB.count) / \(server.count)")
        say("   pending operations:   \(try await a.queuedOperationCount() + b.queuedOperationCount()); operation errors: \(errors)")
        say("   converged:            \(converged ? "yes" : "NO")")
        say("   datasets converged:   \(datasetsConverged ? "yes" : "NO")")
        try await clients.storeA.close()
        try await clients.storeB.close()
        return converged && errors == 0 && datasetsConverged
    }

    /// Datasets, Cognito Sync style, through the server's Cognito Sync API: two devices of one
    /// identity, a conflict resolved per key, and a push notification that makes the second
    /// device synchronize by itself.
    func datasetScenario(baseURL: String, token: String, storeA: SQLiteStore, storeB: SQLiteStore) async throws -> Bool {
        let pool = "demo-pool:0001", identity = "demo-user"
        let httpA = HTTPRemoteStore(baseURL: baseURL, token: { token })
        let httpB = HTTPRemoteStore(baseURL: baseURL, token: { token })
        let phone = try await DatasetManager(store: storeA, identity: identity,
                                             remote: HTTPDatasetRemote(httpA, identityPoolId: pool, identityId: identity))
        let tablet = try await DatasetManager(store: storeB, identity: identity,
                                              remote: HTTPDatasetRemote(httpB, identityPoolId: pool, identityId: identity))

        step("7. Datasets: the phone (A) writes 'settings' and synchronizes; the tablet (B) synchronizes and subscribes to push sync")
        let onPhone = try await phone.openOrCreateDataset("settings")
        try await onPhone.putAll(["theme": "dark", "font": "12pt", "lang": "en"])
        try await onPhone.synchronize()
        let onTablet = try await tablet.openOrCreateDataset("settings")
        let received = try await onTablet.synchronize()
        say("   tablet received: \(received.map { "\($0.key)=\($0.value ?? "-")" }.joined(separator: ", "))")
        let device = try await tablet.registerDevice(platform: .webSocket, token: "demo-tablet")
        try await tablet.subscribe("settings")
        say("   tablet registered device \(device.prefix(8))… (platform WEBSOCKET) and subscribed to 'settings'")
        let events = httpB.changes(device: device)
        let (notifications, forward) = AsyncStream.makeStream(of: DatasetNotification.self)
        let (opened, openedContinuation) = AsyncStream.makeStream(of: Void.self)
        let relay = Task {
            for await event in events {
                switch event {
                case .subscribed: openedContinuation.yield()
                case .dataset(let notice):
                    print("   tablet notified: '\(notice.datasetName)' is at sync count \(notice.syncCount) on the server")
                    forward.yield(notice)
                default: continue
                }
            }
        }
        for await _ in opened { break }
        let (synced, syncedContinuation) = AsyncStream.makeStream(of: [DatasetRecord].self)
        let pushSync = tablet.startPushSync(notifications, callbacks: DatasetSyncCallbacks(
            onConflict: { _, conflicts in
                conflicts.map { conflict in
                    let keep = conflict.key == "theme" ? conflict.resolveWithLocal() : conflict.resolveWithRemote()
                    print("   tablet conflict on '\(conflict.key)': local \(conflict.local.value ?? "-"), remote \(conflict.remote.value ?? "-") -> keeps \(keep.value ?? "-") (\(keep.isRemote ? "remote" : "local"))")
                    return keep
                }
            },
            onSuccess: { _, records in syncedContinuation.yield(records) }))

        step("8. The tablet edits theme and font offline; the phone edits them too and synchronizes")
        try await onTablet.putAll(["theme": "solarized", "font": "16pt"])
        try await onPhone.putAll(["theme": "light", "font": "14pt"])
        try await onPhone.synchronize()
        say("   phone synchronized; the server notifies the tablet, which synchronizes by itself:")
        var iterator = synced.makeAsyncIterator()
        let updated = await iterator.next() ?? []
        say("   tablet's automatic synchronize took in: \(updated.map { "\($0.key)=\($0.value ?? "-")" }.joined(separator: ", "))")
        try await onPhone.synchronize()
        let phoneValues = try await onPhone.getAll()
        let tabletValues = try await onTablet.getAll()
        say("   phone:  \(phoneValues.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", "))")
        say("   tablet: \(tabletValues.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", "))")
        pushSync.cancel()
        relay.cancel()
        forward.finish()
        return phoneValues == tabletValues && phoneValues == ["theme": "solarized", "font": "14pt", "lang": "en"]
    }
}
