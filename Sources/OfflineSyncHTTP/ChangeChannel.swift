import Foundation
import HTTPTypes
import Logging
import NIOCore
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncWire
import Synchronization
import WSClient

extension HTTPRemoteStore: RemoteChangeSource {
    /// The server's change notifications for this remote's identity, without push sync
    /// (see ``changes(device:)``).
    public func changes() -> AsyncStream<RemoteChangeEvent> { changes(device: nil) }

    /// The server's change notifications for this remote's identity (`GET /v1/changes`, a
    /// WebSocket). The channel reconnects by itself with exponential backoff and jitter after
    /// any failure, a refused token included (the token is asked for again on each attempt),
    /// and ends when the consumer stops iterating. Each attempt that fails before the
    /// subscription is reported as ``RemoteChangeEvent/unavailable(_:)`` with the reason
    /// (a refused connection, refused credentials); a live channel that drops, as
    /// ``RemoteChangeEvent/disconnected``.
    ///
    /// With `device`, the id of a device registered for ``PushPlatform/webSocket`` push sync,
    /// the channel also carries ``RemoteChangeEvent/dataset(_:)`` for the datasets that
    /// device subscribed to.
    public func changes(device: String?) -> AsyncStream<RemoteChangeEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: RemoteChangeEvent.self, bufferingPolicy: .bufferingNewest(1024))
        let url = (baseURL.hasPrefix("https://") ? "wss://" + baseURL.dropFirst(8) : "ws://" + baseURL.dropFirst(7)) + "/v1/changes"
            + "?client=" + clientId + (device.map { "&device=" + HTTPDatasetRemote.escape($0) } ?? "")
        let remote = self
        let logger = self.logger
        let configuration = self.configuration
        let task = Task {
            var backoff = Backoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
            let handshakes = HandshakeWatch(timeout: configuration.channelHandshakeTimeout)
            while !Task.isCancelled {
                let connected = ConnectionFlag()
                do {
                    var socket = WebSocketClientConfiguration()
                    socket.additionalHeaders = [.authorization: "Bearer \(try await remote.currentToken())"]
                    socket.maxFrameSize = 1 << 16
                    let settings = socket
                    try await handshakes.run(until: connected) {
                        try await WebSocketClient.connect(url: url, configuration: settings, logger: logger) { inbound, _, _ in
                            for try await message in inbound.messages(maxSize: 1 << 16) {
                                guard case .text(let text) = message,
                                      let json = try? JSON.parse(Array(text.utf8)), case .string(let type)? = json["type"] else { continue }
                                switch type {
                                case "subscribed":
                                    connected.set()
                                    continuation.yield(.subscribed)
                                case "change":
                                    if case .string(let table)? = json["table"] { continuation.yield(.changed(table: table)) }
                                case "dataset":
                                    guard case .string(let pool)? = json["identityPoolId"], case .string(let identity)? = json["identityId"],
                                          case .string(let name)? = json["datasetName"], case .number(let count)? = json["syncCount"],
                                          let syncCount = Int64(count) else { continue }
                                    continuation.yield(.dataset(DatasetNotification(
                                        identityPoolId: pool, identityId: identity, datasetName: name, syncCount: syncCount)))
                                default:
                                    continue
                                }
                            }
                        }
                    }
                } catch {
                    logger.debug("change channel failed", metadata: ["error": "\(HTTPRemoteStore.describe(error))"])
                    if !Task.isCancelled, !connected.isSet { continuation.yield(.unavailable(await remote.channelFailure(error))) }
                }
                if Task.isCancelled { break }
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
}

extension HTTPRemoteStore {
    /// Why an attempt to open the change channel failed. A refused upgrade does not say why,
    /// so the same request is sent once as plain HTTP, whose answer does: 401 (after the
    /// token provider was asked again) is ``SyncError/Code/authenticationFailed``; another
    /// answer (a proxy without WebSockets answering 404) is ``SyncError/Code/rejected`` — the
    /// remote answers, it only will not open the channel; no answer is
    /// ``SyncError/Code/transient``, with what went wrong.
    func channelFailure(_ error: any Error) async -> SyncError {
        if let error = error as? SyncError { return error.code == .authenticationFailed ? error : SyncError(.transient, error.message) }
        guard let upgrade = error as? WebSocketClientError, upgrade == .webSocketUpgradeFailed else {
            return SyncError(.transient, "the change channel could not connect: \(Self.describe(error))")
        }
        do {
            _ = try await send(method: .GET, path: "/v1/changes", body: nil, attempts: 1)
            return SyncError(.rejected, "the change channel's upgrade was refused")
        } catch let refusal as SyncError where refusal.code == .authenticationFailed {
            return refusal
        } catch let refusal as SyncError {
            return SyncError(refusal.code == .transient ? .transient : .rejected,
                             "the change channel's upgrade was refused (\(refusal.message))")
        } catch {
            return SyncError(.transient, "the change channel's upgrade was refused")
        }
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
