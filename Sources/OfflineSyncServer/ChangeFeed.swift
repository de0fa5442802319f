import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService
import Synchronization

/// A change committed by the server, and who hears of it: an identity's connections or a
/// large group's members (``Topic``); and what changed (``Change``): rows of a table, a
/// dataset (push sync), or — told only to the server's own connections — an identity's
/// reading of large groups.
public struct ChangeNotice: Sendable, Hashable {
    /// Whose subscribers hear a notice. Compared by the bytes of its identity or group key,
    /// so two identities that differ only in Unicode normalisation are two topics.
    public enum Topic: Sendable, Hashable, CustomStringConvertible {
        /// One identity's connections.
        case identity(String)
        /// The connections of a large group's members: the group's key, as the service
        /// reports it in `PushReport.groupsChanged`. No identity's topic equals a group's.
        case group(GroupKey)
        /// The connections of every identity that reads some table through an `everyone`
        /// grant: a write to such a table is published here once, and each connection passes
        /// it on only when its own claims meet that table's grant.
        case everyone

        public static func == (lhs: Topic, rhs: Topic) -> Bool {
            switch (lhs, rhs) {
            case let (.identity(a), .identity(b)): return ExactString(a) == ExactString(b)
            case let (.group(a), .group(b)): return a == b
            case (.everyone, .everyone): return true
            default: return false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .identity(let identity): hasher.combine(0); hasher.combine(ExactString(identity))
            case .group(let group): hasher.combine(1); hasher.combine(group)
            case .everyone: hasher.combine(2)
            }
        }

        public var description: String {
            switch self {
            case .identity(let identity): return "identity \(identity)"
            case .group(let group): return "group " + OfflineSyncService.hex(group.text)
            case .everyone: return "everyone"
            }
        }
    }

    /// What changed. Tables and members compare by their bytes.
    public enum Change: Sendable, Hashable {
        /// Rows of this table: the topic's subscribers should pull it.
        case table(String)
        /// A dataset and its new sync count (push sync), on its identity's topic.
        case dataset(DatasetNotification)
        /// On an identity's topic: the identity began, ended or changed its reading of large
        /// groups (it joined or left one, its role changed, a group of its turned large), so
        /// its connections re-read the groups they listen to. Not sent on to clients.
        case groups
        /// On a group's topic: this member's reading of the group changed, so its
        /// connections stop hearing the group until they have re-read it, and no notice of
        /// the group published after the change reaches a member who lost it. Not sent on
        /// to clients.
        case member(String)

        public static func == (lhs: Change, rhs: Change) -> Bool {
            switch (lhs, rhs) {
            case let (.table(a), .table(b)), let (.member(a), .member(b)): return ExactString(a) == ExactString(b)
            case let (.dataset(a), .dataset(b)): return a == b
            case (.groups, .groups): return true
            default: return false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .table(let table): hasher.combine(0); hasher.combine(ExactString(table))
            case .dataset(let dataset): hasher.combine(1); hasher.combine(dataset)
            case .groups: hasher.combine(2)
            case .member(let member): hasher.combine(3); hasher.combine(ExactString(member))
            }
        }
    }

    /// Who hears the notice.
    public var topic: Topic
    /// What changed.
    public var change: Change
    /// The client whose push caused the change (its `X-OfflineSync-Client`), when the change
    /// is only what that client wrote: that client's own change channel skips the notice,
    /// since it already holds the change. `nil` when any reader may need to pull.
    public var origin: String?

    /// Exact equality: the topic, the change and the origin compare by their bytes, so notices
    /// for two identities or origins that differ only in Unicode normalisation stay two notices.
    public static func == (lhs: ChangeNotice, rhs: ChangeNotice) -> Bool {
        lhs.topic == rhs.topic && lhs.change == rhs.change && lhs.origin.map(ExactString.init) == rhs.origin.map(ExactString.init)
    }

