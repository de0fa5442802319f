import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncSQLite
import OfflineSyncServer
import Synchronization

// The status scene: a third device, as its status bar sees it — offline with a change
// waiting, uploading and synced once the network returns, an authentication failure that
// halts background sync, and the recovery after the app signs in again and calls `start`.

extension Demo {
    /// What a status bar would say.
    static func statusLine(_ status: SyncStatus) -> String {
        if let failure = status.lastError {
            switch failure.kind {
            case .authentication: return "signed out: \(failure.error.message) (background sync \(status.backgroundSync))"
            case .store: return "storage problem: \(failure.error.message)"
            case .transient, .rejected, .cancelled:
                if !status.connected { return "offline (\(failure.willRetry ? "will retry" : "stopped"))" }
            }
        }
        if status.uploading { return "uploading" }
        if status.downloading { return "downloading" }
        if !status.connected { return "offline" }
        return status.hasSynced ? "synced" : "connected, not synced yet"
    }

    /// Waits up to 20 s for a status that meets `condition`.
    static func waitForStatus(_ context: SyncContext, _ condition: @escaping @Sendable (SyncStatus) -> Bool) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await status in context.observeStatus() where condition(status) { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    func statusScenario(server: ServerProcess, secret: String) async throws -> Bool {
        step("Sync status: device C, as its status bar sees it")
        let tokens = try await TokenAuthority(secret: Array(secret.utf8))
        let good = try await tokens.mint(identity: "demo-status")
        let current = Mutex(good)
        let remote = HTTPRemoteStore(baseURL: server.baseURL, token: { current.withLock { $0 } })
        let store = try await SQLiteStore(path: root.appendingPathComponent("client-c.sqlite").path)
        let context = try await SyncContext(store: store, remote: remote)
        try await context.defineTable(Demo.todos)
        let printer = Task {
            var last = ""
            for await status in context.observeStatus() {
                let line = Demo.statusLine(status)
                if line != last { print("   C status: \(line)") }
                last = line
            }
        }
        defer { printer.cancel() }
        let network = ManualNetworkMonitor(online: false)
        var ok = true

        say("   C starts background sync with its network down, and writes a todo")
        await context.start(tables: ["todos"], network: network)
        _ = try await context.table("todos").insert(Record(id: "c-1", fields: ["title": "written offline on C", "done": false]))
        ok = await Demo.waitForStatus(context) { !$0.connected } && ok
        await settle()

        say("   the network returns: C uploads its change and pulls")
        network.set(online: true)
        ok = await Demo.waitForStatus(context) { $0.hasSynced && !$0.uploading && !$0.downloading && $0.lastError == nil } && ok
        ok = try await context.queuedOperationCount() == 0 && ok
        await settle()

        say("   C's token is replaced by one the server refuses (as when a session is revoked), and C writes again")
        current.withLock { $0 = "not-a-valid-token" }
        _ = try await context.table("todos").insert(Record(id: "c-2", fields: ["title": "written while signed out", "done": false]))
        ok = await Demo.waitForStatus(context) { $0.backgroundSync == .halted && $0.lastError?.kind == .authentication } && ok
        say("   pending operations kept: \(try await context.queuedOperationCount())")
        await settle()

        say("   C signs in again and calls start: the kept change is pushed")
        current.withLock { $0 = good }
        await context.start(tables: ["todos"], network: network)
        ok = await Demo.waitForStatus(context) { $0.backgroundSync == .running && $0.lastError == nil && !$0.uploading && !$0.downloading } && ok
        let pending = try await context.queuedOperationCount()
        say("   pending operations: \(pending)")
        ok = pending == 0 && ok
        await settle()
        try await context.close()
        say("   the status went offline → uploading → synced → signed out (halted) → synced: \(ok ? "yes" : "NO")")
        return ok
    }
}
