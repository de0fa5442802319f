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

/// What the three suites share: groups of cases, run one group or all of them.
public protocol ConformanceSuite: Sendable {
    /// The suite's groups.
    associatedtype Group: CaseIterable & Sendable where Group.AllCases == [Group]
    /// Runs every case of a group. Never throws: failures and skips are in the results.
    func run(_ group: Group) async -> [ConformanceCaseResult]
}

extension ConformanceSuite {
    /// Runs every group, in declaration order. Never throws.
    public func runAll() async -> [ConformanceCaseResult] {
        var results: [ConformanceCaseResult] = []
        for group in Group.allCases { results += await run(group) }
        return results
    }

    /// Runs a group and throws ``ConformanceFailures`` listing every failed case.
    public func check(_ group: Group) async throws { try throwFailures(await run(group)) }

    /// Runs every group and throws ``ConformanceFailures`` listing every failed case.
    public func all() async throws { try throwFailures(await runAll()) }
}

/// Runs each case in its own temporary directory with a fixture made for it there, and
/// tears the fixture down afterwards, even when the case fails. A teardown error after a
/// passing case is a failure.
func runWithFixture<Fixture>(
    group: String, _ cases: [(name: String, body: @Sendable (Fixture) async throws -> Void)],
    setUp: @escaping @Sendable (URL) async throws -> Fixture,
    tearDown: @escaping @Sendable (Fixture) async throws -> Void
) async -> [ConformanceCaseResult] {
    var results: [ConformanceCaseResult] = []
    for (name, body) in cases {
        results.append(await runIsolated(group: group, name: name) { directory in
            let fixture = try await setUp(directory)
            do {
                try await body(fixture)
            } catch {
                try? await tearDown(fixture)
                throw error
            }
            try await must(await tearDown(fixture), "tearing down after the case")
        })
    }
    return results
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
