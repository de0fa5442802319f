/// The live value of something read from a local store: a query's records, one record, the
/// outbox's counts. Iterating yields the current value first, then a new value after each
/// commit that changes it — nothing for a commit that leaves it equal — and ends (returns
/// `nil`) when the iterating task is cancelled. It throws what reading the store throws
/// (``SyncError/Code/storeClosed`` once the store is closed).
///
/// Values are brought up to date when the iterator asks for the next one — from the rows the
/// commits since wrote when they can be (no read), by reading the store otherwise — so a
/// consumer that is busy while many commits land gets one fresh value afterwards, never a
/// backlog, and writers never wait for it. Each iterator is one observation with its own reads: iterate once per
/// screen, not once per row. (`LiveValue` keeps the latest value for a SwiftUI view.)
public struct ObservedValue<Element: Sendable>: AsyncSequence, Sendable {
    /// What one read produced: the value and, for values made of records, those records,
    /// which decide whether two reads are equal and which rows the value shows.
    struct Reading: Sendable {
        var value: Element
        var records: [Record]?
        /// The tables the read read, for an observation that learns them from its reads.
        var tables: Set<String>?
    }

    let observer: StoreObserver
    /// The tables watched; for an observation of any read, those of its last read.
    let tables: StoreObserver.Tables
    let interest: StoreObserver.Interest
    let read: @Sendable (any LocalReadTransaction) throws -> Reading
    let same: @Sendable (Reading, Reading) -> Bool
    /// Brings the last records up to date from later commits' rows (``ResultPatch``), and
    /// makes the value of records; `nil` for values that are not made of records.
    let patch: (records: @Sendable ([Record], [TableChange]) -> ResultPatch.Patched?, value: @Sendable ([Record]) throws -> Element)?

    /// An observation of a value made of records: `records` reads them, `value` makes the
    /// element (a typed model decodes them), and equal records mean an equal value.
    /// `patch`, when given, spares a read after commits whose rows it can apply.
    init(observer: StoreObserver, tables: Set<String>, interest: StoreObserver.Interest,
         records: @escaping @Sendable (any LocalReadTransaction) throws -> [Record],
         patch: (@Sendable ([Record], [TableChange]) -> ResultPatch.Patched?)? = nil,
         value: @escaping @Sendable ([Record]) throws -> Element) {
        self.observer = observer
        self.tables = .fixed(tables)
        self.interest = interest
        self.read = { txn in
            let rows = try records(txn)
            return Reading(value: try value(rows), records: rows)
        }
        self.same = { $0.records == $1.records }
        self.patch = patch.map { (records: $0, value: value) }
    }

    /// Starts the observation: commits from now on are noticed.
    public func makeAsyncIterator() -> Iterator {
        let (id, wake) = observer.register(tables: tables, interest: interest, patches: patch != nil)
        return Iterator(observation: self, id: id, wake: wake.makeAsyncIterator())
    }

    /// Yields the observation's values (see ``ObservedValue``).
    public struct Iterator: AsyncIteratorProtocol {
        let observation: ObservedValue
        let id: UInt64
        var wake: AsyncStream<Void>.Iterator
        var last: Reading?
        var started = false

        /// The current value first, then the next different one; `nil` once the task is
        /// cancelled.
        public mutating func next() async throws -> Element? {
            if started {
                guard await waitForChange() else { return nil }
            }
            started = true
            while true {
                if Task.isCancelled { return nil }
                let reading: Reading?
                if let patched = try patched() {
                    // The patch knows whether anything changed: nothing to compare.
                    reading = patched
                } else {
                    let read = try await read()
                    reading = last.map { observation.same($0, read) } == true ? nil : read
                }
                guard let reading else {
                    guard await waitForChange() else { return nil }
                    continue
                }
                last = reading
                return reading.value
            }
        }

        /// Reads the value in a snapshot of the store.
        private func read() async throws -> Reading {
            let observer = observation.observer
            await observer.awaitExternalBaseline()
            observer.beginRead(id)
            let reading: Reading
            do {
                reading = try await observer.store.read(observation.read)
            } catch {
                observer.endRead(id, shown: nil)
                throw error
            }
            observer.endRead(id, shown: reading.records.map { Set($0.lazy.map { ExactString($0.id) }) }, tables: reading.tables)
            return reading
        }

        /// The last value patched with the rows of the commits since (no read): `.some(nil)`
        /// when they leave it unchanged, `nil` when they cannot patch it (then the caller reads).
        private func patched() throws -> Reading?? {
            guard let patch = observation.patch, let records = last?.records,
                  let changes = observation.observer.beginPatch(id) else { return nil }
            guard let patched = patch.records(records, changes) else { return nil }
            observation.observer.endPatch(id, patched.shown, rows: patched.rows)
            guard patched.changed else { return .some(nil) }
            return Reading(value: try patch.value(patched.rows), records: patched.rows)
        }

        /// Waits until a commit concerns the observation; `false` when the task is cancelled.
        private mutating func waitForChange() async -> Bool {
            while !observation.observer.isDue(id) {
                // The wake stream ends (nil) when the task is cancelled.
                guard await wake.next() != nil else { return false }
            }
            return !Task.isCancelled
        }
    }
}

extension ObservedValue where Element: Equatable {
    /// An observation of a value that `read` computes; equal values are skipped.
    init(observer: StoreObserver, tables: Set<String>, interest: StoreObserver.Interest,
         read: @escaping @Sendable (any LocalReadTransaction) throws -> Element) {
        self.observer = observer
        self.tables = .fixed(tables)
        self.interest = interest
        self.read = { txn in Reading(value: try read(txn), records: nil) }
        self.same = { $0.value == $1.value }
        self.patch = nil
    }

    /// An observation of what `read` computes from whichever tables it reads.
    init(observer: StoreObserver, tracking read: @escaping @Sendable (SyncReader) throws -> Element) {
        self.observer = observer
        self.tables = .learned
        self.interest = .anyRow
        self.read = { txn in
            let reader = SyncReader(txn)
            let value = try read(reader)
            return Reading(value: value, records: nil, tables: reader.tables)
        }
        self.same = { $0.value == $1.value }
        self.patch = nil
    }
}
