import Synchronization

/// One subscription to a ``SyncContext``'s events (``SyncContext/events()``): every event
/// published after the call, in order, through a buffer of its own that is bounded, so a
/// subscriber that stops reading during a million-row pull costs a fixed amount of memory:
///
/// - progress events (``SyncEvent/pushProgress(done:total:)``, and
///   ``SyncEvent/pullProgress(table:done:total:)`` per table) coalesce once the subscriber is
///   64 events behind: a newer one replaces the one still waiting, and is placed after the
///   events that came in between;
/// - other events are kept up to ``SyncOptions/eventBufferLimit``; past it, new events are
///   dropped and the subscriber reads one ``SyncEvent/eventsDropped(count:)`` after the last
///   event kept, counting every event dropped since (progress events in between do not
///   start another marker), so the buffer holds at most the limit, one marker per event
///   kept, and one progress event per kind past the coalescing window. The state they told of can be read again: the outbox
///   (``SyncContext/observeOutbox()``), the status (``SyncContext/observeStatus()``), the
///   operation errors.
///
/// Iterate it from one task at a time. The subscription ends when the context's events are
/// finished (``SyncContext/finishEvents()``, ``SyncContext/close()``), when the iterating
/// task is cancelled, or when every copy of it and of its iterator is gone.
public struct SyncEvents: AsyncSequence, Sendable {
    public typealias Element = SyncEvent
    public typealias Failure = Never

    let subscription: EventSubscription

    public func makeAsyncIterator() -> Iterator {
        Iterator(subscription: subscription)
    }

    /// Yields the subscription's events.
    public struct Iterator: AsyncIteratorProtocol {
        let subscription: EventSubscription

        /// The next event; `nil` once the subscription has ended (after the events it holds).
        public mutating func next() async -> SyncEvent? {
            await subscription.queue.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> SyncEvent? {
            await subscription.queue.next()
        }
    }
}

/// Ends its queue's subscription when the last copy of a ``SyncEvents`` (or its iterator)
/// is gone: the hub holds the queue, not this.
final class EventSubscription: Sendable {
    let queue: EventQueue
    private let end: @Sendable () -> Void

    init(queue: EventQueue, end: @escaping @Sendable () -> Void) {
        self.queue = queue
        self.end = end
    }

    deinit { end() }
}

/// One subscriber's bounded buffer (the policy is ``SyncEvents``'s) and its waiting reader.
///
/// Every push costs O(1) under the lock, however far behind the reader is: a coalesced
/// progress event leaves a hole where it was (found through `newest`, not by a scan), holes
/// are squeezed out once they outnumber the events, and drops add to the one marker that
/// follows the last event kept.
final class EventQueue: Sendable {
    private struct State {
        /// Waiting slots from `head` on (`nil`: a progress event a newer one replaced); the
        /// slots before `head` are read and reclaimed in bulk.
        var slots: [SyncEvent?] = []
        var head = 0
        /// Events waiting (slots from `head` that are not holes).
        var waiting = 0
        /// Events held against the limit (progress events and the drop marker are not).
        var counted = 0
        /// The slot of the newest waiting progress event of each coalescing key.
        var newest: [String: Int] = [:]
        /// The slot of the waiting drop marker that drops add to: the one after the last
        /// event kept (a kept event ends it, so drops after it get a marker of their own).
        var marker: Int?
        var reader: CheckedContinuation<SyncEvent?, Never>?
        var ended = false

        mutating func take() -> SyncEvent? {
            while head < slots.count {
                let slot = head
                head += 1
                guard let event = slots[slot] else { continue }
                waiting -= 1
                if let key = event.coalescingKey {
                    if newest[key] == slot { newest[key] = nil }
                } else if event.isDropMarker {
                    if marker == slot { marker = nil }
                } else {
                    counted -= 1
                }
                reclaim()
                return event
            }
            reclaim()
            return nil
        }

        mutating func append(_ event: SyncEvent) {
            slots.append(event)
            waiting += 1
        }

        /// Drops the read slots in bulk, and squeezes out holes once they outnumber the events.
        mutating func reclaim() {
            if head == slots.count {
                slots.removeAll(keepingCapacity: true)
                head = 0
                newest = [:]
                marker = nil
            } else if (head >= 1024 && head * 2 >= slots.count) || slots.count - head > 2 * waiting + 1024 {
                var moved: [Int: Int] = [:]
                var kept: [SyncEvent?] = []
                kept.reserveCapacity(waiting)
                for index in head..<slots.count where slots[index] != nil {
                    moved[index] = kept.count
                    kept.append(slots[index])
                }
                slots = kept
                head = 0
                newest = newest.compactMapValues { moved[$0] }
                marker = marker.flatMap { moved[$0] }
            }
        }
    }

