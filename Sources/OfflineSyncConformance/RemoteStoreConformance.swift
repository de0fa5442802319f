import Foundation
import OfflineSync
import OfflineSyncStoreKit

/// The shared suite for a remote: what any ``RemoteStore`` (the in-process service, an
/// HTTP client against a server) must do, checked through the protocol alone.
///
/// ```swift
/// let suite = RemoteStoreConformance { directory in
///     let service = try await OfflineSyncService(store: InMemoryStore())
///     return ConformanceBackend(remote: { service.remote(for: try Identity($0)) }, shutdown: {})
/// }
/// @Test func conflicts() async throws { try await suite.conflicts() }
/// ```
public struct RemoteStoreConformance: ConformanceSuite {
    /// The groups of cases.
    public enum Group: String, CaseIterable, Sendable {
        /// Applied and rejected outcomes, one per operation, in order.
        case pushOutcomes
        /// Stale base versions and duplicate inserts are conflicts carrying the current record.
        case conflicts
        /// A replayed operation id gets its first outcome: no second application, no false conflict.
        case idempotentReplay
        /// Cursor pages in commit order with exact remaining counts.
        case cursorPulls
        /// A puller beside concurrent writers never skips a committed change.
        case concurrentWriters
        /// Deletes leave tombstones every puller receives.
        case tombstones
        /// No identity reads or changes another's rows.
        case identityIsolation
        /// Under the shared-lists rules (``RemoteStoreConformance/sharedListsRules``): move-in,
        /// move-out, overlapping memberships, refused writes, no leaks.
        case sharedRules
    }

    let makeBackend: @Sendable (URL) async throws -> ConformanceBackend
    let makeSharedListsBackend: (@Sendable (URL) async throws -> ConformanceBackend)?

    /// Creates the suite. `makeBackend` builds a fresh, empty backend in the given directory
    /// for each case; `makeSharedListsBackend` one that serves ``sharedListsRules``, for the
    /// ``Group/sharedRules`` cases (without it, those cases fail: a backend must share data).
    public init(makeBackend: @escaping @Sendable (_ directory: URL) async throws -> ConformanceBackend,
                makeSharedListsBackend: (@Sendable (_ directory: URL) async throws -> ConformanceBackend)? = nil) {
        self.makeBackend = makeBackend
        self.makeSharedListsBackend = makeSharedListsBackend
    }

    /// Runs every case of a group.
    public func run(_ group: Group) async -> [ConformanceCaseResult] {
        let makeBackend = makeBackend, makeShared = makeSharedListsBackend
        return await runWithFixture(group: group.rawValue, Self.cases(of: group), setUp: { directory in
            guard group == .sharedRules else { return try await must(await makeBackend(directory), "making the backend") }
            guard let makeShared else {
                throw failure("no backend under the shared-lists rules: pass makeSharedListsBackend to RemoteStoreConformance")
            }
            return try await must(await makeShared(directory), "making the shared-lists backend")
        }, tearDown: { try await $0.shutdown() })
    }

    /// ``Group/pushOutcomes``
    public func pushOutcomes() async throws { try await check(.pushOutcomes) }
    /// ``Group/conflicts``
    public func conflicts() async throws { try await check(.conflicts) }
    /// ``Group/idempotentReplay``
    public func idempotentReplay() async throws { try await check(.idempotentReplay) }
    /// ``Group/cursorPulls``
    public func cursorPulls() async throws { try await check(.cursorPulls) }
    /// ``Group/concurrentWriters``
    public func concurrentWriters() async throws { try await check(.concurrentWriters) }
    /// ``Group/tombstones``
    public func tombstones() async throws { try await check(.tombstones) }
    /// ``Group/identityIsolation``
    public func identityIsolation() async throws { try await check(.identityIsolation) }
    /// ``Group/sharedRules``
    public func sharedRules() async throws { try await check(.sharedRules) }
}