    /// Hashes consistently with `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(topic)
        hasher.combine(change)
        hasher.combine(origin.map(ExactString.init))
    }

    /// A notice of `change` for `topic`'s subscribers.
    public init(_ topic: Topic, _ change: Change, origin: String? = nil) {
        self.topic = topic
        self.change = change
        self.origin = origin
    }

    /// A notice that `identity`'s rows of `table` changed.
    public init(identity: String, table: String) { self.init(.identity(identity), .table(table)) }

    /// A notice that rows of `table` in the large group `group` changed: it reaches the
    /// connections of the members whose pulls read that group's log.
    public init(group: GroupKey, table: String) { self.init(.group(group), .table(table)) }

    /// A notice that rows of `table`, which an `everyone` grant lets callers read, changed:
    /// it reaches the connections whose claims meet that grant.
    public init(everyoneReading table: String) { self.init(.everyone, .table(table)) }

    /// A notice that `identity`'s reading of large groups changed (``Change/groups``).
    public init(groupsChangedFor identity: String) { self.init(.identity(identity), .groups) }

    /// A notice, on `group`'s topic, that `member`'s reading of it changed (``Change/member(_:)``).
    public init(group: GroupKey, member: String) { self.init(.group(group), .member(member)) }

    /// A dataset notice, on the dataset's identity's topic.
    public init(dataset: DatasetNotification) { self.init(.identity(dataset.identityId), .dataset(dataset)) }

    /// The table whose rows changed, for a table notice.
    public var table: String? {
        if case .table(let table) = change { return table }
        return nil
    }

    /// Whether this notice is for the server's connections only, not for clients.
    public var isInternal: Bool {
        switch change {
        case .table, .dataset: return false
        case .groups, .member: return true
        }
    }

    /// The compact form sent between server instances: `<identity byte count>:<identity><table>`
    /// for a table, `d<identity byte count>:<identity><pool byte count>:<pool><name byte
    /// count>:<name><sync count>` for a dataset, `g<hex group key>:<table>` for a group's
    /// rows and `m<hex group key>:<member>` for a group's member (a group key may hold bytes
    /// a PostgreSQL `NOTIFY` payload may not), `r<identity>` for a change of an identity's
    /// groups, `p<table>` for a table everyone may read; any of them after `o<origin byte
    /// count>:<origin>` when the notice has an origin. An instance that does not know a form
    /// drops it.
    package var encoded: String {
        if let origin {
            return "o" + CompositeKey.packed(origin, last: ChangeNotice(topic, change).encoded)
        }
        switch (topic, change) {
        case let (.identity(identity), .table(table)): return CompositeKey.packed(identity, last: table)
        case let (.identity, .dataset(dataset)):
            return "d" + CompositeKey.packed(dataset.identityId, dataset.identityPoolId, dataset.datasetName, last: String(dataset.syncCount))
        case let (.identity(identity), .groups): return "r" + identity
        case let (.group(group), .table(table)): return "g" + OfflineSyncService.hex(group.text) + ":" + table
        case let (.group(group), .member(member)): return "m" + OfflineSyncService.hex(group.text) + ":" + member
        case let (.everyone, .table(table)): return "p" + table
        case (.identity, .member), (.group, .dataset), (.group, .groups), (.everyone, .dataset), (.everyone, .groups), (.everyone, .member):
            // No initializer makes these; they have no compact form, and a relay drops them.
            return ""
        }
    }

    /// Reads ``encoded``'s form; `nil` for anything else.
    package init?(encoded: String) {
        if encoded.first == "o" {
            guard let (parts, rest) = CompositeKey.unpack(encoded.dropFirst(), count: 1), rest.first != "o",
                  var notice = ChangeNotice(encoded: String(rest)) else { return nil }
            notice.origin = parts[0]
            self = notice
            return
        }
        if encoded.first == "g" || encoded.first == "m" {
            let parts = encoded.dropFirst().split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[1].isEmpty, let group = OfflineSyncService.unhex(parts[0]) else { return nil }
            self.init(.group(GroupKey(group)), encoded.first == "m" ? .member(String(parts[1])) : .table(String(parts[1])))
            return
        }
        if encoded.first == "p" {
            guard encoded.count > 1 else { return nil }
            self.init(everyoneReading: String(encoded.dropFirst()))
            return
        }
        if encoded.first == "r" {
            guard encoded.count > 1 else { return nil }
            self.init(groupsChangedFor: String(encoded.dropFirst()))
            return
        }
        if encoded.first == "d" {
            guard let (parts, rest) = CompositeKey.unpack(encoded.dropFirst(), count: 3), let count = Int64(rest) else { return nil }
            self.init(dataset: DatasetNotification(identityPoolId: parts[1], identityId: parts[0], datasetName: parts[2], syncCount: count))
            return
        }
        guard let (parts, rest) = CompositeKey.unpack(Substring(encoded), count: 1), !rest.isEmpty else { return nil }
        self.init(identity: parts[0], table: String(rest))
    }
}

