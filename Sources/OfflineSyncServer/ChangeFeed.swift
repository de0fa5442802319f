import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService

/// A change committed by the server: which identity's rows of which table changed, or
/// (for push sync) which dataset of the identity changed and its new sync count; or which
/// large group's rows of a table changed (one notice for every member, see
/// ``init(group:table:)``); or that an identity's reading of large groups changed (told to
/// the identity, and to each group concerned, see ``init(groupsChangedFor:)`` and
/// ``init(group:member:)``).
public struct ChangeNotice: Sendable, Hashable {
    /// The identity whose rows changed; for a group notice, the group's topic
    /// (``groupTopic(_:)``), which no identity can equal.
    public var identity: String
    /// The table (empty for a dataset change and for ``isGroupsChange``).
    public var table: String
    /// The dataset change, for push sync; `nil` for a table change.
    public var dataset: DatasetNotification?
    /// For a group's member notice: the member whose reading of the group changed.
    public var member: String?
    /// The client whose push caused the change (its `X-OfflineSync-Client`), when the change
    /// is only what that client wrote: that client's own change channel skips the notice,
    /// since it already holds the change. `nil` when any reader may need to pull.
    public var origin: String?

    /// Creates a table notice.
    public init(identity: String, table: String) {
        self.identity = identity
        self.table = table
    }

    /// A notice that rows of `table` in the large group `group` (a key the service reports
    /// in `PushReport.groupsChanged`) changed: it reaches the subscribers of
    /// ``groupTopic(_:)``, the connections of the members whose pulls read that group's log.
    public init(group: String, table: String) {
        self.identity = Self.groupTopic(group)
        self.table = table
    }

    /// A notice that `identity` began, ended or changed its reading of large groups (it
    /// joined or left one, its role changed, a group of its turned large): its connections
    /// re-read the groups they listen to. Not sent on to clients.
    public init(groupsChangedFor identity: String) {
        self.identity = identity
        self.table = ""
    }

    /// A notice, on the group's topic, that `member`'s reading of `group` changed: that
    /// member's connections stop hearing the group until they have re-read it, so no notice
    /// of the group published after the change reaches a member who lost it. Not sent on to
    /// clients.
    public init(group: String, member: String) {
        self.identity = Self.groupTopic(group)
        self.table = ""
        self.member = member
    }

    /// The topic a group's notices are delivered to: the key after a NUL, which an identity
    /// never holds, so no identity's subscribers hear a group's notices by name.
    public static func groupTopic(_ group: String) -> String { "\u{0}" + group }

    /// The large group this notice is about, if it is a group notice.
    public var group: String? { identity.first == "\u{0}" ? String(identity.dropFirst()) : nil }

    /// Whether this notice says its identity's large groups changed.
    public var isGroupsChange: Bool { table.isEmpty && dataset == nil && group == nil }

    /// Whether this notice is for the server's connections only, not for clients.
    var isInternal: Bool { table.isEmpty && dataset == nil }

    /// Exact equality: identities, tables, members and origins are compared by their bytes, so
    /// notices for two identities that differ only in Unicode normalisation stay two notices.
    public static func == (lhs: ChangeNotice, rhs: ChangeNotice) -> Bool {
        ExactString(lhs.identity) == ExactString(rhs.identity) && ExactString(lhs.table) == ExactString(rhs.table)
            && lhs.dataset == rhs.dataset && lhs.member.map(ExactString.init) == rhs.member.map(ExactString.init)
            && lhs.origin.map(ExactString.init) == rhs.origin.map(ExactString.init)
    }

