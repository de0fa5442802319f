import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// The shared conformance suite every ``LocalStore`` adapter runs.
///
/// It imports no test framework: it reports by returning results or throwing, so it runs
/// from Swift Testing, XCTest or a command-line tool. Each case gets its own fresh
/// temporary directory and store, which are closed and removed afterwards, even on failure.
///
/// ```swift
/// let suite = LocalStoreConformance(capabilities: .init(persistent: true)) { directory in
///     try await MyStore(directory: directory)
/// }
/// @Test func crud() async throws { try await suite.crud() }
/// ```
///
/// Groups whose cases need a capability the store lacks (``Capabilities/persistent``,
/// ``Capabilities/storeFile``) report those cases as skipped.
public struct LocalStoreConformance: ConformanceSuite {
    /// What the store under test can do beyond the ``LocalStore`` contract.
    public struct Capabilities: Sendable {
        /// Data survives `close()` and a later `makeStore` on the same directory.
        /// Enables the durability cases and the persistence checks of other groups.
        public var persistent: Bool
        /// For file-backed stores: the file the store keeps in a given directory. Enables the
        /// ``Group/corruptFiles`` group, which damages copies of that file.
        public var storeFile: (@Sendable (URL) -> URL)?

        /// Describes a store's capabilities.
        /// - Parameters:
        ///   - persistent: whether data survives close and reopen at the same directory.
        ///   - storeFile: maps a store directory to the store's main file, for file-backed stores.
        public init(persistent: Bool, storeFile: (@Sendable (URL) -> URL)? = nil) {
            self.persistent = persistent
            self.storeFile = storeFile
        }
    }

    /// The groups of cases, one per aspect of the contract.
    public enum Group: String, CaseIterable, Sendable {
        /// Every ``Value`` kind, nesting, edge value and system property round-trips exactly.
        case valueRoundTrip
        /// Define, upsert, get, replace, delete, and the typed errors of bad writes.
        case crud
        /// Query results equal ``QueryEvaluator`` on the same data (differential testing).
        case queries
        /// Atomic rollback, read-your-writes, returned values, escaped transactions.
        case transactions
        /// Concurrent read-modify-write loses nothing; readers never see half a transaction;
        /// a ``CommitOrderedStore``'s ranges, horizons and concurrent writers keep its contract.
        case concurrency
        /// Close and reopen keeps committed data only; a closed store throws `storeClosed`.
        case durability
        /// Odd and hostile table and field names are stored or refused with `invalidName`.
        case names
        /// Damaged store files open with a typed error and are left byte for byte unchanged.
        case corruptFiles
        /// `__`-prefixed tables, composite indexes, and a large batch.
        case systemTables
        /// Redefining a table migrates data without losing it, or fails changing nothing.
        case schemaEvolution
        /// Observed queries and records: first value, changes, nothing for unrelated or
        /// result-neutral commits, bursts coalesced, rollback unseen, cancellation.
        case observation
        /// Attachment files (``LocalStore/attachmentFiles``): bytes round-trip at any offset,
        /// cancelled and abandoned writes leave nothing, files survive reopening, a record
        /// and its attachment commit together, a damaged file is never served; the sweeps
        /// keep a file they cannot read and one waiting to upload, and a malformed reference
        /// hides no good one.
        case attachments
    }

    /// The store's capabilities.
    public let capabilities: Capabilities
    let makeStore: @Sendable (URL) async throws -> any LocalStore

    /// Creates the suite for a store.
    /// - Parameters:
    ///   - capabilities: what the store can do beyond the contract.
    ///   - makeStore: opens (or reopens) the store that lives in `directory`, an existing
    ///     directory that is empty the first time. The suite calls it again on the same
    ///     directory after `close()` to test persistence, and closes every store it opened.
    public init(capabilities: Capabilities,
                makeStore: @escaping @Sendable (_ directory: URL) async throws -> any LocalStore) {
        self.capabilities = capabilities
        self.makeStore = makeStore
    }

    /// The names of the cases of a group, in the order they run.
    public func caseNames(in group: Group) -> [String] {
        Self.cases(of: group).map(\.name)
    }

    /// Runs every case of a group, each in its own temporary directory with its own store.
    /// Never throws: failures and skips are in the results.
    public func run(_ group: Group) async -> [ConformanceCaseResult] {
        var results: [ConformanceCaseResult] = []
        for testCase in Self.cases(of: group) {
            results.append(await run(testCase, group: group))
        }
        return results
    }

    /// Runs one case of a group by name, or returns `nil` if the group has no such case.
    public func run(_ group: Group, case name: String) async -> ConformanceCaseResult? {
        guard let testCase = Self.cases(of: group).first(where: { $0.name == name }) else { return nil }
        return await run(testCase, group: group)
    }

    /// Runs ``Group/valueRoundTrip``. Throws ``ConformanceFailures`` listing every failed case.
    public func valueRoundTrip() async throws { try await check(.valueRoundTrip) }
    /// Runs ``Group/crud``. Throws ``ConformanceFailures`` listing every failed case.
    public func crud() async throws { try await check(.crud) }
    /// Runs ``Group/queries``. Throws ``ConformanceFailures`` listing every failed case.
    public func queries() async throws { try await check(.queries) }
    /// Runs ``Group/transactions``. Throws ``ConformanceFailures`` listing every failed case.
    public func transactions() async throws { try await check(.transactions) }
    /// Runs ``Group/concurrency``. Throws ``ConformanceFailures`` listing every failed case.
    public func concurrency() async throws { try await check(.concurrency) }
    /// Runs ``Group/durability``. Throws ``ConformanceFailures`` listing every failed case.
    public func durability() async throws { try await check(.durability) }
    /// Runs ``Group/names``. Throws ``ConformanceFailures`` listing every failed case.
    public func names() async throws { try await check(.names) }
    /// Runs ``Group/corruptFiles``. Throws ``ConformanceFailures`` listing every failed case.
    public func corruptFiles() async throws { try await check(.corruptFiles) }
    /// Runs ``Group/systemTables``. Throws ``ConformanceFailures`` listing every failed case.
    public func systemTables() async throws { try await check(.systemTables) }
    /// Runs ``Group/schemaEvolution``. Throws ``ConformanceFailures`` listing every failed case.
    public func schemaEvolution() async throws { try await check(.schemaEvolution) }
    /// Runs ``Group/attachments``. Throws ``ConformanceFailures`` listing every failed case.
    public func attachments() async throws { try await check(.attachments) }

    static func cases(of group: Group) -> [ConformanceCase] {
        switch group {
        case .valueRoundTrip: return valueRoundTripCases
        case .crud: return crudCases
        case .queries: return queryCases
        case .transactions: return transactionCases
        case .concurrency: return concurrencyCases + commitOrderCases
        case .durability: return durabilityCases
        case .names: return nameCases
        case .corruptFiles: return corruptFileCases
        case .systemTables: return systemTableCases
        case .schemaEvolution: return schemaEvolutionCases
        case .observation: return observationCases
        case .attachments: return attachmentCases + attachmentFaultCases
        }
    }
}
