import OfflineSync
import OfflineSyncService
import Synchronization

/// What one notification connection hears: its identity's notices, the notices of the
/// large groups whose logs its pulls read, each narrowed to the tables it reads through that
/// group (a member whose role the grant does not admit hears nothing of the group's rows),
/// and the notices of the tables its claims read through an `everyone` grant.
///
/// A write to a large group is published once, to the group's topic, so notifying its
/// thousands of connected members costs one publish and, per connection, one dictionary
/// lookup and one insertion into ``pending`` — run by the publishing task itself
/// (``ChangeFeed/listen(to:_:)``): a connection keeps no task per topic it hears.
///
/// When the identity's reading of a group changes, the push announces it twice: on the
/// identity's topic (the connection re-reads its groups and subscribes to new ones) and on
/// the group's topic (the connection stops passing on the group's notices at once, and
/// re-reads that group before it passes on anything more of it, so a member who lost the
/// group hears nothing more of it). The re-reads run one at a time, on a task that exists
/// only while there is one to do. A group or table the connection starts to hear is
/// announced to the client as a change of that table, so a write published while it was
/// subscribing is not missed.
///
/// A read of the groups that fails (the store is closed, damaged or unreachable) would leave
/// the connection deaf to them for good, with nothing to show for it. So it ends the
/// connection instead (``PendingNotices/fail()``): the channel closes, and its client
/// reconnects, subscribes afresh — reading the groups again — and catches up by pulling.
final class ConnectionNotices: Sendable {
    /// A re-read of the identity's groups to do.
    private enum Reread: Hashable {
        /// All of them: which groups it reads changed.
        case groups
        /// One group, whose member this identity is and whose reading changed.
        case group(GroupKey)
    }

    /// Whether the connection hears what it should.
    private enum Phase {
        /// Subscribed to everything it hears.
        case listening
        /// A read of its groups failed: it no longer hears all it should, and re-reads
        /// nothing more; its channel is closing.
        case failed
        /// Closed (``close()``).
        case closed
    }

    private struct State {
        /// Per large group: the tables the identity reads through it, and its subscription.
        var groups: [GroupKey: (tables: Set<String>, subscription: FeedSubscription)] = [:]
        /// The tables a group's reading held before a change of it emptied them, until the
        /// re-read: the tables it gains are announced against these.
        var before: [GroupKey: Set<String>] = [:]
        var own: FeedSubscription?
        var everyone: FeedSubscription?
        /// The feed's word that notices were lost between instances (a relayed feed's only).
        var gap: FeedSubscription?
        /// Re-reads waiting, in order, and whether a task is doing them.
        var rereads: [Reread] = []
        var rereading = false
        var phase = Phase.listening
    }

    /// The notices to send the client, one per table waiting at a time.
    let pending: PendingNotices
    private let state = Mutex(State())
    private let feed: any ChangeFeed
    private let service: OfflineSyncService
    private let claims: Claims
    /// Told each failed read of the identity's groups that ends the connection.
    private let membershipFailed: @Sendable (any Error) -> Void

    private init(feed: any ChangeFeed, service: OfflineSyncService, claims: Claims, merged: @escaping @Sendable () -> Void,
                 membershipFailed: @escaping @Sendable (any Error) -> Void) {
        pending = PendingNotices(merged: merged)
        self.feed = feed
        self.service = service
        self.claims = claims
        self.membershipFailed = membershipFailed
    }

    /// Whether a read of the identity's groups failed, which ends the connection: its
    /// notices end with ``PendingNotices/Batch/failed``.
    var hasFailed: Bool { state.withLock { $0.phase == .failed } }

    /// Subscribes to `claims`' identity, its large groups and the tables it reads through an
    /// `everyone` grant; every notice published after this returns reaches ``pending``. Call
    /// ``close()`` when the connection ends. `merged` is called for each notice merged into
    /// one already waiting (``PendingNotices``); `membershipFailed` with the error of a read of
    /// the identity's groups that failed, here or later, which ends the connection
    /// (``hasFailed``; the notices end with ``PendingNotices/Batch/failed``).
    static func open(feed: any ChangeFeed, service: OfflineSyncService, claims: Claims,
                     merged: @escaping @Sendable () -> Void = {},
                     membershipFailed: @escaping @Sendable (any Error) -> Void = { _ in }) async -> ConnectionNotices {
        let connection = ConnectionNotices(feed: feed, service: service, claims: claims, merged: merged,
                                           membershipFailed: membershipFailed)
        let own = feed.listen(to: .identity(claims.identity.text)) { [weak connection] notice in
            guard let connection else { return }
            switch notice.change {
            case .groups: connection.schedule(.groups)
            case .table, .dataset: connection.pending.add(notice)
            case .member: break
            }
        }
        // The token's claims are fixed for the connection's life, so the tables it reads
        // through an `everyone` grant are too.
        let everyoneTables = Set(service.tablesReadByEveryone(claims: claims).map(ExactString.init))
        let everyone = everyoneTables.isEmpty ? nil : feed.listen(to: .everyone) { [weak connection] notice in
            guard let connection, let table = notice.table, everyoneTables.contains(ExactString(table)) else { return }
            connection.pending.add(notice)
        }
        // Notices lost between instances (the database failed over): the client catches up.
        let gap = (feed as? RelayedChangeFeed)?.listenForGaps { [weak connection] in connection?.lostNotices() }
        let closed = connection.state.withLock { state in
            if state.phase != .closed { (state.own, state.everyone, state.gap) = (own, everyone, gap) }
            return state.phase == .closed
        }
        if closed { own.cancel(); everyone?.cancel(); gap?.cancel() }
        do {
            let groups = try await service.groupSubscriptions(claims: claims)
            for (group, tables) in groups { connection.subscribe(group, tables: tables, announcing: false) }
        } catch {
            connection.fail(error)
        }
        return connection
    }