    /// Hashes consistently with `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ExactString(identity))
        hasher.combine(ExactString(table))
        hasher.combine(dataset)
        hasher.combine(member.map(ExactString.init))
        hasher.combine(origin.map(ExactString.init))
    }

    /// Creates a dataset notice.
    public init(dataset: DatasetNotification) {
        self.identity = dataset.identityId
        self.table = ""
        self.dataset = dataset
    }

    /// The compact form sent between server instances: `<identity byte count>:<identity><table>`
    /// for a table, `d<identity byte count>:<identity><pool byte count>:<pool><name byte
    /// count>:<name><sync count>` for a dataset, `g<hex group key>:<table>` for a group's
    /// rows and `m<hex group key>:<member>` for a group's member (a group key may hold bytes
    /// a PostgreSQL `NOTIFY` payload may not), `r<identity>` for a change of an identity's
    /// groups; any of them after `o<origin byte count>:<origin>` when the notice has an origin.
    package var encoded: String {
        if let origin {
            // `o<origin byte count>:<origin>` before the notice's own form.
            var plain = self
            plain.origin = nil
            return "o" + CompositeKey.packed(origin, last: plain.encoded)
        }
        if let group {
            let hex = OfflineSyncService.hex(group)
            return member.map { "m" + hex + ":" + $0 } ?? "g" + hex + ":" + table
        }
        if isGroupsChange { return "r" + identity }
        guard let dataset else { return CompositeKey.packed(identity, last: table) }
        return "d" + CompositeKey.packed(dataset.identityId, dataset.identityPoolId, dataset.datasetName,
                                         last: String(dataset.syncCount))
    }

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
            if encoded.first == "m" {
                self.init(group: group, member: String(parts[1]))
            } else {
                self.init(group: group, table: String(parts[1]))
            }
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
    /// The notices for `identity` from now on, until the returned stream is dropped.
    func subscribe(identity: String) -> AsyncStream<ChangeNotice>
}

/// Delivers notices to the subscribers of this process, one topic per identity: a notice
/// reaches only its identity's subscribers.
public final class LocalChangeFeed: ChangeFeed, Sendable {
    /// How many notices a slow subscriber may have waiting before the oldest are dropped.
    /// A dropped notice loses nothing: notices only say "pull now", and a pull fetches every change.
    public static let bufferSize = 256

    /// Topics are identities' exact bytes: a subscriber hears no notice of an identity that is
    /// only canonically equivalent to its own.
    private let broadcaster = Broadcaster<ExactString, ChangeNotice>(bufferingPolicy: .bufferingNewest(LocalChangeFeed.bufferSize))

    /// Creates a feed with no subscribers.
    public init() {}

    /// Delivers `notices` to the current subscribers of their identities.
    public func publish(_ notices: [ChangeNotice]) async { deliver(notices) }

    func deliver(_ notices: [ChangeNotice]) {
        for notice in notices { broadcaster.publish(notice, to: ExactString(notice.identity)) }
    }

    /// Subscribes to `identity`'s notices.
    public func subscribe(identity: String) -> AsyncStream<ChangeNotice> {
        broadcaster.subscribe(to: ExactString(identity))
    }

    /// How many subscriptions are open (for tests and health reports).
    public var subscriptionCount: Int { broadcaster.subscriptionCount }
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

    /// Creates the feed. `receive` opens the channel's incoming messages; when it ends or
    /// fails, it is reopened after a short pause until the feed is stopped.
    public init<Messages: AsyncSequence & Sendable>(
        send: @escaping @Sendable (String) async throws -> Void,
        receive: @escaping @Sendable () async throws -> Messages
    ) where Messages.Element == String {
        self.send = send
        let local = self.local
        let (readyStream, ready) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.readyStream = readyStream
        self.ready = ready
        relay = Task {
            while !Task.isCancelled {
                do {
                    let messages = try await receive()
                    ready.yield()
                    for try await message in messages {
                        if let notice = ChangeNotice(encoded: message) { local.deliver([notice]) }
                    }
                } catch {}
                try? await Task.sleep(for: .milliseconds(200))
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

    /// Sends each notice to the channel. A failed send is dropped: notices are hints, and
    /// clients also pull on reconnect and on their own schedule.
    public func publish(_ notices: [ChangeNotice]) async {
        for notice in Set(notices) { try? await send(notice.encoded) }
    }

    /// Subscribes to `identity`'s notices from every instance.
    public func subscribe(identity: String) -> AsyncStream<ChangeNotice> { local.subscribe(identity: identity) }
}