/// Carries change notices to the server's subscribers. ``LocalChangeFeed`` serves one
/// process; ``RelayedChangeFeed`` crosses server instances through a shared channel
/// (PostgreSQL `LISTEN`/`NOTIFY`, for example).
public protocol ChangeFeed: Sendable {
    /// Announces committed changes.
    func publish(_ notices: [ChangeNotice]) async
    /// The notices for `topic` from now on, until the returned stream is dropped.
    func subscribe(to topic: ChangeNotice.Topic) -> AsyncStream<ChangeNotice>
    /// Calls `deliver` with each notice for `topic` from now on, until the subscription is
    /// cancelled. `deliver` runs on the task that delivers the notice and must return at
    /// once (a change channel only queues the notice). The server's change channels listen
    /// this way: a topic heard by ten thousand channels then costs no task per channel.
    func listen(to topic: ChangeNotice.Topic, _ deliver: @escaping @Sendable (ChangeNotice) -> Void) -> FeedSubscription
}

extension ChangeFeed {
    /// Relays ``subscribe(to:)``'s stream to `deliver` on a task of its own: a feed that can
    /// call its listeners directly provides its own.
    public func listen(to topic: ChangeNotice.Topic, _ deliver: @escaping @Sendable (ChangeNotice) -> Void) -> FeedSubscription {
        let notices = subscribe(to: topic)
        let relay = Task {
            for await notice in notices { deliver(notice) }
        }
        return FeedSubscription { relay.cancel() }
    }
}

/// A ``ChangeFeed/listen(to:_:)`` subscription: ``cancel()`` ends it (also when the value is
/// released).
public final class FeedSubscription: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    /// A subscription that `cancel` ends.
    public init(cancel: @escaping @Sendable () -> Void) {
        onCancel = Mutex(cancel)
    }

    deinit { cancel() }

    /// Stops the deliveries; idempotent. A delivery under way may still complete.
    public func cancel() {
        onCancel.withLock { $0.take() }?()
    }
}

/// Delivers notices to the subscribers of this process: a notice reaches only its topic's
/// subscribers.
public final class LocalChangeFeed: ChangeFeed, Sendable {
    /// How many notices a slow subscriber may have waiting before the oldest are dropped.
    /// A dropped notice loses nothing: notices only say "pull now", and a pull fetches every change.
    public static let bufferSize = 256

    /// Topics compare by their exact bytes: a subscriber hears no notice of an identity that is
    /// only canonically equivalent to its own.
    private let broadcaster = Broadcaster<ChangeNotice.Topic, ChangeNotice>(bufferingPolicy: .bufferingNewest(LocalChangeFeed.bufferSize))

    private struct Listeners {
        var byTopic: [ChangeNotice.Topic: TopicListeners] = [:]
        var nextId: UInt64 = 0
        var count = 0
    }

