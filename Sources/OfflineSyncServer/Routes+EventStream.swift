import Foundation
import Hummingbird
import HTTPTypes
import Logging
import NIOCore
import OfflineSync
import OfflineSyncService
import OfflineSyncWire
import ServiceLifecycle

extension Routes {
    // MARK: Change channel as an event stream

    /// `GET /v1/changes` with `Accept: text/event-stream`: the change channel's messages as
    /// server-sent events, for a client that cannot open a WebSocket (Foundation on Linux) or
    /// sits behind a proxy that passes only plain HTTP. Each message is one event whose data
    /// is the JSON text the WebSocket would carry (`subscribed` first); a comment every
    /// ``eventStreamKeepAlive`` keeps proxies from closing an idle stream and tells the
    /// client the server is alive. The stream ends when the token expires (the client comes
    /// back with a fresh one) and when the server shuts down.
    func eventStream(_ request: Request, _ context: SyncRequestContext) throws -> Response {
        guard let caller = context.caller else { throw APIError(.unauthorized, .unauthorized, "a bearer token is required") }
        let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-store"]
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            let relay = await NoticeRelay.open(routes: self, caller: caller, request: request, connection: context.channel)
            defer { relay.close() }
            let events = EventWriter(WriterBox(writer))
            // Opened after the drain ended: never subscribed, sent on at once (as a WebSocket is).
            if relay.isGoingAway {
                try await events.send(NoticeRelay.goingAway)
                try await events.finish()
                return
            }
            // Its groups could not be read: never subscribed, ended at once (the client tries
            // again after its backoff, as a WebSocket's 1011 makes it).
            if relay.hasFailed {
                try await events.finish()
                return
            }
            try await events.send(NoticeRelay.subscribed)
            try await withGracefulShutdownHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await relay.untilTokenExpires() }
                    group.addTask { try await relay.run { try await events.send($0) } }
                    group.addTask {
                        while true {
                            try await Task.sleep(for: Self.eventStreamKeepAlive)
                            try await relay.open.writing { try await events.keepAlive() }
                        }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            } onGracefulShutdown: {
                relay.goAway()
            }
            // The client reconnects at once (to another instance, behind a balancer) without
            // reporting a disconnection, as for a WebSocket's 1001.
            if relay.isGoingAway { try await events.send(NoticeRelay.goingAway) }
            try await events.finish()
        })
    }

    /// How often an idle event stream gets a comment.
    static let eventStreamKeepAlive: Duration = .seconds(10)

    /// Whether `Accept` names `text/event-stream`.
    static func acceptsEventStream(_ headers: HTTPFields) -> Bool {
        headers[values: .accept].contains { value in
            value.split(separator: ",").contains { $0.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == "text/event-stream" }
        }
    }
}

/// Writes one event stream: messages and keep-alive comments from several tasks, one at a time.
///
/// `@unchecked Sendable`: Hummingbird's body writer is not `Sendable`, but the actor below
/// is its only user, so its writes never overlap, and every task that writes ends before the
/// response's body closure returns (a task group inside it).
private final class WriterBox: @unchecked Sendable {
    var writer: any ResponseBodyWriter
    init(_ writer: any ResponseBodyWriter) { self.writer = writer }
}

private actor EventWriter {
    private let box: WriterBox

    init(_ box: WriterBox) {
        self.box = box
    }

    /// One event whose data is `message` (a channel message is one line of JSON, so it is one `data:` line).
    func send(_ message: String) async throws {
        try await box.writer.write(ByteBuffer(string: "data: " + message + "\n\n"))
    }

    func keepAlive() async throws {
        try await box.writer.write(ByteBuffer(string: ":\n\n"))
    }

    func finish() async throws {
        try await box.writer.finish(nil)
    }
}

/// One change channel's relay, whatever carries it (a WebSocket, an event stream): the change
/// notices its caller may hear, as the channel's JSON messages.
struct NoticeRelay: Sendable {
    /// The first message of every channel.
    static let subscribed = String(decoding: JSON.object([("type", .string("subscribed"))]).encoded, as: UTF8.self)
    /// An event stream's last message when the server shuts down (a WebSocket closes with 1001 instead).
    static let goingAway = String(decoding: JSON.object([("type", .string("goingAway"))]).encoded, as: UTF8.self)

    let connection: ConnectionNotices
    let caller: VerifiedToken
    /// A device registered for push sync (platform WEBSOCKET), named by `?device=<id>`: it
    /// also hears its subscribed datasets' changes.
    let device: String?
    /// The client's id (`?client=`), whose own pushes' notices it does not need.
    let client: String?
    let routes: Routes
    /// Set when the server's shutdown ended the relay.
    let shuttingDown: DrainFlag
    /// The channel as the server's registry holds it.
    let open: OpenChannel

