import ArgumentParser
import Foundation
import GRDB
import OfflineSync
import OfflineSyncGRDB

/// `offline-sync-harness grdb-extension-writer`: an app extension writing the app's GRDB
/// database while the app runs — the GRDB adapter's two-process test runs it.
///
/// It opens the database as a `DatabasePool` with a ``GRDBStore`` on it (the table `notes`
/// must exist: the app created it and defined it for sync), prints `ready` and waits for a
/// line on standard input. Then it inserts `<name>-0`, `<name>-1`, … by raw SQL, one GRDB
/// transaction each, printing `wrote <id>`. With `--observe` it also runs a GRDB
/// `ValueObservation` of the table, with the store relaying the other process's commits, and
/// prints `seen total=<n> others=<m>` for each value; it exits once it has seen
/// `--until-total` rows.
struct GRDBExtensionWriterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "grdb-extension-writer",
                                                    abstract: "Internal: an app extension writing the app's GRDB database.",
                                                    shouldDisplay: false)

    @Option var database: String
    @Option var name: String
    @Option var count: Int
    @Flag var observe = false
    @Option var untilTotal: Int?

    func run() async throws {
        // Two processes write the file: wait for the other's lock instead of failing at once
        // (GRDB's default), as GRDB's guide for shared databases says.
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        let pool = try DatabasePool(path: database, configuration: configuration)
        let store = try await GRDBStore(pool)
        SharedStoreWriterCommand.say("ready")
        _ = readLine()

        let prefix = name + "-", untilTotal = self.untilTotal
        let relay = Task { try await store.relayChangesFromOtherProcesses(every: .milliseconds(20)) }
        let watcher = observe ? Task {
            let rows = ValueObservation.tracking { db in try String.fetchAll(db, sql: "SELECT \"id\" FROM \"notes\"") }
                .removeDuplicates()
            for try await ids in rows.values(in: pool) {
                SharedStoreWriterCommand.say("seen total=\(ids.count) others=\(ids.count { !$0.hasPrefix(prefix) })")
                if let untilTotal, ids.count >= untilTotal { return }
            }
        } : nil
        for i in 0..<count {
            let id = "\(name)-\(i)", name = self.name
            try await pool.write { db in
                try db.execute(sql: "INSERT INTO \"notes\" (\"id\", \"writer\", \"n\") VALUES (?, ?, ?)", arguments: [id, name, i])
            }
            SharedStoreWriterCommand.say("wrote \(id)")
        }
        SharedStoreWriterCommand.say("done")
        try await watcher?.value
        relay.cancel()
        try await store.close()
    }
}
