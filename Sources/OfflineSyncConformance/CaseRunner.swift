import Foundation
import OfflineSync

/// Runs one case of the remote and scenario suites in a fresh temporary directory, turning
/// its outcome into a result and removing the directory afterwards, even on failure.
func runIsolated(group: String, name: String,
                 _ body: @Sendable (URL) async throws -> Void) async -> ConformanceCaseResult {
    let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("offlinesync-conformance-\(UUID().uuidString)", isDirectory: true)
    var failure: ConformanceFailure?
    do {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try await body(root)
    } catch let error as ConformanceFailure {
        failure = error
    } catch {
        failure = ConformanceFailure("unexpected error: \(describe(error))", file: "", line: 0)
    }
    try? FileManager.default.removeItem(at: root)
    return ConformanceCaseResult(group: group, name: name, failure: failure?.located(group: group, testCase: name))
}

/// Throws every failure of `results` together, or returns when all passed or were skipped.
func throwFailures(_ results: [ConformanceCaseResult]) throws {
    let failures = results.compactMap(\.failure)
    if !failures.isEmpty { throw ConformanceFailures(failures) }
}

/// A remote backend under test: remotes for any number of identities over one shared state.
public struct ConformanceBackend: Sendable {
    /// Returns the remote as seen by `identity`.
    public let remote: @Sendable (_ identity: String) async throws -> any RemoteStore
    /// Releases the backend (closes its stores, stops its server).
    public let shutdown: @Sendable () async throws -> Void

    /// Describes a backend.
    public init(remote: @escaping @Sendable (_ identity: String) async throws -> any RemoteStore,
                shutdown: @escaping @Sendable () async throws -> Void) {
        self.remote = remote
        self.shutdown = shutdown
    }
}
