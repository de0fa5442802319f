import Synchronization

/// The one fan-out of the project: each subscriber of a topic gets its own `AsyncStream`,
/// and everything published to the topic is yielded to every stream open on it.
///
/// It serves the sync events (one topic, unbounded buffers), the network status (one
/// topic, newest value only, replayed to each new subscriber) and the server's change
/// notices (one topic per identity, so a notice costs one dictionary lookup and touches
/// only that identity's subscribers, however many clients are connected).
///
/// Elements are yielded while the state's lock is held, so every subscriber of a topic
/// sees publications in the order they were made, and a subscriber that joins during a
/// publication either gets that element or the next one. Streams are finished outside the
/// lock, because finishing a stream runs its termination handler, which takes the lock.
package final class Broadcaster<Topic: Hashable & Sendable, Element: Sendable>: Sendable {
    private struct State {
        var subscribers: [Topic: [UInt64: AsyncStream<Element>.Continuation]] = [:]
        var latest: [Topic: Element] = [:]
        var nextId: UInt64 = 0
        var finished = false
    }

    private let state = Mutex(State())
    private let bufferingPolicy: AsyncStream<Element>.Continuation.BufferingPolicy
    private let replaysLatest: Bool

    /// - Parameters:
    ///   - bufferingPolicy: what each subscriber's stream keeps while its consumer is slow.
    ///   - replaysLatest: when `true`, the broadcaster keeps the last element of each topic
    ///     and starts every new subscriber's stream with it.
    package init(bufferingPolicy: AsyncStream<Element>.Continuation.BufferingPolicy, replaysLatest: Bool = false) {
        self.bufferingPolicy = bufferingPolicy
        self.replaysLatest = replaysLatest
    }

    /// A stream of what is published to `topic` from now on (preceded by the topic's latest
    /// element when the broadcaster replays). It ends when the broadcaster is finished;
    /// dropping or cancelling it unsubscribes.
    package func subscribe(to topic: Topic) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: bufferingPolicy)
        let id: UInt64? = state.withLock { state in
            guard !state.finished else { return nil }
            let id = state.nextId
            state.nextId += 1
            state.subscribers[topic, default: [:]][id] = continuation
            if replaysLatest, let latest = state.latest[topic] { continuation.yield(latest) }
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(id, from: topic) }
        return stream
    }

    /// Yields `element` to every subscriber of `topic`.
    package func publish(_ element: Element, to topic: Topic) {
        state.withLock { state in deliver(element, to: topic, in: &state) }
    }

    /// Records and yields `element`; the caller holds the lock, so every subscriber sees
    /// publications in one order.
    private func deliver(_ element: Element, to topic: Topic, in state: inout State) {
        if replaysLatest { state.latest[topic] = element }
        state.subscribers[topic]?.values.forEach { $0.yield(element) }
    }

    /// The last element published to `topic`, when the broadcaster replays.
    package func latest(of topic: Topic) -> Element? {
        state.withLock { $0.latest[topic] }
    }

    /// Ends every open stream; later subscriptions get a stream that has already ended.
    package func finish() {
        let ending = state.withLock { state in
            state.finished = true
            defer { state.subscribers.removeAll() }
            return state.subscribers.values.flatMap(\.values)
        }
        for continuation in ending { continuation.finish() }
    }

    /// How many streams are open, over all topics.
    package var subscriptionCount: Int {
        state.withLock { $0.subscribers.values.reduce(0) { $0 + $1.count } }
    }

    private func unsubscribe(_ id: UInt64, from topic: Topic) {
        state.withLock { state in
            state.subscribers[topic]?[id] = nil
            if state.subscribers[topic]?.isEmpty == true { state.subscribers[topic] = nil }
        }
    }
}

extension Broadcaster where Element: Equatable {
    /// Publishes `element` to `topic` unless it equals the topic's latest element (which
    /// only a replaying broadcaster keeps). Returns whether it was published.
    @discardableResult
    package func publishIfChanged(_ element: Element, to topic: Topic) -> Bool {
        state.withLock { state in
            guard state.latest[topic] != element else { return false }
            deliver(element, to: topic, in: &state)
            return true
        }
    }
}

/// The topic of a broadcaster that has only one: every subscriber hears everything.
package enum SingleTopic: Hashable, Sendable {
    case all
}

extension Broadcaster where Topic == SingleTopic {
    /// Subscribes to the only topic.
    package func subscribe() -> AsyncStream<Element> { subscribe(to: .all) }

    /// Publishes to the only topic.
    package func publish(_ element: Element) { publish(element, to: .all) }

    /// The last element published, when the broadcaster replays.
    package var latest: Element? { latest(of: .all) }
}