    /// Opens the caller's notices (and counts the channel in the metrics until ``close()``);
    /// `request` is the channel's, whose query may name a `device` and a `client`, and
    /// `connection` its connection, closed at once when its client stops reading.
    static func open(routes: Routes, caller: VerifiedToken, request: Request, connection channel: any Channel) async -> NoticeRelay {
        let query = request.uri.queryParameters
        let metrics = routes.server.metrics
        let logger = routes.logger
        let connection = await ConnectionNotices.open(
            feed: routes.server.feed, service: routes.service, claims: caller.claims, merged: { metrics.noticeMerged() },
            membershipFailed: { error in
                metrics.channelMembershipFailed()
                // The error's code or type only: a store's message may name what it read.
                let reason = (error as? SyncError).map { "\($0.code)" } ?? "\(type(of: error))"
                logger.warning("change channel closed: its identity's groups could not be read; the client reconnects",
                               metadata: ["error": .string(reason)])
            })
        routes.server.metrics.channel(+1)
        let shuttingDown = DrainFlag()
        let open = OpenChannel(goAway: {
            shuttingDown.set()
            connection.close()
        }, close: { channel.close(mode: .all, promise: nil) })
        let relay = NoticeRelay(connection: connection, caller: caller, device: query.get("device").map { String($0) },
                                client: query.get("client").flatMap { Routes.clientId(String($0)) }, routes: routes,
                                shuttingDown: shuttingDown, open: open)
        if !routes.server.channels.add(open) { relay.goAway() }
        return relay
    }

    /// Stops the notices; the channel is no longer counted. Idempotent.
    func close() {
        if connection.close() { routes.server.metrics.channel(-1) }
        routes.server.channels.remove(open)
    }

    /// Ends the relay because the server is shutting down (``isGoingAway`` from then on);
    /// the channel's carrier then says so (a WebSocket's 1001, an event stream's last message).
    func goAway() { open.goAway() }

    /// Whether the server's shutdown ended the relay.
    var isGoingAway: Bool { shuttingDown.isSet }

    /// Whether a read of the caller's groups failed (``ConnectionNotices/hasFailed``): the
    /// channel does not hear all it should and closes, its carrier saying so (a WebSocket's
    /// 1011, an event stream's end), and its client reconnects and catches up.
    var hasFailed: Bool { connection.hasFailed }

    /// Returns when the caller's token expires (at once if it has).
    func untilTokenExpires() async throws {
        if let remaining = millisecondsToExpiry { try await Task.sleep(for: .milliseconds(remaining)) }
    }

    /// How long the caller's token has left, in milliseconds; `nil` once it has expired.
    var millisecondsToExpiry: Int64? {
        let remaining = caller.expires.timeIntervalSinceNow
        return remaining > 0 ? Int64(min(remaining, 1e9) * 1000) : nil
    }

    /// Sends each notice the caller may hear, as a channel message, until the notices end.
    /// Notices that arrive while a write waits are merged per table (``PendingNotices``);
    /// a channel with more tables waiting than that holds is closed, as is one whose write
    /// waits past ``SyncServer/Configuration/changeChannelWriteTimeout``. Returns when the
    /// notices end, or fail (``hasFailed``): the carrier then ends the channel.
    func run(_ send: (String) async throws -> Void) async throws {
        while true {
            switch await connection.pending.next() {
            case .finished, .failed:
                return
            case .over:
                if open.abort() { routes.server.metrics.slowChannelClosed() }
                return
            case .notices(let notices):
                for notice in notices {
                    guard let message = await message(for: notice) else { continue }
                    try await open.writing { try await send(message) }
                    routes.server.metrics.noticeSent()
                }
            }
        }
    }

    /// How a notice is written without waiting (``SocketNoticeWriter``).
    enum Immediate {
        /// As a change of this table.
        case frame(String)
        /// Only after ``message(for:)`` has looked the caller's device up.
        case later
        /// Not at all: the caller does not hear it.
        case none
    }

    /// How `notice` is written, worked out with no store read.
    func immediateMessage(for notice: ChangeNotice) -> Immediate {
        Self.immediateMessage(for: notice, client: client)
    }

    /// How `notice` is written to the channel of `client`, worked out with no store read.
    static func immediateMessage(for notice: ChangeNotice, client: String?) -> Immediate {
        if let origin = notice.origin, origin == client { return .none }
        switch notice.change {
        case .table(let table): return .frame(table)
        case .dataset: return .later
        case .groups, .member: return .none
        }
    }

    /// The message telling a client that `table` changed.
    static func changeMessage(table: String) -> String {
        String(decoding: JSON.object([("type", .string("change")), ("table", .string(table))]).encoded, as: UTF8.self)
    }

    /// The channel message for `notice`, or `nil` when the caller does not hear it (its own
    /// push's notice, a dataset its device does not subscribe to, a server-internal notice).
    func message(for notice: ChangeNotice) async -> String? {
        let identity = caller.claims.identity.text
        let datasets = routes.server.datasets
        switch immediateMessage(for: notice) {
        case .none: return nil
        case .frame(let table): return Self.changeMessage(table: table)
        case .later: break
        }
        guard case .dataset(let change) = notice.change,
              let device, (try? await datasets.device(pool: change.identityPoolId, identity: identity,
                                                     deviceId: device)) == .webSocket,
              (try? await datasets.isSubscribed(pool: change.identityPoolId, identity: identity,
                                                dataset: change.datasetName, deviceId: device)) == true
        else { return nil }
        let message = JSON.object([
            ("type", .string("dataset")), ("source", .string("offline-sync")),
            ("identityPoolId", .string(change.identityPoolId)), ("identityId", .string(change.identityId)),
            ("datasetName", .string(change.datasetName)), ("syncCount", .number(String(change.syncCount))),
        ])
        return String(decoding: message.encoded, as: UTF8.self)
    }
}
