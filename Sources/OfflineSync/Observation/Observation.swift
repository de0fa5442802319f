/// The live value of something read from a local store: a query's records, one record, the
/// outbox's counts. Iterating yields the current value first, then a new value after each
/// commit that changes it — nothing for a commit that leaves it equal — and ends (returns
/// `nil`) when the iterating task is cancelled. It throws what reading the store throws
/// (``SyncError/Code/storeClosed`` once the store is closed).
///
/// Values are read when the iterator asks for the next one, so a consumer that is busy
/// while many commits land gets one fresh value afterwards, never a backlog, and writers
/// never wait for it. Each iterator is one observation with its own reads: iterate once per
/// screen, not once per row.
public struct Observation<Element: Sendable>: AsyncSequence, Sendable {
    let observer: StoreObserver
    let tables: Set<String>
    let interest: StoreObserver.Interest
    let read: @Sendable (any LocalReadTransaction) throws -> Element
    let same: @Sendable (Element, Element) -> Bool

    /// An observation of `tables` whose value `read` computes in a read transaction, and
    /// which shows a new value only when it differs from the last by `same`.
    init(observer: StoreObserver, tables: Set<String>, interest: StoreObserver.Interest,
         read: @escaping @Sendable (any LocalReadTransaction) throws -> Element,
         same: @escaping @Sendable (Element, Element) -> Bool) {
        self.observer = observer
        self.tables = tables
        self.interest = interest
        self.read = read
        self.same = same
    }

    /// Starts the observation: commits from now on are noticed.
    public func makeAsyncIterator() -> Iterator {
        let (id, wake) = observer.register(tables: tables, interest: interest)
        return Iterator(observation: self, id: id, wake: wake.makeAsyncIterator())
    }

    /// Yields the observation's values (see ``Observation``).
    public struct Iterator: AsyncIteratorProtocol {
        let observation: Observation
        let id: UInt64
        var wake: AsyncStream<Void>.Iterator
        var last: Element?
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
                observation.observer.beginRead(id)
                let value: Element
                do {
                    value = try await observation.observer.store.read(observation.read)
                } catch {
                    observation.observer.endRead(id)
                    throw error
                }
                observation.observer.endRead(id)
                if let last, observation.same(last, value) {
                    guard await waitForChange() else { return nil }
                    continue
                }
                last = value
                return value
            }
        }

        /// Waits until a commit concerns the observation; `false` when the task is cancelled.
        private mutating func waitForChange() async -> Bool {
            while !observation.observer.isDirty(id) {
                // The wake stream ends (nil) when the task is cancelled.
                guard await wake.next() != nil else { return false }
            }
            return !Task.isCancelled
        }
    }
}

extension Observation where Element: Equatable {
    init(observer: StoreObserver, tables: Set<String>, interest: StoreObserver.Interest,
         read: @escaping @Sendable (any LocalReadTransaction) throws -> Element) {
        self.init(observer: observer, tables: tables, interest: interest, read: read, same: ==)
    }
}
