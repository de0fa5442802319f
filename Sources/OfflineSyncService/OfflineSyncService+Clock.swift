import OfflineSync

extension OfflineSyncService {
    /// What one write transaction hands out in one table: change sequence numbers and
    /// `updatedAt` stamps, both read from the table's ``SequenceRow`` on first use and saved
    /// back to it before the transaction commits.
    ///
    /// On a store that is not a ``CommitOrderedStore``, writers of one table run one after
    /// another (the ``LocalStore`` contract: SQLite's single writer), so a stamp taken here is
    /// later than every stamp of every earlier commit to the table. A stamp is the wall
    /// clock, or one millisecond after the table's previous stamp when the clock has not moved
    /// past it (two writes in one millisecond, a batch, a clock stepped back). `updatedAt` is
    /// therefore strictly increasing in commit order, and a client that pulls with
    /// `updatedAt gt <the last one it saw>` — as every Datasync client does — can neither skip
    /// nor repeat a committed row. The cost: a table written faster than 1,000 rows a second
    /// runs its stamps ahead of the clock by the excess, until the rate drops.
    ///
    /// On a ``CommitOrderedStore`` a push's clock is not its table's row: its numbers are the
    /// transaction's ``ChangeOrder`` (the table's first 2⁴⁰ numbers are the counter's, so a
    /// table's numbers still only grow), every stamp is the store's clock as the transaction
    /// began (so stamps may be equal, and are not in commit order), and the row is not saved —
    /// the writers of a table would otherwise all wait on it. Pulls read only below the store's
    /// horizon, and reads that follow stamps only below its stamp horizon, so neither a cursor
    /// nor `updatedAt gt` passes a change that commits later.
    struct TableClock {
        /// The table's epoch, the prefix of its versions and cursors.
        var epoch: String
        /// The next change sequence number to hand out.
        var next: Int64
        /// The last stamp handed out, in milliseconds since 1970 (`Int64.min` before the first).
        var lastStamp: Int64
        /// What the table's versions begin with (``OfflineSyncService/versionPrefix(epoch:)``).
        let versionPrefix: String
        /// The first number this clock may not hand out (the end of a ``ChangeOrder``).
        let end: Int64
        /// Whether each stamp is later than the one before (one writer at a time); a
        /// commit-ordered transaction stamps every change with its clock, so its stamps never
        /// run ahead of the store's clock and a read's stamp horizon passes them as soon as the
        /// transaction ends.
        let strictlyIncreasing: Bool

        init(_ row: SequenceRow, order: ChangeOrder?) throws {
            epoch = row.epoch
            versionPrefix = OfflineSyncService.versionPrefix(epoch: row.epoch)
            guard let order else {
                next = row.sequence + 1
                end = .max
                lastStamp = row.stamp?.millisecondsSince1970 ?? .min
                strictlyIncreasing = true
                return
            }
            strictlyIncreasing = false
            guard order.first > row.sequence, order.count > 0 else {
                throw SyncError(.corrupted, "table '\(row.id)': its change sequence (\(row.sequence)) is past the store's commit order (\(order.first))")
            }
            next = order.first
            end = order.first.addingReportingOverflow(order.count).overflow ? .max : order.first + order.count
            lastStamp = order.clock.millisecondsSince1970
        }

        /// The next change sequence number.
        mutating func sequence() throws -> Int64 {
            guard next < end else {
                throw SyncError(.limitExceeded, "one transaction wrote more changes to one table than the store's commit order gives it")
            }
            defer { next += 1 }
            return next
        }

        /// The next `updatedAt`: `now`, or one millisecond after the previous stamp.
        mutating func stamp(now: Timestamp) -> Timestamp {
            let previous = lastStamp == .min || !strictlyIncreasing ? lastStamp : lastStamp + 1
            lastStamp = max(now.millisecondsSince1970, previous)
            return Timestamp(millisecondsSince1970: lastStamp)
        }

        /// The row to save when the transaction is done.
        func row(table: String) -> SequenceRow {
            SequenceRow(id: table, epoch: epoch, sequence: next - 1,
                        stamp: lastStamp == .min ? nil : Timestamp(millisecondsSince1970: lastStamp))
        }
    }

    /// The clocks of the tables one write transaction touched, told apart by the exact bytes
    /// of their names (as the store tells tables apart). Each operation asks twice (its
    /// sequence number, its stamp), mostly of the table the last one asked of: that clock is
    /// found by comparing one name, the others through a dictionary. Hashing the name for
    /// every question was a visible share of a push's CPU (`perf`, concurrent writers).
    struct TableClocks {
        /// The transaction's change numbers on a ``CommitOrderedStore``; `nil` on a store
        /// whose writers of a table run one after another.
        let order: ChangeOrder?
        private var clocks: [(table: String, clock: TableClock)] = []
        private var positions: [ExactString: Int] = [:]
        private var last = 0

        init(order: ChangeOrder? = nil) {
            self.order = order
        }

        /// Each table touched, with its clock, in the order first touched.
        var all: [(table: String, clock: TableClock)] { clocks }

        /// The rows to save before the transaction commits: those of the clocks that count (none
        /// on a commit-ordered store).
        var rowsToSave: [SequenceRow] {
            clocks.filter(\.clock.strictlyIncreasing).map { $0.clock.row(table: $0.table) }
        }

        /// Runs `body` on `table`'s clock, read from its sequence row on first use.
        private mutating func with<T>(_ table: String, _ txn: any LocalReadTransaction, _ body: (inout TableClock) throws -> T) throws -> T {
            if last < clocks.count, ExactString.sameBytes(clocks[last].table, table) { return try body(&clocks[last].clock) }
            if let position = positions[ExactString(table)] {
                last = position
            } else {
                clocks.append((table, try TableClock(try SequenceRow.of(txn, table: table), order: order)))
                last = clocks.count - 1
                positions[ExactString(table)] = last
            }
            return try body(&clocks[last].clock)
        }

        /// The next number of `table`'s change sequence, and the version it gives a row.
        mutating func nextSequence(of table: String, _ txn: any LocalReadTransaction) throws -> (version: String, value: Int64) {
            try with(table, txn) { clock in
                let value = try clock.sequence()
                return (OfflineSyncService.version(prefix: clock.versionPrefix, sequence: value), value)
            }
        }

        /// The last number of `table`'s change sequence handed out.
        mutating func lastSequence(of table: String, _ txn: any LocalReadTransaction) throws -> Int64 {
            try with(table, txn) { $0.next - 1 }
        }

        /// The next `updatedAt` stamp of `table` (see ``TableClock``).
        mutating func nextStamp(of table: String, now: Timestamp, _ txn: any LocalReadTransaction) throws -> Timestamp {
            try with(table, txn) { $0.stamp(now: now) }
        }
    }
}