    /// One topic's callbacks, and the array ``deliver(_:)`` hands out: rebuilt only after a
    /// listener comes or goes, so a notice to 10,000 listeners copies no array.
    private struct TopicListeners {
        var byId: [UInt64: @Sendable (ChangeNotice) -> Void] = [:]
        private var cached: [@Sendable (ChangeNotice) -> Void]?

        mutating func set(_ id: UInt64, _ callback: (@Sendable (ChangeNotice) -> Void)?) -> Bool {
            cached = nil
            if let callback {
                byId[id] = callback
                return true
            }
            return byId.removeValue(forKey: id) != nil
        }

        mutating func callbacks() -> [@Sendable (ChangeNotice) -> Void] {
            if let cached { return cached }
            let all = Array(byId.values)
            cached = all
            return all
        }
    }

    /// The ``listen(to:_:)`` callbacks, by topic.
    private let listeners = Mutex(Listeners())

    /// Creates a feed with no subscribers.
    public init() {}

    /// Delivers `notices` to the current subscribers of their topics.
    public func publish(_ notices: [ChangeNotice]) async { deliver(notices) }

    /// Delivers each notice in turn: to the streams of its topic, then to its topic's
    /// listeners, called on this task outside the feed's lock (a listener may cancel a
    /// subscription or listen anew).
    func deliver(_ notices: [ChangeNotice]) {
        for notice in notices {
            broadcaster.publish(notice, to: notice.topic)
            let callbacks = listeners.withLock { $0.byTopic[notice.topic]?.callbacks() ?? [] }
            for deliver in callbacks { deliver(notice) }
        }
    }

    /// Subscribes to `topic`'s notices.
    public func subscribe(to topic: ChangeNotice.Topic) -> AsyncStream<ChangeNotice> {
        broadcaster.subscribe(to: topic)
    }

    /// Calls `deliver` with `topic`'s notices, on the publishing task, until cancelled.
    public func listen(to topic: ChangeNotice.Topic, _ deliver: @escaping @Sendable (ChangeNotice) -> Void) -> FeedSubscription {
        let id = listeners.withLock { listeners -> UInt64 in
            defer { listeners.nextId += 1; listeners.count += 1 }
            _ = listeners.byTopic[topic, default: TopicListeners()].set(listeners.nextId, deliver)
            return listeners.nextId
        }
        return FeedSubscription { [weak self] in
            self?.listeners.withLock { listeners in
                guard listeners.byTopic[topic]?.set(id, nil) == true else { return }
                listeners.count -= 1
                if listeners.byTopic[topic]?.byId.isEmpty == true { listeners.byTopic[topic] = nil }
            }
        }
    }

    /// How many subscriptions and listeners are open (for tests and health reports).
    public var subscriptionCount: Int { broadcaster.subscriptionCount + listeners.withLock { $0.count } }
}

/// A feed shared by several server instances through a message channel: `publish` sends
/// each notice to the channel, and every instance (this one included) delivers what it
/// receives from the channel to its own subscribers.
///
/// ```swift
/// let store = try await PostgreSQLStore(url: …)
/// let feed = RelayedChangeFeed(
///     send: { try await store.notify(channel: "offline_sync_changes", payload: $0) },
///     receive: { try await store.notifications(channel: "offline_sync_changes") })
/// ```
public final class RelayedChangeFeed: ChangeFeed, Sendable {
    private let local = LocalChangeFeed()
    private let send: @Sendable (String) async throws -> Void
    private let relay: Task<Void, Never>
    private let ready: AsyncStream<Void>.Continuation
    private let readyStream: AsyncStream<Void>
    private let gaps: GapListeners

