import Foundation
import Logging
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncWire
import Synchronization

extension NativeRemote: RemoteChangeSource {
    /// The server's change notifications for this remote's identity, without push sync
    /// (see ``changes(device:)``).
    public func changes() -> AsyncStream<RemoteChangeEvent> { changes(device: nil) }

    /// The server's change notifications for this remote's identity (`GET /v1/changes`): a
    /// WebSocket, or the same messages as a server-sent event stream where a WebSocket cannot
    /// be had — the transport has none on this platform, or the upgrade is refused (a proxy
    /// that passes only plain HTTP) while the event stream is answered. The channel
    /// reconnects by itself with exponential backoff and jitter after any failure, a refused
    /// token included (the token is asked for again on each attempt), and ends when the
    /// consumer stops iterating. Each attempt that fails before the subscription is reported
    /// as ``RemoteChangeEvent/unavailable(_:)`` with the reason (a refused connection,
    /// refused credentials); a live channel that drops, as ``RemoteChangeEvent/disconnected``.
    /// A refused WebSocket upgrade is reported at once, as ``SyncError/Code/rejected`` — a
    /// consumer that polls while the channel is down need not wait for the event stream, which
    /// a proxy that does not pass WebSockets may hold too (buffering a response that never
    /// ends) — and the event stream is then asked within the same attempt: its `subscribed`
    /// makes the channel live, and its refusal is reported as well when it says more
    /// (refused credentials, which a refused upgrade cannot tell from a proxy).
    ///
    /// A server that shuts down says "going away" (a WebSocket's close code 1001, an event
    /// stream's `goingAway` message): the channel then reconnects within a jittered
    /// ``goingAwaySpread`` — behind a load balancer, to another instance — and reports no
    /// disconnection; the next ``RemoteChangeEvent/subscribed`` tells the consumer to catch
    /// up. Only if no server takes the reconnection is it reported, as `unavailable`.
    ///
    /// With `device`, the id of a device registered for ``PushPlatform/webSocket`` push sync,
    /// the channel also carries ``RemoteChangeEvent/dataset(_:)`` for the datasets that
    /// device subscribed to.
    public func changes(device: String?) -> AsyncStream<RemoteChangeEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: RemoteChangeEvent.self, bufferingPolicy: .bufferingNewest(1024))
        let query = "?client=" + clientId + (device.map { "&device=" + HTTPDatasetRemote.escape($0) } ?? "")
        let remote = self
        let task = Task {
            var backoff = Backoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
            let handshakes = HandshakeWatch(timeout: configuration.channelHandshakeTimeout)
            while !Task.isCancelled {
                let connected = ConnectionFlag()
                let goingAway = ConnectionFlag()
                // This attempt's failure was reported already (its WebSocket upgrade was refused).
                let reported = ConnectionFlag()
                let refused: @Sendable (SyncError) -> Void = { failure in
                    reported.set()
                    continuation.yield(.unavailable(failure))
                }
                let receive: @Sendable (String) -> Void = { text in
                    switch Self.channelMessage(text) {
                    case .event(let event)?:
                        if event == .subscribed { connected.set() }
                        continuation.yield(event)
                    case .goingAway?:
                        goingAway.set()
                    case nil:
                        break
                    }
                }
                do {
                    try await handshakes.run(until: connected) {
                        if try await remote.openChannel(query: query, receive: receive, refused: refused) == Self.goingAwayCloseCode {
                            goingAway.set()
                        }
                    }
                } catch {
                    logger.debug("change channel failed", metadata: ["error": "\(remote.describe(error))"])
                    if !Task.isCancelled, !connected.isSet {
                        // After a refused upgrade (reported), only what the refusal could not say.
                        let failure = remote.channelFailure(error)
                        if !reported.isSet || failure.code == .authenticationFailed { continuation.yield(.unavailable(failure)) }
                    }
                }
                if Task.isCancelled { break }
                if connected.isSet, goingAway.isSet {
                    // Not a failure: the server is stopping and another may take the channel.
                    backoff.reset()
                    var spread = Backoff(initial: Self.goingAwaySpread, maximum: Self.goingAwaySpread)
                    try? await Task.sleep(for: spread.nextDelay())
                    continue
                }
                if connected.isSet {
                    continuation.yield(.disconnected)
                    backoff.reset()
                }
                try? await Task.sleep(for: backoff.nextDelay())
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// How long after "going away" a channel reconnects, at most: each client draws its wait
    /// uniformly below it, so the clients of a stopping instance do not all arrive at once.
    public static let goingAwaySpread: Duration = .seconds(1)

    /// RFC 6455's "going away": the server is shutting down.
    static let goingAwayCloseCode: UInt16 = 1001

    /// One connection of the change channel, until it ends (returning the WebSocket's close
    /// code, if it had one): the WebSocket, unless this
    /// remote learned it must use the event stream. A WebSocket the transport cannot open, or
    /// whose upgrade is refused, is asked as an event stream at once; a server that answers
    /// the event stream from then on gets only that (the upgrade is not tried again while
    /// this remote lives). A refused upgrade is passed to `refused` before the event stream
    /// is asked: the channel cannot open as a WebSocket, and the event stream may take until
    /// the handshake's deadline to say whether it can.
    private func openChannel(query: String, receive: @escaping @Sendable (String) -> Void,
                             refused: @Sendable (SyncError) -> Void) async throws -> UInt16? {
        if !routes.channelIsEventStream.withLock({ $0 }) {
            let socketURL = (baseURL.hasPrefix("https://") ? "wss://" + baseURL.dropFirst(8) : "ws://" + baseURL.dropFirst(7))
                + "/v1/changes" + query
            do {
                let bearer = try await currentToken()
                return try await transport.webSocket(url: socketURL, headers: [("Authorization", "Bearer \(bearer)")],
                                                     maxMessageBytes: 1 << 16, receive: receive)
            } catch is WebSocketUnavailable {
                logger.debug("the transport has no WebSocket here: the change channel is an event stream")
            } catch is WebSocketUpgradeRefused {
                logger.debug("the WebSocket upgrade was refused: asking for the event stream")
                refused(SyncError(.rejected, "the change channel's WebSocket upgrade was refused (by a proxy that passes no WebSockets, or by the server); asking for its event stream"))
            }
        }
        try await readEventStream(query: query, receive: receive)
        return nil
    }

    /// Reads `GET /v1/changes` as a server-sent event stream (`Accept: text/event-stream`),
    /// passing each event's data to `receive`, until the response ends. The server writes a
    /// comment every few seconds, so a stream silent for ``eventStreamSilence`` (or the
    /// request timeout, if longer) is dead and is dropped. A refusal is thrown typed, as the
    /// other requests' are; an answer that is not an event stream is
    /// ``SyncError/Code/rejected`` (the server, or a proxy, will not stream).
    private func readEventStream(query: String, receive: @escaping @Sendable (String) -> Void) async throws {
        // The transport's own idle timeout (URLSession's) must outlast the keep-alive comments too.
        let silent = max(configuration.requestTimeout, Self.eventStreamSilence)
        let answer = try await exchange(method: .get, path: "/v1/changes" + query, body: nil, attempts: 1, timeout: silent,
                                        headers: [("Accept", "text/event-stream")]) { response in
            guard (response.header("Content-Type") ?? "").lowercased().hasPrefix("text/event-stream") else {
                throw SyncError(.rejected, "the server answered the change channel with '\(response.header("Content-Type") ?? "")', not an event stream")
            }
            return response
        }
        guard case .answered(let response) = answer else {
            throw SyncError(.rejected, "the server has no change channel (404)")
        }
        if !routes.channelIsEventStream.withLock({ $0 }) {
            routes.channelIsEventStream.withLock { $0 = true }
        }
        let silence = SilenceWatch(timeout: silent)
        var parser = EventStreamParser()
        let body = response.body
        while let chunk = try await silence.race(Task.detached { try await body.next() }) {
            for data in parser.append(chunk) { receive(data) }
        }
    }

    /// How long an event stream may stay silent before it counts as dead: three of the
    /// server's keep-alive intervals.
    static let eventStreamSilence: Duration = .seconds(30)

    /// What a channel message says.
    package enum ChannelMessage: Equatable {
        /// An event for the consumer.
        case event(RemoteChangeEvent)
        /// The server is shutting down (an event stream's last message).
        case goingAway
    }

    /// What a channel message says; `nil` for one this client does not know. The load
    /// generator reads its devices' messages with it too.
    package static func channelMessage(_ text: String) -> ChannelMessage? {
        guard let json = try? JSON.parse(Array(text.utf8)), case .string(let type)? = json["type"] else { return nil }
        switch type {
        case "subscribed":
            return .event(.subscribed)
        case "change":
            guard case .string(let table)? = json["table"] else { return nil }
            return .event(.changed(table: table))
        case "dataset":
            guard case .string(let pool)? = json["identityPoolId"], case .string(let identity)? = json["identityId"],
                  case .string(let name)? = json["datasetName"], case .number(let count)? = json["syncCount"],
                  let syncCount = Int64(count) else { return nil }
            return .event(.dataset(DatasetNotification(identityPoolId: pool, identityId: identity, datasetName: name, syncCount: syncCount)))
        case "goingAway":
            return .goingAway
        default:
            return nil
        }
    }

    /// Why an attempt to open the change channel failed: a refusal keeps its code when it is
    /// ``SyncError/Code/authenticationFailed``; any other refusal is
    /// ``SyncError/Code/rejected`` (the server answers, it only will not open the channel);
    /// no answer is ``SyncError/Code/transient``, with what went wrong.
    func channelFailure(_ error: any Error) -> SyncError {
        guard let error = error as? SyncError else {
            return SyncError(.transient, "the change channel could not connect: \(describe(error))")
        }
        switch error.code {
        case .authenticationFailed, .transient, .rejected: return error
        default: return SyncError(.rejected, "the change channel was refused (\(error.message))")
        }
    }
}

/// Splits a server-sent event stream (the WHATWG format: `data:` lines, a blank line ending
/// each event, `:` comments) into its events' data. Only `data` matters here: the server
/// sends no `event`, `id` or `retry` fields, and they are skipped.
struct EventStreamParser {
    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var hasData = false
    /// A carriage return ended the last chunk: a line feed that begins the next one belongs to it.
    private var afterCarriageReturn = false
    /// The longest line kept (longer ones are cut): a channel message is under 64 KiB.
    static let maximumLine = 1 << 16

    /// The data of every event `chunk` completes, in order.
    mutating func append(_ chunk: [UInt8]) -> [String] {
        var events: [String] = []
        for byte in chunk {
            if afterCarriageReturn {
                afterCarriageReturn = false
                if byte == 0x0A { continue }
            }
            switch byte {
            case 0x0A, 0x0D:
                afterCarriageReturn = byte == 0x0D
                if let event = endLine() { events.append(event) }
            default:
                if line.count < Self.maximumLine { line.append(byte) }
            }
        }
        return events
    }

    /// Ends the current line; returns an event's data when the line was blank.
    private mutating func endLine() -> String? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            guard hasData else { return nil }
            defer { data.removeAll(keepingCapacity: true); hasData = false }
            return String(decoding: data, as: UTF8.self)
        }
        guard line.first != UInt8(ascii: ":") else { return nil }
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
        guard line[..<colon].elementsEqual("data".utf8) else { return nil }
        var value = line[min(colon + 1, line.endIndex)...]
        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        if hasData { data.append(0x0A) }
        data.append(contentsOf: value)
        hasData = true
        return nil
    }
}

/// Whether one connection attempt got as far as its subscription (then losing it is a
/// disconnection worth reporting). A class, because the socket's handler escapes and an
/// `Atomic` alone cannot be captured by an escaping closure.
final class ConnectionFlag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