    /// A read of the identity's groups failed with `error`: the connection would not hear
    /// them, so it ends (once; nothing after ``close()``), and `membershipFailed` is told —
    /// unless the read was only cancelled, which is no failure of the store.
    private func fail(_ error: any Error) {
        let first = state.withLock { state -> Bool in
            guard state.phase == .listening else { return false }
            state.phase = .failed
            state.rereads = []
            return true
        }
        guard first else { return }
        if !(error is CancellationError) { membershipFailed(error) }
        pending.fail()
    }

    /// Notices may have been lost on their way between instances: the connection ends as
    /// after a failed read (``PendingNotices/fail()``), so its client reconnects and catches
    /// up by pulling, but no membership failure is counted.
    private func lostNotices() {
        let first = state.withLock { state -> Bool in
            guard state.phase == .listening else { return false }
            state.phase = .failed
            state.rereads = []
            return true
        }
        if first { pending.fail() }
    }

    /// Queues a re-read, and starts the task that does them when none runs.
    private func schedule(_ reread: Reread) {
        let start = state.withLock { state -> Bool in
            guard state.phase == .listening else { return false }
            if !state.rereads.contains(reread) { state.rereads.append(reread) }
            guard !state.rereading else { return false }
            state.rereading = true
            return true
        }
        guard start else { return }
        Task { [weak self] in
            while let self, let next = self.state.withLock({ state -> Reread? in
                guard state.phase == .listening, !state.rereads.isEmpty else {
                    state.rereading = false
                    return nil
                }
                return state.rereads.removeFirst()
            }) {
                switch next {
                case .groups: await self.regroup()
                case .group(let group): await self.reread(group)
                }
            }
        }
    }

    /// After the identity's groups changed: subscribes to the groups it now reads and does
    /// not hear yet, and drops the subscriptions of those it no longer reads (one that stayed
    /// would cost the connection a subscription per group it ever left). A group joined again
    /// later is subscribed afresh.
    private func regroup() async {
        let groups: [GroupKey: Set<String>]
        do {
            groups = try await service.groupSubscriptions(claims: claims)
        } catch {
            fail(error)
            return
        }
        let (heard, left) = state.withLock { state -> (Set<GroupKey>, [FeedSubscription]) in
            var left: [FeedSubscription] = []
            for (group, entry) in state.groups where groups[group] == nil {
                state.groups[group] = nil
                state.before[group] = nil
                left.append(entry.subscription)
            }
            return (Set(state.groups.keys), left)
        }
        left.forEach { $0.cancel() }
        for (group, tables) in groups where !heard.contains(group) { subscribe(group, tables: tables, announcing: true) }
    }

    /// Listens to `group`'s topic for `tables`; with `announcing`, tells the client those tables changed.
    private func subscribe(_ group: GroupKey, tables: Set<String>, announcing: Bool) {
        let subscription = feed.listen(to: .group(group)) { [weak self] notice in
            guard let self else { return }
            switch notice.change {
            case .member(let member) where self.claims.identity.isExactly(member):
                // Nothing more of the group passes until it is re-read.
                self.state.withLock { state in
                    guard let entry = state.groups[group] else { return }
                    if state.before[group] == nil { state.before[group] = entry.tables }
                    state.groups[group] = ([], entry.subscription)
                }
                self.schedule(.group(group))
            case .table(let table) where self.state.withLock({ $0.groups[group]?.tables.contains(table) ?? false }):
                self.pending.add(notice)
            case .table, .member, .dataset, .groups:
                break
            }
        }
        let added = state.withLock { state -> Bool in
            guard state.phase != .closed, state.groups[group] == nil else { return false }
            state.groups[group] = (tables, subscription)
            return true
        }
        guard added else { subscription.cancel(); return }
        if announcing { announce(tables) }
    }

    /// After the identity's reading of `group` changed: re-reads which tables it reads
    /// through it (none, when it left) and announces those it gained.
    private func reread(_ group: GroupKey) async {
        let groups: [GroupKey: Set<String>]
        do {
            groups = try await service.groupSubscriptions(claims: claims)
        } catch {
            fail(error)
            return
        }
        guard let tables = groups[group] else {
            // Left: the subscription goes, as ``regroup()`` drops it. Regrouping reads the
            // groups afresh, so a group joined again meanwhile is subscribed anew.
            await regroup()
            return
        }
        let previous = state.withLock { state -> Set<String>? in
            guard let entry = state.groups[group] else { return nil }
            state.groups[group] = (tables, entry.subscription)
            return state.before.removeValue(forKey: group) ?? entry.tables
        }
        if let previous { announce(tables.subtracting(previous)) }
    }

    private func announce(_ tables: Set<String>) {
        for table in tables.sorted() { pending.add(ChangeNotice(identity: claims.identity.text, table: table)) }
    }

    /// Stops every subscription and ends ``pending``; `true` the first time, `false` when it
    /// was closed already.
    @discardableResult
    func close() -> Bool {
        let subscriptions: [FeedSubscription]? = state.withLock { state in
            guard state.phase != .closed else { return nil }
            state.phase = .closed
            defer { state.groups = [:]; state.own = nil; state.everyone = nil; state.gap = nil; state.rereads = [] }
            return state.groups.values.map(\.subscription) + [state.own, state.everyone, state.gap].compactMap { $0 }
        }
        guard let subscriptions else { return false }
        subscriptions.forEach { $0.cancel() }
        pending.finish()
        return true
    }
}
