import Foundation
import Synchronization
import OfflineSync

/// The shared suite for whole sync scenarios: two clients (two devices of one identity),
/// each with its own local store of the adapter under test, syncing through one remote.
///
/// ```swift
/// let suite = SyncScenarioConformance(makeLocal: { try await MyStore(directory: $0) },
///                                     makeBackend: { _ in … })
/// @Test func conflicts() async throws { try await suite.conflictPolicies() }
/// ```
public struct SyncScenarioConformance: ConformanceSuite {
    /// The groups of scenarios.
    public enum Group: String, CaseIterable, Sendable {
        /// Edits made offline reach the other client after push and pull, deletes included.
        case offlineEdits
        /// The queue collapses consecutive operations on one item, and never rewrites one in flight.
        case collapse
        /// Concurrent edits of one record end as each built-in policy and resolution says.
        case conflictPolicies
        /// Purge refuses while operations are pending unless forced, and resets cursors.
        case purge
        /// A query id makes pulls incremental; without one everything is pulled.
        case incrementalPull
        /// A pull pushes the table's pending operations first and never overwrites them.
        case implicitPush
    }

    let makeLocal: @Sendable (URL) async throws -> any LocalStore
    let makeBackend: @Sendable (URL) async throws -> ConformanceBackend

    /// Creates the suite. `makeLocal` opens a client's local store in a directory (each client
    /// gets its own); `makeBackend` builds a fresh remote backend for each case.
    public init(makeLocal: @escaping @Sendable (_ directory: URL) async throws -> any LocalStore,
                makeBackend: @escaping @Sendable (_ directory: URL) async throws -> ConformanceBackend) {
        self.makeLocal = makeLocal
        self.makeBackend = makeBackend
    }

    /// Runs every case of a group.
    public func run(_ group: Group) async -> [ConformanceCaseResult] {
        let makeLocal = makeLocal, makeBackend = makeBackend
        return await runWithFixture(group: group.rawValue, Self.cases(of: group),
                                    setUp: { try await ScenarioWorld(directory: $0, makeLocal: makeLocal, makeBackend: makeBackend) },
                                    tearDown: { await $0.shutdown() })
    }

    /// ``Group/offlineEdits``
    public func offlineEdits() async throws { try await check(.offlineEdits) }
    /// ``Group/collapse``
    public func collapse() async throws { try await check(.collapse) }
    /// ``Group/conflictPolicies``
    public func conflictPolicies() async throws { try await check(.conflictPolicies) }
    /// ``Group/purge``
    public func purge() async throws { try await check(.purge) }
    /// ``Group/incrementalPull``
    public func incrementalPull() async throws { try await check(.incrementalPull) }
    /// ``Group/implicitPush``
    public func implicitPush() async throws { try await check(.implicitPush) }
}

/// A remote that runs a hook before forwarding each push: lets a scenario write locally
/// while a push is in flight. Forwards everything to the real remote.
struct HookedRemote: RemoteStore {
    let base: any RemoteStore
    let beforePush: @Sendable ([PushOperation]) async throws -> Void

    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        try await beforePush(operations)
        return try await base.push(operations)
    }

    func pull(_ request: PullRequest) async throws -> PullPage { try await base.pull(request) }
}

/// A remote (as a third party might write one) whose pulls answer with set pages, one per
/// call, then an empty last page; pushes go to the real remote. Lets a scenario send rows the
/// project's own server never puts in one page, such as an id named twice.
struct ScriptedPullRemote: RemoteStore {
    let base: any RemoteStore
    let pages: LateBox<[PullPage]>

    func push(_ operations: [PushOperation]) async throws -> [PushResult] { try await base.push(operations) }

    func pull(_ request: PullRequest) async throws -> PullPage {
        var left = pages.value ?? []
        guard !left.isEmpty else { return PullPage(records: [], nextCursor: request.cursor ?? "", remaining: 0) }
        let page = left.removeFirst()
        pages.value = left
        return page
    }
}

/// One scenario's backend and clients; closes them all at the end.
final class ScenarioWorld: Sendable {
    let directory: URL
    let backend: ConformanceBackend
    private let makeLocal: @Sendable (URL) async throws -> any LocalStore
    /// Every store opened for the scenario, closed at the end.
    private let stores = Mutex<[any LocalStore]>([])

    static let schema = TableSchema("notes", fields: [
        FieldDefinition("title", .string), FieldDefinition("body", .string), FieldDefinition("n", .int, indexed: true),
    ])

    init(directory: URL, makeLocal: @escaping @Sendable (URL) async throws -> any LocalStore,
         makeBackend: @Sendable (URL) async throws -> ConformanceBackend) async throws {
        self.directory = directory
        self.makeLocal = makeLocal
        let backendDirectory = directory.appendingPathComponent("backend", isDirectory: true)
        try FileManager.default.createDirectory(at: backendDirectory, withIntermediateDirectories: true)
        backend = try await must(await makeBackend(backendDirectory), "making the backend")
    }

    /// A client with its own local store, as identity `user`, with the `notes` table defined;
    /// its pulls answer with `pages` instead of the backend's when given.
    func client(_ name: String, options: SyncOptions = SyncOptions(),
                hook: (@Sendable ([PushOperation]) async throws -> Void)? = nil,
                pulling pages: LateBox<[PullPage]>? = nil,
                file: String = #fileID, line: Int = #line) async throws -> SyncContext {
        let clientDirectory = directory.appendingPathComponent("client-\(name)", isDirectory: true)
        try FileManager.default.createDirectory(at: clientDirectory, withIntermediateDirectories: true)
        let store = try await must(await makeLocal(clientDirectory), "opening the local store of \(name)", file: file, line: line)
        stores.withLock { $0.append(store) }
        var remote = try await backend.remote("user")
        if let hook { remote = HookedRemote(base: remote, beforePush: hook) }
        if let pages { remote = ScriptedPullRemote(base: remote, pages: pages) }
        let context = try await must(await SyncContext(store: store, remote: remote, options: options),
                                     "opening the sync context of \(name)", file: file, line: line)
        try await must(await context.defineTable(Self.schema), "defining notes", file: file, line: line)
        return context
    }

    func shutdown() async {
        let all: [any LocalStore] = stores.withLock { stores in defer { stores.removeAll() }; return stores }
        for store in all { try? await store.close() }
        try? await backend.shutdown()
    }
}
