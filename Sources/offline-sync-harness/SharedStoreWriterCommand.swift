import ArgumentParser
import Foundation
import OfflineSync
import OfflineSyncCommandSupport

/// `offline-sync-harness shared-store-writer`: one of several processes writing one store file,
/// as an app and its extension do. The two-process observation tests run it, and kill it with
/// SIGKILL at any moment.
///
/// It opens the store, defines the table `notes`, prints `ready`, and waits for a line on
/// standard input (so every process has opened the store before any writes). Then it inserts
/// `<name>-0`, `<name>-1`, … one local transaction each (each queued for push in the same
/// transaction) and prints `wrote <id>` once the transaction has returned. With `--observe`
/// it also observes every row of `notes` and prints `seen total=<n> others=<m>` for each
/// value (`others`: rows another process wrote). After `--count` inserts it prints `done`
/// and, observing, waits until killed or until it has seen `--until-total` rows.
struct SharedStoreWriterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "shared-store-writer",
                                                    abstract: "Internal: a process writing a shared store.", shouldDisplay: false)

    @OptionGroup var storeArguments: StoreArguments
    @Option var name: String
    @Option var count: Int
    @Flag var observe = false
    /// With `--observe`: exits once the observation shows this many rows.
    @Option var untilTotal: Int?

    static let table = TableSchema("notes", fields: [FieldDefinition("writer", .string), FieldDefinition("n", .int)])

    func run() async throws {
        let (location, adapter) = try StoreRegistry.builtIn.resolve(try storeArguments.url())
        let store = try await adapter.open(location, try storeArguments.options(for: location))
        let context = try await SyncContext(store: store, remote: UnusedRemote(),
                                            options: SyncOptions(externalChangeInterval: .milliseconds(20)))
        try await context.defineTable(Self.table)
        Self.say("ready")
        _ = readLine()

        let prefix = name + "-", untilTotal = self.untilTotal
        let watcher = observe ? Task {
            for try await rows in context.table("notes").observe() {
                let others = rows.count { !$0.id.hasPrefix(prefix) }
                Self.say("seen total=\(rows.count) others=\(others)")
                if let untilTotal, rows.count >= untilTotal { return }
            }
        } : nil
        let name = self.name
        for i in 0..<count {
            let id = "\(name)-\(i)"
            _ = try await context.transaction { txn in
                try txn.insert(Record(id: id, fields: ["writer": .string(name), "n": .int(Int64(i))]), into: "notes")
            }
            Self.say("wrote \(id)")
        }
        Self.say("done")
        try await watcher?.value
        try await store.close()
    }

    /// Writes one line to standard output at once (a parent reads it while this runs).
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
