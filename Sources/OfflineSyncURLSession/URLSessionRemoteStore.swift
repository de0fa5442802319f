import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import OfflineSync
@_exported import OfflineSyncTransport

/// A ``OfflineSync/RemoteStore`` over HTTP on Foundation's `URLSession`: the native API of an
/// OfflineSync server, with deadlines, retries, typed refusals, the page stream and the
/// change channel as ``OfflineSyncTransport/NativeRemote`` describes them, and no SwiftNIO.
/// Pick it on iOS, macOS and the other Apple platforms; `OfflineSyncHTTP`'s
/// `HTTPRemoteStore` behaves the same on AsyncHTTPClient.
///
/// The change channel is a WebSocket (`URLSessionWebSocketTask`) where Foundation has one;
/// on Linux, whose Foundation cannot open WebSockets, it is the server's event stream, with
/// the same events.
///
/// ```swift
/// let remote = URLSessionRemoteStore(baseURL: "https://sync.example.com", token: { try await auth.accessToken() })
/// let context = try await SyncContext(store: local, remote: remote)
/// ```
public struct URLSessionRemoteStore: NativeRemoteBacked {
    /// The remote over `URLSession`, which gives this type its API (``OfflineSyncTransport/NativeRemoteBacked``).
    public let native: NativeRemote

    /// Creates a remote for the server at `baseURL` over `transport` (by default
    /// ``URLSessionTransport/shared``; make one with the app's `URLSessionConfiguration` and
    /// challenge handler to keep its proxies, pinning or `allowsExpensiveNetworkAccess`); see
    /// ``OfflineSyncTransport/NativeRemote/init(baseURL:configuration:transport:logger:token:)`` for `token`.
    public init(baseURL: String, configuration: Configuration = .init(), transport: URLSessionTransport = .shared,
                logger: Logger = Logger(label: "offline-sync.http"), token: @escaping @Sendable () async throws -> String) {
        native = NativeRemote(baseURL: baseURL, configuration: configuration, transport: transport,
                              logger: logger, token: token)
    }
}
