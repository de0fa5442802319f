import ArgumentParser
import Foundation
import GRDB
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncGRDB
import OfflineSyncHTTP
import OfflineSyncServer
import Synchronization

/// `offline-sync demo-grdb` (`make demo-grdb`): two apps that keep their data in their own
/// GRDB databases — a phone and a laptop — sync through a live server (`serve`, as a child
/// process). Each app writes only with GRDB (a record, raw SQL) and watches its screen with a
/// GRDB `ValueObservation`; the other app's screen shows every change once it is pulled.
struct DemoGRDBCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-grdb",
        abstract: "Two GRDB apps sync their own tables through a live server; their GRDB observations update on each pull.")

    @Option(help: "Where to keep the files (default: a fresh temporary directory, removed afterwards).")
    var directory: String?

    func run() async throws {
        let keep = directory != nil
        let root = URL(fileURLWithPath: directory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("offline-sync-demo-grdb-\(UUID().uuidString)").path)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { if !keep { try? FileManager.default.removeItem(at: root) } }
        let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max)) }.joined()
        let server = try ServerProcess.start(data: root.appendingPathComponent("server"), secret: secret)
        let ok: Bool
        do {
            ok = try await GRDBDemo(root: root, baseURL: server.baseURL, secret: secret).run()
        } catch {
            _ = server.stop()
            throw error
        }
        print("\n== Stopping the server")
        let status = server.stop()
        print("   the server exited with status \(status)")
        if !ok || status != 0 { throw ExitCode.failure }
    }
}

/// The demo's two apps and its steps.
struct GRDBDemo {
    let root: URL
    let baseURL: String
    let secret: String

    /// The app's record: nothing about sync in it.
    struct Todo: Codable, FetchableRecord, PersistableRecord, Equatable {
        var id: String
        var title: String
        var done: Bool
    }

    static let schema = TableSchema("todo", fields: [FieldDefinition("title", .string), FieldDefinition("done", .bool)])

    /// The latest line an app's observation showed.
    final class Screen: Sendable {
        let shown = Mutex<String?>(nil)
    }

    /// One app: its own database with its own migration, a GRDB store on it, a started context.
    struct App {
        let name: String
        let database: DatabasePool
        let store: GRDBStore
        let context: SyncContext
        /// What the app's screen shows now: the latest value of its observation.
        let screen: Screen
        let watching: Task<Void, Never>
    }

    func open(_ name: String, token: String) async throws -> App {
        let database = try DatabasePool(path: root.appendingPathComponent("\(name).sqlite").path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "todo") { t in
                t.primaryKey("id", .text)
                t.column("title", .text).notNull()
                t.column("done", .boolean).notNull().defaults(to: false)
            }
        }
        try migrator.migrate(database)
        let store = try await GRDBStore(database)
        let remote = HTTPRemoteStore(baseURL: baseURL, token: { token })
        let context = try await SyncContext(store: store, remote: remote)
        try await context.defineTable(Self.schema)
        await context.start(tables: ["todo"], network: ManualNetworkMonitor(online: true))
        let screen = Screen()
        let observation = ValueObservation.tracking { db in try Todo.order(Column("title")).fetchAll(db) }.removeDuplicates()
        let watching = Task {
            do {
                for try await todos in observation.values(in: database) {
                    let shown = todos.map { "\($0.done ? "[x]" : "[ ]") \($0.title)" }.joined(separator: ", ")
                    print("   \(name)'s screen (a GRDB ValueObservation): \(shown.isEmpty ? "no todos" : shown)")
                    screen.shown.withLock { $0 = shown }
                }
            } catch {
                print("   \(name)'s observation failed: \(error)")
            }
        }
        return App(name: name, database: database, store: store, context: context, screen: screen, watching: watching)
    }

    /// Waits until `app`'s screen shows `expected`, 10 seconds at most (a demo may poll).
    func waitFor(_ expected: String, on app: App) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if app.screen.shown.withLock({ $0 }) == expected { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        print("   unexpected: \(app.name)'s screen never showed \"\(expected)\"")
        return false
    }

    func run() async throws -> Bool {
        print("OfflineSync GRDB demo: a sync server at \(baseURL), and two apps, phone and laptop, each keeping its")
        print("todos in its own GRDB database (its own migration, its own record type). Each writes only with GRDB;")
        print("the GRDB adapter captures the writes with triggers and syncs them.")
        let token = try await TokenAuthority(secret: Array(secret.utf8)).mint(identity: "demo-user")
        let phone = try await open("phone", token: token), laptop = try await open("laptop", token: token)
        guard await waitFor("", on: laptop), await waitFor("", on: phone) else { return false }

        print("\n== The phone inserts a GRDB record")
        let milk = Todo(id: UUID().uuidString, title: "Buy milk", done: false)
        try await phone.database.write { db in try milk.insert(db) }
        guard await waitFor("[ ] Buy milk", on: laptop) else { return false }

        print("\n== The phone marks it done with raw SQL")
        try await phone.database.write { db in try db.execute(sql: "UPDATE todo SET done = 1 WHERE id = ?", arguments: [milk.id]) }
        guard await waitFor("[x] Buy milk", on: laptop) else { return false }

        print("\n== The laptop adds one and deletes the milk, in one GRDB transaction")
        try await laptop.database.write { db in
            try Todo(id: UUID().uuidString, title: "Call the plumber", done: false).insert(db)
            _ = try Todo.deleteOne(db, key: milk.id)
        }
        guard await waitFor("[ ] Call the plumber", on: phone) else { return false }

        print("\n== Summary")
        var ok = true
        for app in [phone, laptop] {
            // A push's answer may land just after the other app has pulled what it sent.
            var queued = try await app.context.queuedOperationCount()
            let deadline = ContinuousClock.now + .seconds(10)
            while queued > 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
                queued = try await app.context.queuedOperationCount()
            }
            let rows = try await app.database.read { db in try Todo.fetchCount(db) }
            print("   \(app.name): \(rows) todo in its table, \(queued) operations queued")
            ok = ok && queued == 0 && rows == 1
            app.watching.cancel()
            try await app.context.close()
        }
        print(ok ? "   both apps agree, and nothing is left to send" : "   unexpected: the apps disagree")
        return ok
    }
}
