import ArgumentParser

/// The `offline-sync` command-line tool. Benchmarks and fault injection live in
/// `offline-sync-harness`.
@main
struct OfflineSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline-sync",
        abstract: "OfflineSync: offline-first sync for Swift apps.",
        subcommands: [DemoCommand.self, DemoGRDBCommand.self, ServeCommand.self, TokenCommand.self, ExplainCommand.self, ConformanceCommand.self,
                      InspectCommand.self]
    )
}
