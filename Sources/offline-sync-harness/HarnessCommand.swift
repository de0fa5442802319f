import ArgumentParser

/// `offline-sync-harness`: the benchmark and fault-injection harness, kept apart from the
/// operator's `offline-sync` tool. `make bench`, `make loadtest`, `make corrupt-sweep`,
/// `make crash-trials` and `make soak` drive it; its child processes (`bench-worker`, `corrupt-probe`) are this
/// executable again, and the servers it measures are the `offline-sync` built beside it.
@main
struct HarnessCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline-sync-harness",
        abstract: "OfflineSync's benchmarks, load test, corrupt-store sweeps, crash-trial client and GRDB extension writer.",
        subcommands: [BenchCommand.self, BenchWorkerCommand.self, CrashTrialClientCommand.self,
                      CorruptSweepCommand.self, CorruptProbeCommand.self, SharedStoreWriterCommand.self, LoadtestCommand.self,
                      AttachmentUploadChildCommand.self, GRDBExtensionWriterCommand.self]
    )
}
