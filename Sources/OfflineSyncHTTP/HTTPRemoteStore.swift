import AsyncHTTPClient
import Logging
import OfflineSync
@_exported import OfflineSyncTransport

/// A ``OfflineSync/RemoteStore`` over HTTP on AsyncHTTPClient (SwiftNIO): the native API of
/// an OfflineSync server, with deadlines, retries, typed refusals, the page stream and the
/// change channel as ``OfflineSyncTransport/NativeRemote`` describes them. Pick it on a
/// server or a Linux client; on a device, `OfflineSyncURLSession`'s `URLSessionRemoteStore`
/// behaves the same without linking SwiftNIO.
///
/// ```swift
/// let remote = HTTPRemoteStore(baseURL: "http://127.0.0.1:8080", token: { myToken })
/// let context = try await SyncContext(store: local, remote: remote)
/// ```
public struct HTTPRemoteStore: NativeRemoteBacked {
    /// The remote over AsyncHTTPClient, which gives this type its API (``OfflineSyncTransport/NativeRemoteBacked``).
    public let native: NativeRemote

    /// Creates a remote for the server at `baseURL`; see
    /// ``OfflineSyncTransport/NativeRemote/init(baseURL:configuration:transport:logger:token:)``
    /// for `token`. `client` defaults to ``defaultClient``.
    public init(baseURL: String, configuration: Configuration = .init(), client: HTTPClient = HTTPRemoteStore.defaultClient,
                logger: Logger = Logger(label: "offline-sync.http"), token: @escaping @Sendable () async throws -> String) {
        native = NativeRemote(baseURL: baseURL, configuration: configuration, transport: AsyncHTTPClientTransport(client: client),
                              logger: logger, token: token)
    }

    /// The client a remote uses unless given another: AsyncHTTPClient's shared settings, but
    /// a connection that cannot be established fails its attempt at once (connection refused,
    /// or after 5 s), so the remote's own backoff — 100 ms doubling to 10 s — decides when to
    /// try again. (The shared client retries the connection inside one attempt until the
    /// request's deadline, which made a closed port cost 30 s per attempt.) It lives as long
    /// as the process.
    public static let defaultClient: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout.connect = .seconds(5)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()
}
