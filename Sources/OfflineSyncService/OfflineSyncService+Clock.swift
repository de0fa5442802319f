import OfflineSync

extension OfflineSyncService {
    /// What one write transaction hands out in one table: change sequence numbers and
    /// `updatedAt` stamps, both read from the table's ``SequenceRow`` on first use and saved
    /// back to it before the transaction commits.
    ///
    /// Writers of a store run one after another (the ``LocalStore`` contract: SQLite's single
    /// writer, PostgreSQL's advisory lock across every server instance), so a stamp taken here
    /// is later than every stamp of every earlier commit. A stamp is the wall clock, or one
    /// millisecond after the table's previous stamp when the clock has not moved past it (two
    /// writes in one millisecond, a batch, a clock stepped back). `updatedAt` is therefore
    /// strictly increasing in commit order, and a client that pulls with
    /// `updatedAt gt <the last one it saw>` — as every Datasync client does — can neither skip
    /// nor repeat a committed row. The cost: a table written faster than 1,000 rows a second
    /// runs its stamps ahead of the clock by the excess, until the rate drops.
    struct TableClock {
        /// The table's epoch, the prefix of its versions and cursors.
        var epoch: String
        /// The next change sequence number to hand out.
        var next: Int64
        /// The last stamp handed out, in milliseconds since 1970 (`Int64.min` before the first).
        var lastStamp: Int64

        init(_ row: SequenceRow) {
            epoch = row.epoch
            next = row.sequence + 1
            lastStamp = row.stamp?.millisecondsSince1970 ?? .min
        }

        /// The next change sequence number.
        mutating func sequence() -> Int64 {
            defer { next += 1 }
            return next
        }

        /// The next `updatedAt`: `now`, or one millisecond after the previous stamp.
        mutating func stamp(now: Timestamp) -> Timestamp {
            let previous = lastStamp == .min ? Int64.min : lastStamp + 1
            lastStamp = max(now.millisecondsSince1970, previous)
            return Timestamp(millisecondsSince1970: lastStamp)
        }

        /// The row to save when the transaction is done.
        func row(table: String) -> SequenceRow {
            SequenceRow(id: table, epoch: epoch, sequence: next - 1,
                        stamp: lastStamp == .min ? nil : Timestamp(millisecondsSince1970: lastStamp))
        }
    }

    /// The clocks of the tables one write transaction touched, by table name.
    typealias TableClocks = [String: TableClock]

    /// `table`'s clock in this transaction, read from its sequence row on first use.
    static func clock(of table: String, _ txn: any LocalReadTransaction, _ clocks: inout TableClocks) throws -> TableClock {
        if let clock = clocks[table] { return clock }
        let clock = TableClock(try SequenceRow.of(txn, table: table))
        clocks[table] = clock
        return clock
    }

    /// The next number of `table`'s change sequence, and its epoch.
    static func nextSequence(of table: String, _ txn: any LocalReadTransaction,
                             _ clocks: inout TableClocks) throws -> (epoch: String, value: Int64) {
        var clock = try clock(of: table, txn, &clocks)
        let value = clock.sequence()
        clocks[table] = clock
        return (clock.epoch, value)
    }

    /// The next `updatedAt` stamp of `table` (see ``TableClock``).
    static func nextStamp(of table: String, now: Timestamp, _ txn: any LocalReadTransaction,
                          _ clocks: inout TableClocks) throws -> Timestamp {
        var clock = try clock(of: table, txn, &clocks)
        let stamp = clock.stamp(now: now)
        clocks[table] = clock
        return stamp
    }
}
