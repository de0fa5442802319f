import ArgumentParser
import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncConformance
import OfflineSyncPostgreSQL
import OfflineSyncSQLite

/// `offline-sync conformance --store URL`: the LocalStore conformance suite against any
/// registered adapter, one line per case and per group.
struct ConformanceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conformance",
        abstract: "Run the LocalStore conformance suite against a store URL's adapter.",
        discussion: """
            Each case opens a fresh store of the URL's kind in a temporary directory of its own \
            (the URL's file or directory name is kept, its location is not used). Prints one line \
            per case and per group; exits with status 1 if any case fails. The suite opens stores \
            hundreds of times, and a passphrase-protected store derives its key on each open: for a \
            quick run use a raw key (key-env=) or a cheaper derivation for the test stores \
            (encrypted-file: kdf-cost=10, or kdf=pbkdf2&iterations=1000).
            """)

    @OptionGroup var storeArguments: StoreArguments
    @Option(name: .customLong("group"), help: "Only these groups (repeatable); all by default.")
    var groups: [String] = []

    func run() async throws {
        let registry = StoreRegistry.builtIn
        let (location, _) = try registry.resolve(try storeArguments.url())
        let suite = try LocalStoreConformance(store: try storeArguments.url(), in: registry,
                                              options: try storeArguments.options(for: location))
        var selected = LocalStoreConformance.Group.allCases
        if !groups.isEmpty {
            selected = try groups.map { name in
                guard let group = LocalStoreConformance.Group(rawValue: name) else {
                    throw ValidationError("unknown group \(name); groups: \(LocalStoreConformance.Group.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                return group
            }
        }
        print("conformance of \(location) (persistent: \(suite.capabilities.persistent), store file: \(suite.capabilities.storeFile == nil ? "no" : "yes"))")
        var totals = (passed: 0, failed: 0, skipped: 0)
        for group in selected {
            let started = DispatchTime.now().uptimeNanoseconds
            let results = await suite.run(group)
            for result in results { print("  \(result)") }
            let passed = results.filter(\.passed).count, failed = results.filter { $0.failure != nil }.count
            let skipped = results.filter(\.skipped).count
            totals.passed += passed; totals.failed += failed; totals.skipped += skipped
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            print("\(failed == 0 ? "PASS" : "FAIL") group \(group.rawValue): \(passed) passed, \(failed) failed, \(skipped) skipped (\(String(format: "%.1f", seconds)) s)")
        }
        print("\(totals.failed == 0 ? "PASS" : "FAIL"): \(totals.passed) passed, \(totals.failed) failed, \(totals.skipped) skipped in \(selected.count) groups")
        if totals.failed > 0 { throw ExitCode(1) }
    }
}

/// `offline-sync inspect --store URL`: tables, queue, errors and cursors of a local store.
struct InspectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show a local store's tables with row counts, pending operations, operation errors and pull cursors.")

    @OptionGroup var storeArguments: StoreArguments
    @Flag(help: "Print JSON for scripts.") var json = false
    @Option(help: "How many operations and errors to list.") var limit = 20

    func run() async throws {
        let registry = StoreRegistry.builtIn
        let (location, adapter) = try registry.resolve(try storeArguments.url())
        // Inspecting never creates a store.
        var options = try storeArguments.options(for: location)
        options.createIfMissing = false
        let store = try await adapter.open(location, options)
        let summary: StoreSummary
        do {
            summary = try await StoreSummary.summarize(store, operationLimit: limit)
            try await store.close()
        } catch {
            try? await store.close()
            throw error
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(summary), as: UTF8.self))
        } else {
            print(InspectCommand.render(summary, location: location))
        }
    }

    static func render(_ summary: StoreSummary, location: StoreLocation) -> String {
        var lines = ["store \(location)", "", "tables:"]
        let width = max(5, summary.tables.map { $0.name.count }.max() ?? 0)
        for table in summary.tables {
            let name = table.name.padding(toLength: width, withPad: " ", startingAt: 0)
            lines.append("  \(name)  \(String(table.rows).leftPadded(10)) rows  \(table.declaredFields) declared fields\(table.isSystem ? "  (system)" : "")")
        }
        if summary.tables.isEmpty { lines.append("  (none)") }
        let states = summary.operationsByState.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        lines += ["", "operations: \(summary.operationCount)\(states.isEmpty ? "" : " (\(states))")"]
        for op in summary.operations {
            lines.append("  #\(op.sequence)  \(op.kind) \(op.table)/\(op.itemId)  \(op.state), \(op.attempts) attempts, queued \(Timestamp(millisecondsSince1970: op.createdAt))")
        }
        if summary.operations.count < summary.operationCount { lines.append("  … \(summary.operationCount - summary.operations.count) more") }
        lines += ["", "operation errors: \(summary.operationErrorCount)"]
        for error in summary.operationErrors {
            lines.append("  \(error.kind) \(error.table)/\(error.itemId)  status \(error.status.map(String.init) ?? "-"): \(error.message)")
        }
        if summary.operationErrors.count < summary.operationErrorCount { lines.append("  … \(summary.operationErrorCount - summary.operationErrors.count) more") }
        lines += ["", "pull cursors: \(summary.cursors.count)"]
        for cursor in summary.cursors { lines.append("  \(cursor.table)  query \(cursor.queryId)  cursor \(cursor.cursor)") }
        return lines.joined(separator: "\n")
    }
}

extension String {
    fileprivate func leftPadded(_ length: Int) -> String {
        count >= length ? self : String(repeating: " ", count: length - count) + self
    }
}