    /// Waiting events below which progress events do not coalesce: a subscriber that keeps
    /// up (or reads a short run at once, as a test does) sees every one.
    static let coalescingWindow = 64

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Adds `event` (or hands it to the waiting reader), applying the buffer's policy.
    func push(_ event: SyncEvent) {
        state.withLock { state in
            guard !state.ended else { return }
            if let reader = state.reader {
                state.reader = nil
                reader.resume(returning: event)
                return
            }
            if let key = event.coalescingKey {
                // Past the window, at most one event per key waits: the older one leaves a hole.
                if state.waiting >= Self.coalescingWindow, let old = state.newest[key] {
                    state.slots[old] = nil
                    state.waiting -= 1
                }
                state.append(event)
                state.newest[key] = state.slots.count - 1
                state.reclaim()
                return
            }
            if state.counted >= limit {
                if let slot = state.marker, case .eventsDropped(let count)? = state.slots[slot] {
                    state.slots[slot] = .eventsDropped(count: count + 1)
                } else {
                    state.append(.eventsDropped(count: 1))
                    state.marker = state.slots.count - 1
                }
                return
            }
            state.counted += 1
            state.append(event)
            state.marker = nil
        }
    }

    /// Ends the queue: the reader gets the events held, then `nil`.
    func end() {
        state.withLock { state in
            state.ended = true
            if let reader = state.reader {
                state.reader = nil
                reader.resume(returning: nil)
            }
        }
    }

    func next() async -> SyncEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<SyncEvent?, Never>) in
                state.withLock { state in
                    if let event = state.take() { return continuation.resume(returning: event) }
                    if state.ended || Task.isCancelled { return continuation.resume(returning: nil) }
                    precondition(state.reader == nil, "SyncEvents is iterated by more than one task at once")
                    state.reader = continuation
                }
            }
        } onCancel: {
            // A cancelled reader ends the subscription, as an AsyncStream's does.
            end()
        }
    }
}

/// The fan-out of a context's events: one ``EventQueue`` per subscriber. Events are pushed
/// under the hub's lock, so every subscriber sees them in one order.
final class SyncEventHub: Sendable {
    private struct State {
        var queues: [UInt64: EventQueue] = [:]
        var nextId: UInt64 = 0
        var finished = false
    }

    private let state = Mutex(State())
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// A context released without ``finish()`` (never closed) still ends its subscribers'
    /// streams: a `for await` over its events ends, rather than waiting forever on a queue
    /// nothing will push to (and keeping the waiting task and its buffer alive).
    deinit { finish() }

    /// A subscription with the hub's limit (`limit` overrides it: a test's reader that must
    /// miss nothing).
    func subscribe(limit: Int? = nil) -> SyncEvents {
        let queue = EventQueue(limit: limit ?? self.limit)
        let id: UInt64? = state.withLock { state in
            guard !state.finished else { return nil }
            defer { state.nextId += 1 }
            state.queues[state.nextId] = queue
            return state.nextId
        }
        guard let id else {
            queue.end()
            return SyncEvents(subscription: EventSubscription(queue: queue, end: {}))
        }
        return SyncEvents(subscription: EventSubscription(queue: queue, end: { [weak self] in
            self?.state.withLock { _ = $0.queues.removeValue(forKey: id) }
        }))
    }

    func publish(_ event: SyncEvent) {
        state.withLock { state in
            for queue in state.queues.values { queue.push(event) }
        }
    }

    /// Ends every subscription (each reads what it holds, then ends); later ones end at once.
    func finish() {
        let queues = state.withLock { state in
            state.finished = true
            defer { state.queues.removeAll() }
            return Array(state.queues.values)
        }
        for queue in queues { queue.end() }
    }

    var subscriptionCount: Int { state.withLock { $0.queues.count } }
}

extension SyncEvent {
    /// Events that replace a waiting one with the same key in a subscriber's buffer.
    var coalescingKey: String? {
        switch self {
        case .pushProgress: "push"
        case .pullProgress(let table, _, _): "pull/" + table
        case .attachmentProgress(let sha256, let direction, _, _): "attachment/\(direction.rawValue)/" + sha256
        default: nil
        }
    }

    var isDropMarker: Bool {
        if case .eventsDropped = self { true } else { false }
    }
}
