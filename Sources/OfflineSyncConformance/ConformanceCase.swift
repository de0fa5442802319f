import Foundation
import Synchronization
import OfflineSync

/// One case of a group: a name, what it needs, and its body.
struct ConformanceCase: Sendable {
    /// A capability a case needs to run.
    enum Requirement: Sendable {
        case none, persistent, storeFile
    }

    let name: String
    let requirement: Requirement
    let body: @Sendable (CaseContext) async throws -> Void

    init(_ name: String, requires requirement: Requirement = .none,
         _ body: @escaping @Sendable (CaseContext) async throws -> Void) {
        self.name = name
        self.requirement = requirement
        self.body = body
    }
}

/// Thrown by a case that found the store lacks what it checks (known only once the store is
/// open: a ``CommitOrderedStore``): the case is skipped with the reason.
struct ConformanceSkip: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// What a case body works with: its temporary directory, the suite's capabilities, and
/// store opening that the runner cleans up after.
final class CaseContext: Sendable {
    let root: URL
    /// The directory of the case's main store (exists, empty at first).
    let directory: URL
    let capabilities: LocalStoreConformance.Capabilities
    private let makeStore: @Sendable (URL) async throws -> any LocalStore
    /// Every store the case opened, closed at the end.
    private let opened = Mutex<[any LocalStore]>([])

    init(root: URL, capabilities: LocalStoreConformance.Capabilities,
         makeStore: @escaping @Sendable (URL) async throws -> any LocalStore) throws {
        self.root = root
        self.directory = root.appendingPathComponent("store", isDirectory: true)
        self.capabilities = capabilities
        self.makeStore = makeStore
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Opens (or reopens) the store in `directory` (the case's main one by default).
    /// An error from `makeStore` is a failure located at the caller.
    func open(_ directory: URL? = nil, file: String = #fileID, line: Int = #line) async throws -> any LocalStore {
        let store: any LocalStore
        do {
            store = try await makeStore(directory ?? self.directory)
        } catch {
            throw ConformanceFailure("makeStore failed: \(error)", file: file, line: line)
        }
        register(store)
        return store
    }

    /// Calls `makeStore` without turning its error into a failure (for stores expected to fail).
    func tryOpen(_ directory: URL) async throws -> any LocalStore {
        let store = try await makeStore(directory)
        register(store)
        return store
    }

    /// Closes the store, then opens it again from the same directory.
    func reopen(_ store: any LocalStore, _ directory: URL? = nil, file: String = #fileID, line: Int = #line) async throws -> any LocalStore {
        try await must(await store.close(), "closing the store before reopening it", file: file, line: line)
        return try await open(directory, file: file, line: line)
    }

    /// A new empty directory inside the case's temporary directory.
    func makeDirectory(_ name: String) throws -> URL {
        let url = root.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private func register(_ store: any LocalStore) {
        opened.withLock { $0.append(store) }
    }

    /// Closes every store the case opened, ignoring errors (some are closed already).
    func closeAll() async {
        let stores = opened.withLock { opened in
            defer { opened.removeAll() }
            return opened
        }
        for store in stores { try? await store.close() }
    }
}

extension LocalStoreConformance {
    /// Runs one case in a fresh temporary directory and turns its outcome into a result.
    func run(_ testCase: ConformanceCase, group: Group) async -> ConformanceCaseResult {
        switch testCase.requirement {
        case .none: break
        case .persistent where !capabilities.persistent:
            return ConformanceCaseResult(group: group.rawValue, name: testCase.name, failure: nil,
                                         skipReason: "the store is not persistent")
        case .storeFile where capabilities.storeFile == nil:
            return ConformanceCaseResult(group: group.rawValue, name: testCase.name, failure: nil,
                                         skipReason: "no storeFile capability")
        default: break
        }
        let root = FileManager.default.temporaryDirectory
            .appendingPathComponent("offlinesync-conformance-\(UUID().uuidString)", isDirectory: true)
        var failure: ConformanceFailure?
        var skipped: String?
        do {
            let context = try CaseContext(root: root, capabilities: capabilities, makeStore: makeStore)
            do {
                try await testCase.body(context)
            } catch let skip as ConformanceSkip {
                skipped = skip.reason
            } catch let error as ConformanceFailure {
                failure = error
            } catch {
                failure = ConformanceFailure("unexpected error: \(describe(error))", file: "", line: 0)
            }
            await context.closeAll()
        } catch {
            failure = ConformanceFailure("could not create the temporary directory: \(error)", file: "", line: 0)
        }
        try? FileManager.default.removeItem(at: root)
        if let skipped { return ConformanceCaseResult(group: group.rawValue, name: testCase.name, failure: nil, skipReason: skipped) }
        return ConformanceCaseResult(group: group.rawValue, name: testCase.name,
                                     failure: failure?.located(group: group.rawValue, testCase: testCase.name))
    }
}
