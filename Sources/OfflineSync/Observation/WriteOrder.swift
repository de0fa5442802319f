/// Tells whether a write through a ``StoreObserver`` ran alone: no other write was in flight
/// at any moment between its start and its announcement. Such a write's announcement is in
/// commit order with every other announcement (each write before it had announced before it
/// started; each after it starts after it announced), so observations may patch their last
/// result with its rows. A write that overlapped another may be announced before a write
/// that committed earlier, so its announcement makes observations read.
///
/// Kept under the observer's lock, and the decision is taken in the same critical section
/// that hands the write's changes to the watchers: a write that starts after that section
/// is announced after it.
struct WriteOrder {
    /// What a write noted at its start.
    struct Ticket {
        /// The count of overlapping starts when the write started.
        fileprivate let overlaps: UInt64
        /// No other write was in flight when it started.
        fileprivate let alone: Bool
    }

    private var inFlight = 0
    /// Counts the writes that started while another was in flight.
    private var overlaps: UInt64 = 0

    /// A write starts.
    mutating func start() -> Ticket {
        inFlight += 1
        if inFlight > 1 { overlaps &+= 1 }
        return Ticket(overlaps: overlaps, alone: inFlight == 1)
    }

    /// The write of `ticket` is announced (or failed): whether it ran alone.
    mutating func end(_ ticket: Ticket) -> Bool {
        defer { inFlight -= 1 }
        return ticket.alone && overlaps == ticket.overlaps && inFlight == 1
    }
}
