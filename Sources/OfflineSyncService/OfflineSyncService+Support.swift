import Foundation
import Synchronization
import OfflineSync

/// The service seen by one caller.
struct IdentityRemote: RemoteStore {
    let service: OfflineSyncService
    let claims: Claims

    func push(_ operations: [PushOperation]) async throws -> [PushResult] {
        try await service.push(claims: claims, operations)
    }

    func pull(_ request: PullRequest) async throws -> PullPage {
        try await service.pull(claims: claims, request)
    }
}

/// The exact count of matching changes after the last page's cursor, per table, identity and
/// predicate, with the table's sequence when it was counted. A paging client's next request
/// starts at that cursor; if the table's sequence has not moved, the count after the new page
/// is the old count minus the page's rows, so a long pull costs one count, not one per page.
/// A shared table's sweep keeps its count here too, with the shared sequence as the table's
/// and the sweep's event and group in place of the epoch (`ViewReader`).
final class RemainingCounts: Sendable {
    struct Key: Hashable {
        var table: String
        var identity: Identity
        var predicate: QueryPredicate
    }
    struct Entry {
        var epoch: String
        var after: Int64
        var tableSequence: Int64
        var remaining: Int
    }
    private let entries = Mutex<[Key: Entry]>([:])
    /// How many counts are kept; past it the cache starts over, which costs one recount per pull.
    static let capacity = 4096

    func remaining(_ key: Key, epoch: String, after: Int64, tableSequence: Int64) -> Int? {
        entries.withLock { entries in
            guard let entry = entries[key], entry.epoch == epoch, entry.after == after, entry.tableSequence == tableSequence else {
                return nil
            }
            return entry.remaining
        }
    }

    func store(_ key: Key, epoch: String, after: Int64, tableSequence: Int64, remaining: Int) {
        entries.withLock { entries in
            if entries.count >= Self.capacity, entries[key] == nil { entries.removeAll(keepingCapacity: true) }
            entries[key] = Entry(epoch: epoch, after: after, tableSequence: tableSequence, remaining: remaining)
        }
    }
}

/// Tables already defined in the store, to skip redefinition on the hot path.
final class DefinedTables: Sendable {
    private let names = Mutex(Set<String>())
    func contains(_ name: String) -> Bool { names.withLock { $0.contains(name) } }
    func insert(_ name: String) { _ = names.withLock { $0.insert(name) } }
}
