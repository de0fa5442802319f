import OfflineSync
import Synchronization

/// The last operations the sync rules refused (403), newest first, for the operator's
/// console: who, which table, which operation, which item, when — never the row's fields.
/// Bounded: the oldest entry goes when a new one comes past ``capacity``.
public final class RecentRefusals: Sendable {
    /// One refused operation.
    public struct Entry: Sendable, Hashable {
        public var time: Timestamp
        public var identity: String
        public var table: String
        public var operation: OperationKind
        public var itemId: String
    }

    /// The most entries kept.
    public let capacity: Int
    private let entries: Mutex<[Entry]>

    public init(capacity: Int = 50) {
        self.capacity = capacity
        entries = Mutex([])
    }

    /// Notes the 403s among a push's results.
    func record(identity: String, _ operations: [PushOperation], _ results: [PushResult], at time: Timestamp = .now()) {
        let refused = zip(operations, results).compactMap { operation, result -> Entry? in
            guard case .rejected(_, let status) = result.outcome, status == 403 else { return nil }
            return Entry(time: time, identity: identity, table: operation.table, operation: operation.kind, itemId: operation.itemId)
        }
        guard !refused.isEmpty else { return }
        entries.withLock { entries in
            entries.append(contentsOf: refused.suffix(capacity))
            if entries.count > capacity { entries.removeFirst(entries.count - capacity) }
        }
    }

    /// The entries, newest first.
    public var all: [Entry] { entries.withLock { Array($0.reversed()) } }
}
