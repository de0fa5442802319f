import Synchronization

/// What the queries on a store's app tables read and kept, for the tests that check a
/// query's cost by construction rather than by time: the rows read (each one decoded), and
/// the most records one query held at once.
package final class GRDBQueryStatistics: Sendable {
    private struct Counts {
        var rowsRead = 0
        var mostHeld = 0
    }

    private let counts = Mutex(Counts())

    package init() {}

    /// The rows the queries read since the store opened or ``reset()``.
    package var rowsRead: Int { counts.withLock { $0.rowsRead } }

    /// The most records one query held at once (its answer included) since the store opened
    /// or ``reset()``.
    package var mostRecordsHeld: Int { counts.withLock { $0.mostHeld } }

    /// Starts counting again.
    package func reset() { counts.withLock { $0 = Counts() } }

    func note(rowsRead: Int) { counts.withLock { $0.rowsRead += rowsRead } }

    func note(held: Int) { counts.withLock { $0.mostHeld = max($0.mostHeld, held) } }
}
