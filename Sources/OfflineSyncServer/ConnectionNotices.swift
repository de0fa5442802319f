import OfflineSync
import OfflineSyncService
import Synchronization

/// What one notification connection hears: its identity's notices, the notices of the
/// large groups whose logs its pulls read, each narrowed to the tables it reads through that
/// group (a member whose role the grant does not admit hears nothing of the group's rows),
/// and the notices of the tables its claims read through an `everyone` grant.
///
/// A write to a large group is published once, to the group's topic, so notifying its
/// thousands of connected members costs one publish and one dictionary lookup per
/// connection, and no store read per member.
///
/// When the identity's reading of a group changes, the push announces it twice: on the
/// identity's topic (the connection re-reads its groups and subscribes to new ones) and on
/// the group's topic (the group's relay re-reads that group before it passes on anything
/// published after the change, so a member who lost the group hears nothing more of it).
/// A group or table the connection starts to hear is announced to the client as a change
/// of that table, so a write published while it was subscribing is not missed.
final class ConnectionNotices: Sendable {
    private struct State {
        /// Per large group: the tables the identity reads through it, and the task relaying
        /// the group's topic.
        var groups: [GroupKey: (tables: Set<String>, relay: Task<Void, Never>)] = [:]
        var own: Task<Void, Never>?
        var everyone: Task<Void, Never>?
        var closed = false
    }

    /// The notices to send the client, one per table waiting at a time.
    let pending: PendingNotices
    private let state = Mutex(State())
    private let feed: any ChangeFeed
    private let service: OfflineSyncService
    private let claims: Claims

    private init(feed: any ChangeFeed, service: OfflineSyncService, claims: Claims, merged: @escaping @Sendable () -> Void) {
        pending = PendingNotices(merged: merged)
        self.feed = feed
        self.service = service
        self.claims = claims
    }

    /// Subscribes to `claims`' identity and its large groups; every notice published after
    /// this returns reaches ``pending``. Call ``close()`` when the connection ends.
    /// `merged` is called for each notice merged into one already waiting (``PendingNotices``).
    static func open(feed: any ChangeFeed, service: OfflineSyncService, claims: Claims,
                     merged: @escaping @Sendable () -> Void = {}) async -> ConnectionNotices {
        let connection = ConnectionNotices(feed: feed, service: service, claims: claims, merged: merged)
        let own = feed.subscribe(to: .identity(claims.identity.text))
        // A store that cannot be read now leaves the groups unheard until the identity's next
        // groups notice; the client still pulls on reconnect and on its own schedule.
        if let groups = try? await service.groupSubscriptions(claims: claims) {
            for (group, tables) in groups { connection.subscribe(group, tables: tables, announcing: false) }
        }
        let relay = Task {
            for await notice in own {
                switch notice.change {
                case .groups: await connection.regroup()
                case .table, .dataset: connection.pending.add(notice)
                case .member: break
                }
            }
        }
        connection.state.withLock { state in
            if state.closed { relay.cancel() } else { state.own = relay }
        }
        // The tables its claims read through an `everyone` grant: the token's claims are fixed
        // for the connection's life, so this set is too.
        let everyoneTables = service.tablesReadByEveryone(claims: claims).map(ExactString.init)
        if !everyoneTables.isEmpty {
            let tables = Set(everyoneTables)
            let notices = feed.subscribe(to: .everyone)
            let everyone = Task { [weak connection] in
                for await notice in notices {
                    guard let connection else { return }
                    if let table = notice.table, tables.contains(ExactString(table)) { connection.pending.add(notice) }
                }
            }
            connection.state.withLock { state in
                if state.closed { everyone.cancel() } else { state.everyone = everyone }
            }
        }
        return connection
    }

    /// After the identity's groups changed: subscribes to the groups it now reads and does
    /// not hear yet, and drops the relays of those it no longer reads (a relay that stayed
    /// would cost the connection a subscription per group it ever left). A group joined again
    /// later is subscribed afresh.
    private func regroup() async {
        guard let groups = try? await service.groupSubscriptions(claims: claims) else { return }
        let (heard, left) = state.withLock { state -> (Set<GroupKey>, [Task<Void, Never>]) in
            var left: [Task<Void, Never>] = []
            for (group, entry) in state.groups where groups[group] == nil {
                state.groups[group] = nil
                left.append(entry.relay)
            }
            return (Set(state.groups.keys), left)
        }
        left.forEach { $0.cancel() }
        for (group, tables) in groups where !heard.contains(group) { subscribe(group, tables: tables, announcing: true) }
    }

    /// Relays `group`'s topic for `tables`; with `announcing`, tells the client those tables changed.
    private func subscribe(_ group: GroupKey, tables: Set<String>, announcing: Bool) {
        let notices = feed.subscribe(to: .group(group))
        let relay = Task { [weak self] in
            for await notice in notices {
                guard let self else { return }
                switch notice.change {
                case .member(let member) where self.claims.identity.isExactly(member):
                    await self.reread(group)
                case .table(let table) where self.state.withLock({ $0.groups[group]?.tables.contains(table) ?? false }):
                    self.pending.add(notice)
                case .table, .member, .dataset, .groups:
                    break
                }
            }
        }
        let added = state.withLock { state -> Bool in
            guard !state.closed, state.groups[group] == nil else { return false }
            state.groups[group] = (tables, relay)
            return true
        }
        guard added else { relay.cancel(); return }
        if announcing { announce(tables) }
    }

    /// After the identity's reading of `group` changed: hears nothing of it until it has
    /// re-read which tables it reads through it (none, when it left).
    private func reread(_ group: GroupKey) async {
        let previous = state.withLock { state -> Set<String> in
            guard let entry = state.groups[group] else { return [] }
            state.groups[group] = ([], entry.relay)
            return entry.tables
        }
        guard let groups = try? await service.groupSubscriptions(claims: claims) else { return }
        guard let tables = groups[group] else {
            // Left: the relay goes, as ``regroup()`` drops it (this task is that relay;
            // cancelling ends its loop). Regrouping reads the groups afresh, so a group joined
            // again meanwhile is subscribed anew rather than lost with the old relay.
            await regroup()
            return
        }
        state.withLock { state in
            if let entry = state.groups[group] { state.groups[group] = (tables, entry.relay) }
        }
        announce(tables.subtracting(previous))
    }

    private func announce(_ tables: Set<String>) {
        for table in tables.sorted() { pending.add(ChangeNotice(identity: claims.identity.text, table: table)) }
    }

    /// Stops every subscription and ends ``pending``; `true` the first time, `false` when it
    /// was closed already.
    @discardableResult
    func close() -> Bool {
        let tasks: [Task<Void, Never>]? = state.withLock { state in
            guard !state.closed else { return nil }
            state.closed = true
            defer { state.groups = [:]; state.own = nil; state.everyone = nil }
            return state.groups.values.map(\.relay) + [state.own, state.everyone].compactMap { $0 }
        }
        guard let tasks else { return false }
        tasks.forEach { $0.cancel() }
        pending.finish()
        return true
    }
}