    /// Creates the feed. `receive` opens the channel's incoming messages; when it ends or
    /// fails, it is reopened after a pause (200 ms, doubling to 5 s unless the last one stayed
    /// open for 5 s) until the feed is stopped, and every ``listenForGaps(_:)`` listener is
    /// told: notices sent while it was closed are lost (a failover of the database, a restart).
    public init<Messages: AsyncSequence & Sendable>(
        send: @escaping @Sendable (String) async throws -> Void,
        receive: @escaping @Sendable () async throws -> Messages
    ) where Messages.Element == String {
        self.send = send
        let local = self.local, gaps = GapListeners()
        self.gaps = gaps
        let (readyStream, ready) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.readyStream = readyStream
        self.ready = ready
        relay = Task {
            var listened = false
            var pause = Duration.milliseconds(200)
            while !Task.isCancelled {
                do {
                    let messages = try await receive()
                    ready.yield()
                    // Listening again after a loss: what was sent meanwhile never arrives.
                    if listened { gaps.tell() }
                    listened = true
                    let opened = ContinuousClock.now
                    defer {
                        // A channel that stays up a while earns a quick retry; one that keeps
                        // dropping at once is retried (and ends the channels) ever less often.
                        if ContinuousClock.now - opened >= .seconds(5) { pause = .milliseconds(200) }
                    }
                    for try await message in messages {
                        if let notice = ChangeNotice(encoded: message) { local.deliver([notice]) }
                    }
                } catch {}
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(5))
            }
        }
    }

    deinit { relay.cancel() }

    /// Waits until the channel has been opened once (so notices sent from now on arrive).
    public func waitUntilListening() async {
        for await _ in readyStream { return }
    }

    /// Stops relaying; subscribers' streams stay open but receive nothing more.
    public func stop() { relay.cancel(); ready.finish() }

    /// Sends each notice to the channel. A notice whose send failed (the database is failing
    /// over, or unreachable) is delivered to this instance's subscribers directly; other
    /// instances, whose channel fails with the same database, end their change channels when
    /// they listen again (``listenForGaps(_:)``).
    public func publish(_ notices: [ChangeNotice]) async {
        var unsent: [ChangeNotice] = []
        for notice in Set(notices) {
            let message = notice.encoded
            if message.isEmpty { continue }
            do { try await send(message) } catch { unsent.append(notice) }
        }
        if !unsent.isEmpty { local.deliver(unsent) }
    }

    /// Calls `handler` each time notices may have been lost: the channel was opened again
    /// after it ended or failed. A connection told should make its client catch up (the
    /// server ends its change channel: the client reconnects and pulls).
    public func listenForGaps(_ handler: @escaping @Sendable () -> Void) -> FeedSubscription {
        gaps.add(handler)
    }

    /// Subscribes to `topic`'s notices from every instance.
    public func subscribe(to topic: ChangeNotice.Topic) -> AsyncStream<ChangeNotice> { local.subscribe(to: topic) }

    /// Calls `deliver` with `topic`'s notices from every instance, on the task that receives
    /// them from the channel.
    public func listen(to topic: ChangeNotice.Topic, _ deliver: @escaping @Sendable (ChangeNotice) -> Void) -> FeedSubscription {
        local.listen(to: topic, deliver)
    }
}

/// The ``RelayedChangeFeed/listenForGaps(_:)`` handlers.
private final class GapListeners: Sendable {
    private let handlers = Mutex<(next: UInt64, byId: [UInt64: @Sendable () -> Void])>((0, [:]))

    func add(_ handler: @escaping @Sendable () -> Void) -> FeedSubscription {
        let id = handlers.withLock { handlers -> UInt64 in
            defer { handlers.next += 1 }
            handlers.byId[handlers.next] = handler
            return handlers.next
        }
        return FeedSubscription { [weak self] in _ = self?.handlers.withLock { $0.byId.removeValue(forKey: id) } }
    }

    /// Calls every handler, outside the lock.
    func tell() {
        for handler in handlers.withLock({ Array($0.byId.values) }) { handler() }
    }
}
